import assert from 'node:assert/strict';
import pg from 'pg';
import { claimDue, fanOut, findWebhook, holdDeliveries, recordOutcomes, retakeFanOuts, saveWebhook, viaOrm, type AttemptOutcome } from '../../src/modules/webhooks/repository.ts';
import { holdOutbox } from '../../src/modules/events/outbox.ts';
import type { ClaimedDelivery } from '../../src/modules/webhooks/entities.ts';
import type { WebhookWorld } from './helpers.ts';
import { deliveryWorld } from './delivery-world.ts';
import { waitFor } from '../support/wait.ts';

// A fresh delivery is written once, with its first attempt's outcome; until then its fan-out
// batch (webhook_fanouts) holds the events under the worker's lease (0019, docs/webhooks.md).

describe('webhook delivery: first attempts written with their outcome, under the fan-out batch', function () {
  this.timeout(60_000);
  const d = deliveryWorld();
  let w: WebhookWorld, db: pg.Client;
  before(() => ({ w, db } = d));

  const repo = () => viaOrm(w.app.deps.orm.em.fork());
  const leaseIn = (ms: number) => () => new Date(w.clock.now().getTime() + ms);
  const outcomeOf = (c: ClaimedDelivery, statusCode: number, at = w.clock.now()): AttemptOutcome => {
    const ok = statusCode < 300;
    return {
      deliveryId: c.id,
      leaseUntil: c.leaseUntil,
      attemptCount: c.attemptCount,
      attempt: { at, statusCode, error: ok ? null : `receiver answered ${statusCode}`, durationMs: 3 },
      state: ok ? 'delivered' : 'pending',
      nextAttemptAt: ok ? null : new Date(at.getTime() + 1_000),
      fresh: c.fresh,
    };
  };
  const finishing = (claims: ClaimedDelivery[]) => {
    const f = claims[0].fresh!.fanOut;
    f.unwritten -= claims.length;
    return f.unwritten === 0 ? [f] : [];
  };
  const batches = async () => (await db.query(`select id, lease_owner, event_ids from webhook_fanouts order by id`)).rows;

  it('a batch whose lease ran out is taken again for the pairs that have no delivery yet, and goes once none is left', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const e1 = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_r1' });
    const e2 = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_r2' });
    const { claims } = await fanOut(repo(), w.clock.now(), 10, leaseIn(1_000), 1, 'worker-a');
    assert.equal(claims.length, 2);
    // The worker writes one first attempt, then dies holding the other.
    const [done, lost] = claims[0].eventId === e1 ? claims : [claims[1], claims[0]];
    assert.deepEqual(await recordOutcomes(repo(), [outcomeOf(done, 200)], w.clock.now(), []), [true]);
    // Before the lease runs out nobody takes the batch.
    assert.deepEqual(await retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 'worker-b'), []);
    w.clock.advance(1_000);
    const again = await retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 'worker-b');
    assert.deepEqual(again.map((c) => [c.eventId, c.webhookId, c.attemptCount]), [[lost.eventId, hook.id, 0]]);
    assert.equal(again[0].eventId, e2);
    assert.deepEqual((await batches()).map((b) => b.lease_owner), ['worker-b']);
    // The first worker's late outcome of the pair it lost writes the delivery (nobody had);
    // the new holder's then only logs its attempt.
    assert.deepEqual(await recordOutcomes(repo(), [outcomeOf(lost, 200)], w.clock.now(), []), [true]);
    assert.deepEqual(await recordOutcomes(repo(), [outcomeOf(again[0], 204)], w.clock.now(), finishing(again)), [false]);
    const ds = await w.deliveries(key, hook.id);
    assert.deepEqual(ds.map((x: { eventId: string; state: string; attempts: Array<{ statusCode: number }> }) => [x.eventId, x.state, x.attempts.map((a) => a.statusCode)]).sort(), [
      [e1, 'delivered', [200]],
      [e2, 'delivered', [200, 204]],
    ].sort());
    assert.deepEqual(await batches(), [], 'the last outcome of its holder took the batch');
    // A batch none of whose pairs is left (every delivery written, its holder gone) is deleted by the next look.
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_r3' });
    const third = await fanOut(repo(), w.clock.now(), 10, leaseIn(1_000), 1, 'worker-c');
    assert.deepEqual(await recordOutcomes(repo(), [outcomeOf(third.claims[0], 200)], w.clock.now(), []), [true]);
    w.clock.advance(1_000);
    assert.deepEqual(await retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000)), []);
    assert.deepEqual(await batches(), []);
  });

  it('two first attempts of one pair in one write (a batch taken again by its own worker): one delivery with both attempts, moved by the first', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_twice' });
    const [first] = (await fanOut(repo(), w.clock.now(), 10, leaseIn(1_000), 1, 'worker-a')).claims;
    w.clock.advance(1_000);
    const [second] = await retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 'worker-a');
    assert.equal(second.eventId, first.eventId);
    assert.notEqual(second.id, first.id);
    const moved = await recordOutcomes(repo(), [outcomeOf(first, 503, new Date(w.clock.now().getTime() - 500)), outcomeOf(second, 200)], w.clock.now(), finishing([second]));
    assert.deepEqual(moved, [true, false]);
    const [delivery] = await w.deliveries(key, hook.id);
    assert.equal(delivery.id, first.id);
    assert.equal(delivery.state, 'pending', 'the first outcome moved it');
    assert.deepEqual(delivery.attempts.map((a: { statusCode: number }) => a.statusCode), [503, 200]);
    assert.deepEqual(await batches(), []);
  });

  it('a first attempt of a webhook deleted meanwhile writes nothing; of one disabled meanwhile, a failure is written held', async () => {
    // Both attempts stay in flight until the webhooks have changed: the receiver holds its
    // answers (500) until then, under a worker whose attempts time out after 20 s, not the
    // world's 400 ms (a change committed after an answer would make this another test).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    w.receiver.respond = () => gate.then(() => 500);
    const patient = w.dispatcher({}, { ...w.app.deps, config: { ...w.app.deps.config, webhookTimeout: 20_000 } });
    const { key, workspaceId } = await w.workspace();
    const gone = await w.register(key, ['message.sent'], '/gone');
    const held = await w.register(key, ['message.sent'], '/held');
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_meanwhile' });
    const round = patient.runRound();
    try {
      await w.receiver.waitFor(2, 10_000);
      assert.equal((await w.app.request('DELETE', `/v1/webhooks/${gone.id}`, { key })).status, 204);
      assert.equal((await w.app.request('PATCH', `/v1/webhooks/${held.id}`, { key, body: { status: 'disabled' } })).status, 200);
    } finally {
      release();
    }
    const r = await round;
    assert.equal(r.retrying, 1);
    assert.equal((await db.query('select count(*)::int as n from webhook_deliveries where webhook_id = $1', [gone.id])).rows[0].n, 0);
    const [h] = await w.deliveries(key, held.id);
    assert.equal(h.state, 'pending');
    assert.equal(h.nextAttemptAt, null, 'held until the webhook is enabled');
    assert.deepEqual(h.attempts.map((a: { statusCode: number }) => a.statusCode), [500]);
    assert.deepEqual(await batches(), [], 'the batch is finished: nothing is owed to a deleted webhook');
  });

  it('a batch taken again after its worker died, with one webhook disabled meanwhile: that one is written held (not lost), the other attempted', async () => {
    const { key, workspaceId } = await w.workspace();
    const off = await w.register(key, ['message.sent'], '/off');
    const on = await w.register(key, ['message.sent'], '/on');
    const e1 = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_crash1' });
    const e2 = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_crash2' });
    const first = await fanOut(repo(), w.clock.now(), 10, leaseIn(1_000), 1, 'worker-a');
    assert.equal(first.claims.length, 4);
    // worker-a dies with every first attempt in flight; meanwhile one webhook is disabled.
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${off.id}`, { key, body: { status: 'disabled' } })).status, 200);
    w.clock.advance(1_000);
    // Four pairs, one delivery id supplied: the statement is run again with enough.
    const again = await retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 'worker-b', 1);
    assert.deepEqual(again.map((c) => [c.eventId, c.webhookId]).sort(), [[e1, on.id], [e2, on.id]].sort());
    assert.equal(new Set(again.map((c) => c.id)).size, 2);
    const held = await w.deliveries(key, off.id);
    assert.deepEqual(held.map((x: { eventId: string; state: string; nextAttemptAt: string | null }) => [x.eventId, x.state, x.nextAttemptAt]).sort(), [
      [e1, 'pending', null],
      [e2, 'pending', null],
    ].sort());
    assert.deepEqual((await batches()).map((b) => b.lease_owner), ['worker-b'], 'the batch is held for the attempts left');
    assert.deepEqual(await recordOutcomes(repo(), again.map((c) => outcomeOf(c, 200)), w.clock.now(), finishing(again)), [true, true]);
    assert.deepEqual(await batches(), []);
    // Enabled, the held deliveries are due at once and go through the claim.
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${off.id}`, { key, body: { status: 'active' } })).status, 200);
    await d.dispatcher.runRound();
    assert.deepEqual(w.receiver.received.filter((r) => r.path === '/off').map((r) => r.json.id).sort(), [e1, e2].sort());
    assert.deepEqual((await w.deliveries(key, off.id)).map((x: { state: string }) => x.state), ['delivered', 'delivered']);
  });

  it('a batch taken again whose only webhook was disabled meanwhile: its deliveries are written held and the batch goes', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const e = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_crash3' });
    assert.equal((await fanOut(repo(), w.clock.now(), 10, leaseIn(1_000), 1, 'worker-a')).claims.length, 1);
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } })).status, 200);
    w.clock.advance(1_000);
    assert.deepEqual(await retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 'worker-b'), []);
    assert.deepEqual(await batches(), []);
    const [held] = await w.deliveries(key, hook.id);
    assert.deepEqual([held.eventId, held.state, held.nextAttemptAt], [e, 'pending', null]);
  });

  it('an event written without the webhooks it is owed to (by a process of an older version during an upgrade) goes to those the old rule gives: active, subscribed, older than the event', async () => {
    const { key, workspaceId } = await w.workspace();
    const on = await w.register(key, ['message.sent'], '/legacy-on');
    const off = await w.register(key, ['message.sent'], '/legacy-off');
    const other = await w.register(key, ['message.bounced'], '/legacy-other');
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${off.id}`, { key, body: { status: 'disabled' } })).status, 200);
    await db.query(`insert into events (id, workspace_id, type, data, created_at) values ('evt_legacy', $1, 'message.sent', '{"messageId":"msg_legacy"}', $2)`, [workspaceId, w.clock.now()]);
    w.clock.advance(1_000);
    const later = await w.register(key, ['message.sent'], '/legacy-later');
    await d.dispatcher.runRound();
    assert.deepEqual(w.receiver.received.filter((r) => r.path.startsWith('/legacy')).map((r) => [r.path, r.json.id]), [['/legacy-on', 'evt_legacy']]);
    for (const h of [off, other, later]) assert.deepEqual(await w.deliveries(key, h.id), [], h.id);
  });

  it('a webhook enabled while a batch is taken again: the retake waits for the enabling, so nothing stays held under an active webhook', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const e = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_race' });
    assert.equal((await fanOut(repo(), w.clock.now(), 10, leaseIn(1_000), 1, 'worker-a')).claims.length, 1);
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } })).status, 200);
    w.clock.advance(1_000);
    // An enabling in flight, as the service makes it: the row locked and changed, the held
    // deliveries released, not committed yet.
    const patch = new pg.Client({ connectionString: w.app.databaseUrl });
    await patch.connect();
    try {
      await patch.query('begin');
      await patch.query(`select id from webhooks where id = $1 for update`, [hook.id]);
      await patch.query(`update webhooks set status = 'active' where id = $1`, [hook.id]);
      await patch.query(`update webhook_deliveries set next_attempt_at = now() where webhook_id = $1 and state = 'pending' and next_attempt_at is null`, [hook.id]);
      const retake = retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 'worker-b');
      // The retake reaches the webhook's row and waits for it (unlocked, it did not wait).
      let done = false;
      void retake.then(() => (done = true));
      await waitFor('the retake waiting for the enabling', async () => {
        assert.equal(done, false, 'the retake finished without waiting for the enabling');
        return (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%webhook_fanouts%' and pid <> pg_backend_pid()`)).rows.length > 0;
      });
      await patch.query('commit');
      const claims = await retake;
      assert.deepEqual(claims.map((c) => [c.eventId, c.webhookId]), [[e, hook.id]], 'attempted: the webhook is active again');
      assert.deepEqual(await w.deliveries(key, hook.id), [], 'nothing written held');
    } finally {
      await patch.end();
    }
  });

  it('a write of outcomes (a retry and a first attempt of one webhook) and a change of that webhook in flight: no deadlock, both commit', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_lock1' });
    // A delivery on its retry schedule, claimed; and a first attempt of a later event, leased.
    await fanOut(repo(), w.clock.now(), 10);
    const [retry] = await claimDue(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 10);
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_lock2' });
    const [first] = (await fanOut(repo(), w.clock.now(), 10, leaseIn(60_000), 1, 'worker-a')).claims;
    assert.ok(retry && first);
    // A disabling in flight, by WebhookService.update's statements (a manual retry, a deletion
    // and an enabling lock the same way: the webhook's row, then its deliveries). Both outcomes
    // are written in one statement while it holds the webhook's row.
    let write!: Promise<{ moved: boolean[] | null; err: Error | null }>;
    await w.app.deps.orm.em.fork().transactional(async (tx) => {
      await holdOutbox(tx);
      const hk = (await findWebhook(tx, workspaceId, hook.id, true))!;
      const now = w.clock.now();
      hk.status = 'disabled';
      hk.updatedAt = now;
      write = recordOutcomes(repo(), [outcomeOf(retry, 200), outcomeOf(first, 200)], now, finishing([first])).then(
        (moved) => ({ moved, err: null }),
        (err: Error) => ({ moved: null, err }),
      );
      await waitFor('the outcomes waiting for the webhook', async () =>
        (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%json_to_recordset%' and pid <> pg_backend_pid()`)).rows.length > 0,
      );
      // Until 2026-11-29 the write had locked the retried delivery before the webhook: this
      // statement then waited for it, and PostgreSQL aborted one of the two as a deadlock.
      await holdDeliveries(tx, hook.id, now);
      await saveWebhook(tx, hk);
    });
    const { moved, err } = await write;
    assert.equal(err, null, String(err));
    assert.deepEqual(moved, [true, true]);
    const ds = await w.deliveries(key, hook.id);
    assert.deepEqual(ds.map((x: { state: string }) => x.state), ['delivered', 'delivered']);
  });

  it('an outcome that finishes a batch taken over meanwhile leaves the new holder its batch', async () => {
    const { workspaceId, key } = await w.workspace();
    await w.register(key, ['message.sent']);
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_fence' });
    const [c] = (await fanOut(repo(), w.clock.now(), 10, leaseIn(1_000), 1, 'worker-a')).claims;
    w.clock.advance(1_000);
    const [taken] = await retakeFanOuts(repo(), w.clock.now(), new Date(w.clock.now().getTime() + 60_000), 'worker-b');
    assert.ok(taken);
    // worker-a thinks its batch is done; the row is worker-b's now (another lease): it stays.
    assert.deepEqual(await recordOutcomes(repo(), [outcomeOf(c, 200)], w.clock.now(), finishing([c])), [true]);
    assert.deepEqual((await batches()).map((b) => b.lease_owner), ['worker-b']);
    assert.deepEqual(await recordOutcomes(repo(), [outcomeOf(taken, 200)], w.clock.now(), finishing([taken])), [false]);
    assert.deepEqual(await batches(), []);
  });
});
