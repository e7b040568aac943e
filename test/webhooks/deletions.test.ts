import assert from 'node:assert/strict';
import pg from 'pg';
import { nativePlaceholders } from '../../src/db/sql.ts';
import { fanOut } from '../../src/modules/webhooks/repository.ts';
import type { WebhookWorld } from './helpers.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { deliveryWorld } from './delivery-world.ts';
import { waitFor, waitForLockWait } from '../support/wait.ts';
import { transactionRetries } from '../../src/db/transaction.ts';

describe('webhook delivery: deleted and disabled webhooks and workspaces', function () {
  this.timeout(60_000);
  const d = deliveryWorld();
  let w: WebhookWorld, db: pg.Client, dispatcher: WebhookDispatcher;
  before(() => ({ w, db, dispatcher } = d));
  const { oneHookOneEvent, attemptsOf, staleClaim } = d;

  it('deleting a workspace (mailgate workspace delete) deletes its deliveries with their attempts; so does deleting a webhook (0009)', async () => {
    const { hook, workspaceId } = await oneHookOneEvent();
    await dispatcher.runRound();
    const count = async () =>
      (
        await db.query(
          `select count(*)::int as deliveries, coalesce(sum(jsonb_array_length(attempts)), 0)::int as attempts from webhook_deliveries where webhook_id = $1`,
          [hook.id],
        )
      ).rows[0];
    assert.deepEqual(await count(), { deliveries: 1, attempts: 1 });
    await w.app.services().workspaces.delete(workspaceId);
    assert.deepEqual(await count(), { deliveries: 0, attempts: 0 });

    const other = await oneHookOneEvent();
    await dispatcher.runRound();
    const countOther = async () => (await db.query(`select count(*)::int as n from webhook_deliveries where webhook_id = $1`, [other.hook.id])).rows[0].n;
    assert.equal(await countOther(), 1);
    assert.equal((await w.app.request('DELETE', `/v1/webhooks/${other.hook.id}`, { key: other.key })).status, 204);
    assert.equal(await countOther(), 0);
  });

  it('deleting a workspace while a fan-out holds its events: no deadlock, and the deliveries written go too', async () => {
    const { workspaceId, hook, eventId } = await oneHookOneEvent();
    // The fan-out's lock order, one step at a time: its events (FOR UPDATE), then the webhooks
    // it writes for (FOR KEY SHARE), then the delivery.
    const fan = new pg.Client({ connectionString: w.app.databaseUrl });
    await fan.connect();
    const retriesBefore = transactionRetries(w.app.deps.orm);
    try {
      await fan.query('begin');
      await fan.query(`select id from events where fanned_out_at is null and workspace_id = $1 for update skip locked`, [workspaceId]);
      const deleting = w.app.services().workspaces.delete(workspaceId);
      await waitForLockWait(w.app.databaseUrl, 'the deletion waiting for the events the fan-out holds');
      // With the deletion holding the webhooks first, this waited for it while it waited for
      // the events: a deadlock, one side aborted after deadlock_timeout.
      await fan.query(`select id from webhooks where workspace_id = $1 and status = 'active' for key share`, [workspaceId]);
      await fan.query(
        `insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, next_attempt_at, created_at, updated_at)
         values ('dlv_race', $1, $2, $3, 'pending', now(), now(), now())`,
        [workspaceId, hook.id, eventId],
      );
      await fan.query(`update events set fanned_out_at = now() where id = $1`, [eventId]);
      await fan.query('commit');
      await deleting;
      // A deadlock would now be retried and succeed: only the count shows there was none.
      assert.equal(transactionRetries(w.app.deps.orm), retriesBefore, 'no deadlock, no retry');
    } finally {
      await fan.end();
    }
    const left = await db.query(`select count(*)::int as n from webhook_deliveries where workspace_id = $1`, [workspaceId]);
    assert.equal(left.rows[0].n, 0);
    assert.equal((await db.query(`select count(*)::int as n from workspaces where id = $1`, [workspaceId])).rows[0].n, 0);
  });

  it('deleting a workspace while a webhook of it is being changed (created, enabled, disabled, resubscribed): no deadlock', async () => {
    const { workspaceId, hook } = await oneHookOneEvent();
    // A webhook change's lock order, one step at a time: the outbox (holdOutbox), then the
    // webhook's row.
    const change = new pg.Client({ connectionString: w.app.databaseUrl });
    await change.connect();
    const retriesBefore = transactionRetries(w.app.deps.orm);
    try {
      await change.query('begin');
      await change.query('lock table events in share mode');
      const deleting = w.app.services().workspaces.delete(workspaceId);
      await waitFor('the deletion waiting for a lock', async () =>
        (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and pid <> pg_backend_pid() and state = 'active'`)).rows.length > 0,
      );
      // With the deletion holding the webhooks first (and waiting for the outbox to delete its
      // events), this waited for it: a deadlock, one side aborted after deadlock_timeout.
      await change.query(`select id from webhooks where id = $1 for update`, [hook.id]);
      await change.query(`update webhooks set status = 'disabled' where id = $1`, [hook.id]);
      await change.query('commit');
      await deleting;
      assert.equal(transactionRetries(w.app.deps.orm), retriesBefore, 'no deadlock, no retry');
    } finally {
      await change.end();
    }
    assert.equal((await db.query(`select count(*)::int as n from webhooks where id = $1`, [hook.id])).rows[0].n, 0);
    assert.equal((await db.query(`select count(*)::int as n from workspaces where id = $1`, [workspaceId])).rows[0].n, 0);
  });

  it('a webhook deleted while a fan-out writes its deliveries: the deletion waits and takes them along', async () => {
    const { key, hook } = await oneHookOneEvent();
    // A fan-out in an open transaction (as the dispatcher's statement is until it commits).
    const fan = new pg.Client({ connectionString: w.app.databaseUrl });
    await fan.connect();
    try {
      await fan.query('begin');
      const r = await fanOut({ run: async (_n, text, params) => (await fan.query(nativePlaceholders(text), params)).rows }, w.clock.now(), 10);
      assert.equal(r.deliveries, 1);
      const deleting = w.app.request('DELETE', `/v1/webhooks/${hook.id}`, { key });
      await waitForLockWait(w.app.databaseUrl, 'the deletion waiting for the deliveries being written');
      await fan.query('commit');
      assert.equal((await deleting).status, 204);
    } finally {
      await fan.end();
    }
    assert.equal((await db.query(`select count(*)::int as n from webhook_deliveries where webhook_id = $1`, [hook.id])).rows[0].n, 0, 'no delivery outlives its webhook');
  });

  it('a disabled webhook gets nothing new; its pending retries wait and resume when it is enabled', async () => {
    w.receiver.respond = () => 500;
    const { key, workspaceId, hook, eventId } = await oneHookOneEvent();
    await dispatcher.runRound();
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } })).status, 200);
    let d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'pending');
    assert.equal(d.nextAttemptAt, null, 'held');
    assert.equal(await w.record(workspaceId, 'message.sent', { messageId: 'msg_during' }), null, 'owed to no webhook: not even written');
    w.clock.advance(60_000);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1, 'no retry and no new event while disabled');
    assert.equal((await w.deliveries(key, hook.id)).length, 1, 'no delivery for the event that happened while disabled');
    const retry = await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key });
    assert.equal(retry.status, 409);
    assert.equal(retry.body.error.code, 'webhook_disabled');
    const unknown = await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/whd_nope/retry`, { key });
    assert.equal(unknown.status, 404, 'an unknown delivery is 404 even on a disabled webhook');
    assert.equal(unknown.body.error.code, 'delivery_not_found');

    w.receiver.respond = () => 200;
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'active' } })).status, 200);
    d = await attemptsOf(key, hook.id);
    assert.equal(d.nextAttemptAt, w.clock.now().toISOString(), 'due at once');
    await dispatcher.runRound();
    assert.deepEqual(
      w.receiver.received.map((r) => r.json.id),
      [eventId, eventId],
    );
    assert.equal((await attemptsOf(key, hook.id)).state, 'delivered');
  });

  // Who is owed an event is decided when it happens (events.webhook_ids), not at its fan-out.
  it('an event that happened while the webhook was active and is fanned out after it was disabled is held, and delivered once it is enabled', async () => {
    const { key, hook, eventId } = await oneHookOneEvent();
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } })).status, 200);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 0, 'nothing attempted while disabled');
    const [held] = await w.deliveries(key, hook.id);
    assert.deepEqual([held.eventId, held.state, held.nextAttemptAt, held.attempts], [eventId, 'pending', null, []]);
    assert.equal((await db.query(`select count(*)::int as n from events where fanned_out_at is null`)).rows[0].n, 0, 'fanned out');
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'active' } })).status, 200);
    await dispatcher.runRound();
    assert.deepEqual(w.receiver.received.map((r) => r.json.id), [eventId]);
    assert.equal((await attemptsOf(key, hook.id)).state, 'delivered');
  });

  it('an event that happened while the webhook was disabled is not delivered, even when the webhook is enabled before any fan-out', async () => {
    const { key, workspaceId, hook, eventId } = await oneHookOneEvent();
    const other = await w.register(key, ['message.sent'], '/other');
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } })).status, 200);
    const during = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_during' });
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'active' } })).status, 200);
    await dispatcher.runRound();
    const got = (path: string) => w.receiver.received.filter((r) => r.path === path).map((r) => r.json.id).sort();
    assert.deepEqual(got(new URL(hook.url).pathname), [eventId], 'the event of the disabled period is not owed to it');
    assert.deepEqual(got('/other'), [during], 'a webhook registered after the first event gets only the later one');
    assert.deepEqual((await w.deliveries(key, hook.id)).map((x: { eventId: string }) => x.eventId), [eventId]);
    assert.deepEqual((await w.deliveries(key, other.id)).map((x: { eventId: string }) => x.eventId), [during]);
  });

  it('an event owed to a webhook is delivered after a PATCH removes its type from the subscription; one after the PATCH is not', async () => {
    const { key, workspaceId, hook, eventId } = await oneHookOneEvent(['message.sent', 'reply.received']);
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { events: ['reply.received'] } })).status, 200);
    assert.equal(await w.record(workspaceId, 'message.sent', { messageId: 'msg_after' }), null);
    await dispatcher.runRound();
    assert.deepEqual(w.receiver.received.map((r) => r.json.id), [eventId]);
  });

  it('a deleted webhook gets nothing: its pending retries go with it', async () => {
    w.receiver.respond = () => 500;
    const { key, workspaceId, hook } = await oneHookOneEvent();
    await dispatcher.runRound();
    assert.equal((await w.app.request('DELETE', `/v1/webhooks/${hook.id}`, { key })).status, 204);
    assert.equal(await w.record(workspaceId, 'message.sent', { messageId: 'msg_after' }), null, 'no webhook subscribes: not even written');
    w.clock.advance(60_000);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1);
    const { rows } = await db.query('select count(*)::int as n from webhook_deliveries where webhook_id = $1', [hook.id]);
    assert.equal(rows[0].n, 0);
  });
});
