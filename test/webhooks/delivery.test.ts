import assert from 'node:assert/strict';
import net from 'node:net';
import pg from 'pg';
import { claimDue, fanOut, recordOutcomes, viaOrm, OUTCOMES_SQL, outcomesBatch } from '../../src/modules/webhooks/repository.ts';
import { PreparedStatements } from '../../src/db/statements.ts';
import { nativePlaceholders } from '../../src/db/sql.ts';
import { checkWebhookHost, type Resolver } from '../../src/adapters/http-client.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import type { Deps } from '../../src/deps.ts';
import { webhookWorld, verifySignature, type WebhookWorld } from './helpers.ts';

// Retry delays in this file are 1s,2s,3s,4s,5s and the timeout 400 ms (see webhookWorld). The
// clock is a ManualClock: tests move it instead of sleeping.
const DELAYS = [1_000, 2_000, 3_000, 4_000, 5_000];

describe('webhook delivery: retries, timeouts, restarts, workers, guards', function () {
  this.timeout(60_000);
  let w: WebhookWorld;
  let db: pg.Client;
  let dispatcher: WebhookDispatcher;

  before(async () => {
    w = await webhookWorld();
    db = new pg.Client({ connectionString: w.app.databaseUrl });
    await db.connect();
    dispatcher = w.dispatcher();
  });
  after(async () => {
    await db.end();
    await w.close();
  });
  beforeEach(() => w.receiver.reset());
  // Each test starts with no webhooks, so nothing scheduled by one test fires in the next.
  afterEach(async () => {
    await db.query('delete from webhooks');
  });

  async function oneHookOneEvent(events: Parameters<WebhookWorld['register']>[1] = ['message.sent']) {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, events);
    const eventId = await w.emit(workspaceId, events[0], { messageId: 'msg_1' });
    return { key, workspaceId, hook, eventId };
  }

  const attemptsOf = async (key: string, hookId: string) => (await w.deliveries(key, hookId))[0];

  /**
   * One delivery fanned out to a first worker with a 1 s lease that runs out, then claimed by a
   * second worker; `outcome` builds an outcome of it for either worker's lease.
   */
  async function staleClaim() {
    const { key, hook } = await oneHookOneEvent();
    const db2 = viaOrm(w.app.deps.orm.em.fork());
    const t0 = w.clock.now();
    const [first] = (await fanOut(db2, t0, 10, () => new Date(t0.getTime() + 1_000))).claims;
    const t1 = new Date(t0.getTime() + 2_000);
    const [second] = await claimDue(db2, t1, new Date(t1.getTime() + 60_000), 10);
    const outcome = (lease: Date, at: Date, statusCode: number, state: 'delivered' | 'pending' = 'delivered') => ({
      deliveryId: first.id,
      leaseUntil: lease,
      attemptCount: 0,
      attempt: { at, statusCode, error: statusCode >= 300 ? `receiver answered ${statusCode}` : null, durationMs: 5 },
      state,
      nextAttemptAt: state === 'pending' ? new Date(t1.getTime() + 1_000) : null,
    });
    return { key, hook, db2, t0, t1, first, second, outcome };
  }

  it('a failing receiver gets exactly 6 attempts on the configured schedule, then nothing; the delivery is failed', async () => {
    w.receiver.respond = () => 500;
    const { key, hook, eventId } = await oneHookOneEvent();
    const t0 = w.clock.now().getTime();
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1);
    let d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'pending');
    assert.equal(d.nextAttemptAt, new Date(t0 + DELAYS[0]).toISOString());
    for (let i = 0; i < DELAYS.length; i++) {
      w.clock.advance(DELAYS[i] - 1);
      await dispatcher.runRound();
      assert.equal(w.receiver.received.length, i + 1, `retry ${i + 1} not before its delay`);
      w.clock.advance(1);
      await dispatcher.runRound();
      assert.equal(w.receiver.received.length, i + 2, `retry ${i + 1} at its delay`);
    }
    d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'failed');
    assert.equal(d.nextAttemptAt, null);
    assert.equal(d.attempts.length, 6);
    assert.ok(d.attempts.every((a: { statusCode: number; error: string }) => a.statusCode === 500 && a.error === 'receiver answered 500'));
    // Attempts are spaced by the delays, each counted from the previous attempt.
    const at = d.attempts.map((a: { at: string }) => Date.parse(a.at));
    assert.deepEqual(at.slice(1).map((t: number, i: number) => t - at[i]), DELAYS);
    // Same event id and same body bytes on every attempt; each attempt signed.
    assert.ok(w.receiver.received.every((r) => r.json.id === eventId && r.headers['x-service-event-id'] === eventId && r.body.equals(w.receiver.received[0].body)));
    assert.ok(w.receiver.received.every((r) => verifySignature(r, hook.signingSecret)));
    assert.deepEqual(w.receiver.received.map((r) => r.headers['x-service-attempt']), ['1', '2', '3', '4', '5', '6']);
    // Then nothing, ever.
    w.clock.advance(7 * 86_400_000);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 6);
    assert.match(w.app.logs.text, /webhook delivery failed for good/);
  });

  it('a receiver that hangs past the timeout is a failed attempt (no status, a timeout error), retried later', async () => {
    w.receiver.respond = () => 'hang';
    const { key, hook } = await oneHookOneEvent();
    const r = await dispatcher.runRound();
    assert.equal(r.retrying, 1);
    const d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'pending');
    assert.equal(d.attempts[0].statusCode, null);
    assert.match(d.attempts[0].error, /^timeout: no answer within 400 ms/);
    assert.ok(d.attempts[0].durationMs >= 390 && d.attempts[0].durationMs < 3_000, String(d.attempts[0].durationMs));
    w.receiver.respond = () => 204;
    w.clock.advance(DELAYS[0]);
    await dispatcher.runRound();
    assert.equal((await attemptsOf(key, hook.id)).state, 'delivered');
  });

  it('a receiver that recovers gets the event once: failures, then one success, then nothing more', async () => {
    let n = 0;
    w.receiver.respond = () => (++n <= 2 ? 503 : 200);
    const { key, hook, eventId } = await oneHookOneEvent();
    await dispatcher.runRound();
    w.clock.advance(DELAYS[0]);
    await dispatcher.runRound();
    w.clock.advance(DELAYS[1]);
    await dispatcher.runRound();
    w.clock.advance(60 * 60_000);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 3);
    const d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'delivered');
    assert.deepEqual(
      d.attempts.map((a: { statusCode: number }) => a.statusCode),
      [503, 503, 200],
    );
    assert.equal(w.receiver.received.filter((r) => r.json.id === eventId).length, 3);
  });

  it('an attempt whose lease ran out is logged but moves nothing; the worker holding the delivery now records its own', async () => {
    // The first worker stalls past its lease; a second one claims the delivery.
    const { key, hook, db2, t0, t1, first, second, outcome } = await staleClaim();
    assert.equal(second.id, first.id);
    const late = await recordOutcomes(db2, [outcome(first.leaseUntil, new Date(t0.getTime() + 1_500), 200)], t1);
    assert.deepEqual(late, [false], 'the late attempt moved nothing');
    let d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'pending');
    assert.deepEqual(d.attempts.map((a: { statusCode: number }) => a.statusCode), [200]);
    const { rows } = await db.query('select lease_until, attempt_count from webhook_deliveries where id = $1', [first.id]);
    assert.deepEqual(rows[0], { lease_until: second.leaseUntil, attempt_count: 0 }, 'still leased to the second worker');
    const moved = await recordOutcomes(db2, [outcome(second.leaseUntil, new Date(t1.getTime() + 10), 204)], t1);
    assert.deepEqual(moved, [true]);
    d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'delivered');
    assert.deepEqual(d.attempts.map((a: { statusCode: number }) => a.statusCode), [200, 204]);
  });

  it('one batch with two outcomes for one delivery (a late one and the current one): both logged, the current one moves it', async () => {
    const { key, hook, db2, t0, t1, first, second, outcome } = await staleClaim();
    // The late outcome (a 500) and the current claim's (a 204), written together.
    const moved = await recordOutcomes(
      db2,
      [outcome(first.leaseUntil, new Date(t0.getTime() + 1_500), 500, 'pending'), outcome(second.leaseUntil, new Date(t1.getTime() + 10), 204, 'delivered')],
      t1,
    );
    assert.deepEqual(moved, [false, true]);
    const d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'delivered');
    assert.deepEqual(d.attempts.map((a: { statusCode: number }) => a.statusCode), [500, 204]);
    // Two late outcomes for one delivery: both logged, nothing moved.
    const stale = await recordOutcomes(
      db2,
      [outcome(first.leaseUntil, new Date(t1.getTime() + 20), 502, 'pending'), outcome(first.leaseUntil, new Date(t1.getTime() + 30), 503, 'pending')],
      t1,
    );
    assert.deepEqual(stale, [false, false]);
    const after = await attemptsOf(key, hook.id);
    assert.equal(after.state, 'delivered');
    assert.deepEqual(after.attempts.map((a: { statusCode: number }) => a.statusCode), [500, 204, 502, 503]);
  });

  it('a keep-alive connection closed under a request: the request goes once more on a fresh one; one attempt recorded', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    // The first request opens a connection and is answered; the next one, sent on that same
    // kept-alive connection, finds it closed without an answer; the one after that is answered.
    let n = 0;
    w.receiver.respond = () => (n++ === 1 ? 'drop' : 200);
    const first = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_ka1' });
    await dispatcher.runRound();
    const second = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_ka2' });
    await dispatcher.runRound();
    assert.deepEqual(w.receiver.received.map((r) => (r.json as { id: string }).id), [first, second, second]);
    const deliveries = await w.deliveries(key, hook.id);
    assert.deepEqual(deliveries.map((d) => [d.state, d.attempts.length, d.attempts[0].statusCode]), [['delivered', 1, 200], ['delivered', 1, 200]]);

    // A receiver that always closes the connection: one more try, then a failed attempt.
    w.receiver.reset();
    w.receiver.respond = () => 'drop';
    const thirdId = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_ka3' });
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 2, 'one retry within the attempt, no more');
    const third = (await w.deliveries(key, hook.id)).find((d) => d.eventId === thirdId)!;
    assert.equal(third.state, 'pending');
    assert.equal(third.attempts.length, 1);
    assert.equal(third.attempts[0].statusCode, null);
    assert.match(third.attempts[0].error, /^UND_ERR_SOCKET: other side closed/);
  });

  it('redirects are not followed: a 3xx is a failed attempt and the target is never requested', async () => {
    w.receiver.respond = (req) => (req.path === '/hook' ? { status: 302, headers: { location: w.receiver.url('/elsewhere') } } : 200);
    const { key, hook } = await oneHookOneEvent();
    await dispatcher.runRound();
    for (const status of [301, 307, 308]) {
      w.receiver.respond = (req) => (req.path === '/hook' ? { status, headers: { location: w.receiver.url('/elsewhere') } } : 200);
      w.clock.advance(60_000);
      await dispatcher.runRound();
    }
    assert.deepEqual(
      w.receiver.received.map((r) => r.path),
      ['/hook', '/hook', '/hook', '/hook'],
    );
    const d = await attemptsOf(key, hook.id);
    assert.deepEqual(
      d.attempts.map((a: { statusCode: number }) => a.statusCode),
      [302, 301, 307, 308],
    );
    assert.match(d.attempts[0].error, /redirect/);
    assert.equal(d.state, 'pending');
  });

  it('a restart mid-retry continues the schedule: a new dispatcher takes over the pending retries', async () => {
    w.receiver.respond = () => 500;
    const first = w.dispatcher();
    const { key, hook } = await oneHookOneEvent();
    await first.runRound();
    w.clock.advance(DELAYS[0]);
    await first.runRound();
    first.stop();
    await first.close(); // the old process is gone
    w.receiver.respond = () => 200;
    const second = w.dispatcher();
    w.clock.advance(DELAYS[1] - 1);
    await second.runRound();
    assert.equal(w.receiver.received.length, 2, 'the schedule is kept: not before the next delay');
    w.clock.advance(1);
    await second.runRound();
    assert.equal(w.receiver.received.length, 3);
    const d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'delivered');
    assert.deepEqual(
      d.attempts.map((a: { statusCode: number }) => a.statusCode),
      [500, 500, 200],
    );
  });

  it('a worker that died holding a claim: nobody touches the delivery until its lease runs out, then it is attempted once', async () => {
    const { key, workspaceId, hook } = await oneHookOneEvent();
    await dispatcher.runRound(); // fans out and delivers: use a second event for the crash
    const eventId = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_crash' });
    // Fan out without attempting, then claim as a worker that dies right after.
    await fanOut(viaOrm(w.app.deps.orm.em.fork()), w.clock.now(), 100);
    const now = w.clock.now();
    const claimed = await claimDue(viaOrm(w.app.deps.orm.em.fork()), now, new Date(now.getTime() + dispatcher.leaseMs), 10);
    assert.deepEqual(
      claimed.map((c) => c.eventId),
      [eventId],
    );
    w.receiver.reset();
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 0, 'leased by the dead worker');
    w.clock.advance(dispatcher.leaseMs);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1);
    assert.equal(w.receiver.received[0].json.id, eventId);
    const d = (await w.deliveries(key, hook.id)).find((x: { eventId: string }) => x.eventId === eventId);
    assert.equal(d.state, 'delivered');
    assert.equal(d.attempts.length, 1);
  });

  it('two workers at once never deliver the same event twice', async () => {
    w.receiver.respond = () => ({ status: 200, delayMs: 5 });
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const ids: string[] = [];
    for (let i = 0; i < 80; i++) ids.push(await w.emit(workspaceId, 'message.sent', { messageId: `msg_${i}` }));
    // Fanned out first, so both workers find the deliveries when their rounds start.
    await fanOut(viaOrm(w.app.deps.orm.em.fork()), w.clock.now(), 500);
    // A generous timeout: on a loaded machine a 400 ms answer can be late, and a late attempt is
    // retried in a later round, which is not what this test is about.
    const deps = { ...w.app.deps, config: { ...w.app.deps.config, webhookTimeout: 5_000 } };
    const a = w.dispatcher({ concurrency: 4 }, deps);
    const b = w.dispatcher({ concurrency: 4 }, deps);
    const [ra, rb] = await Promise.all([a.runRound(), b.runRound()]);
    assert.equal(ra.delivered + rb.delivered, 80);
    assert.ok(ra.delivered > 0 && rb.delivered > 0, `both workers worked (${ra.delivered}/${rb.delivered})`);
    assert.equal(w.receiver.received.length, 80);
    assert.deepEqual(new Set(w.receiver.received.map((r) => r.json.id)), new Set(ids));
    const { rows } = await db.query(
      `select count(*)::int as deliveries, sum(attempt_count)::int as attempts, count(*) filter (where state = 'delivered')::int as delivered
         from webhook_deliveries where webhook_id = $1`,
      [hook.id],
    );
    assert.deepEqual(rows[0], { deliveries: 80, attempts: 80, delivered: 80 });
    const { rows: logged } = await db.query(`select sum(jsonb_array_length(attempts))::int as n from webhook_deliveries where webhook_id = $1`, [hook.id]);
    assert.equal(logged[0].n, 80);
  });

  it('fresh deliveries come leased from the fan-out: no claim sees them until the lease runs out, then one attempt', async () => {
    const { key, workspaceId } = await w.workspace();
    const a = await w.register(key, ['message.sent'], '/a');
    const b = await w.register(key, ['message.sent'], '/b');
    const e1 = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_l1' });
    const e2 = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_l2' });
    const now = w.clock.now();
    const leases: Date[] = [];
    // A worker fans out, leasing what it creates, and dies before any attempt. It brings one id
    // per event: the batch needs four, so it is run again with enough.
    const r = await fanOut(viaOrm(w.app.deps.orm.em.fork()), now, 10, (i) => {
      leases.push(new Date(now.getTime() + dispatcher.leaseFor(i)));
      return leases[i];
    });
    assert.equal(r.events, 2);
    // One delivery per (event, webhook), each with the event's data, the webhook's URL and its own lease.
    assert.deepEqual(r.claims.map((c) => `${c.eventId}:${c.webhookId}`).sort(), [`${e1}:${a.id}`, `${e1}:${b.id}`, `${e2}:${a.id}`, `${e2}:${b.id}`].sort());
    assert.ok(r.claims.every((c, i) => c.attemptCount === 0 && c.leaseUntil.getTime() === leases[i].getTime() && c.data.messageId && c.url.endsWith(c.webhookId === a.id ? '/a' : '/b')));
    const { rows } = await db.query(`select lease_until, next_attempt_at, state from webhook_deliveries where webhook_id = any($1) order by lease_until`, [[a.id, b.id]]);
    assert.ok(rows.every((row) => row.state === 'pending' && row.lease_until.getTime() === row.next_attempt_at.getTime()), 'due again when the lease runs out');
    // Nobody else takes them meanwhile: neither a claim nor another dispatcher's round.
    assert.equal((await claimDue(viaOrm(w.app.deps.orm.em.fork()), now, new Date(now.getTime() + 60_000), 10)).length, 0);
    await w.dispatcher().runRound();
    assert.equal(w.receiver.received.length, 0);
    w.clock.advance(dispatcher.leaseFor(3));
    const rescuer = await w.dispatcher().runRound();
    assert.equal(rescuer.claimed, 4);
    assert.equal(w.receiver.received.length, 4);
    for (const hook of [a, b]) {
      const ds = await w.deliveries(key, hook.id);
      assert.deepEqual(ds.map((d: { state: string; attempts: unknown[] }) => `${d.state}/${d.attempts.length}`), ['delivered/1', 'delivered/1']);
    }
  });

  it('leases grow with the queue: a delivery with k others ahead of it is leased for (floor(k / concurrency) + 2) timeouts + 5 s', () => {
    const d = w.dispatcher({ concurrency: 4 });
    const t = w.app.deps.config.webhookTimeout;
    assert.equal(d.leaseMs, 2 * t + 5_000);
    assert.deepEqual([0, 3, 4, 7, 8, 12].map((k) => d.leaseFor(k)), [2, 2, 3, 3, 4, 5].map((n) => n * t + 5_000));
  });

  it('two workers fanning out the same outbox at once: every event goes out once, through both', async () => {
    w.receiver.respond = () => ({ status: 200, delayMs: 5 });
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const ids: string[] = [];
    for (let i = 0; i < 120; i++) ids.push(await w.emit(workspaceId, 'message.sent', { messageId: `msg_race${i}` }));
    // A generous timeout: on a loaded machine a 400 ms answer can be late, and a late attempt is
    // retried in a later round, which is not what this test is about.
    const deps = { ...w.app.deps, config: { ...w.app.deps.config, webhookTimeout: 5_000 } };
    const a = w.dispatcher({ concurrency: 4 }, deps);
    const b = w.dispatcher({ concurrency: 4 }, deps);
    const [ra, rb] = await Promise.all([a.runRound(), b.runRound()]);
    assert.equal(ra.fannedOut + rb.fannedOut, 120);
    assert.equal(ra.delivered + rb.delivered, 120);
    assert.ok(ra.delivered > 0 && rb.delivered > 0, `both workers worked (${ra.delivered}/${rb.delivered})`);
    assert.equal(w.receiver.received.length, 120);
    assert.deepEqual(new Set(w.receiver.received.map((r) => r.json.id)), new Set(ids));
    const { rows } = await db.query(
      `select count(*)::int as deliveries, sum(attempt_count)::int as attempts, count(*) filter (where state = 'delivered' and lease_until is null and next_attempt_at is null)::int as delivered,
              sum(jsonb_array_length(attempts))::int as logged
         from webhook_deliveries where webhook_id = $1`,
      [hook.id],
    );
    assert.deepEqual(rows[0], { deliveries: 120, attempts: 120, delivered: 120, logged: 120 });
  });

  it('a stopping worker gives back the leased deliveries it had not started: due at once for the next worker', async () => {
    w.receiver.respond = () => ({ status: 200, delayMs: 50 });
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    for (let i = 0; i < 12; i++) await w.emit(workspaceId, 'message.sent', { messageId: `msg_stop${i}` });
    const first = w.dispatcher({ concurrency: 1, queue: 20 });
    const round = first.runRound();
    await w.receiver.waitFor(1, 10_000);
    first.stop();
    const r = await round;
    assert.equal(r.fannedOut, 12, 'the fan-out leased all of them to the first worker');
    assert.ok(r.delivered >= 1 && r.delivered < 12, String(r.delivered));
    const { rows } = await db.query(
      `select count(*)::int as n from webhook_deliveries where webhook_id = $1 and state = 'pending' and lease_until is null and next_attempt_at <= $2`,
      [hook.id, w.clock.now()],
    );
    assert.equal(rows[0].n, 12 - r.delivered, 'given back, due now');
    const second = await w.dispatcher().runRound(); // same clock: no lease had to run out
    assert.equal(second.claimed, 12 - r.delivered);
    assert.equal(w.receiver.received.length, 12);
    assert.ok((await w.deliveries(key, hook.id, '?limit=50')).every((d: { state: string; attempts: unknown[] }) => d.state === 'delivered' && d.attempts.length === 1));
  });

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
    try {
      await fan.query('begin');
      await fan.query(`select id from events where fanned_out_at is null and workspace_id = $1 for update skip locked`, [workspaceId]);
      const deleting = w.app.services().workspaces.delete(workspaceId);
      await new Promise((res) => setTimeout(res, 300));
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
    } finally {
      await fan.end();
    }
    const left = await db.query(`select count(*)::int as n from webhook_deliveries where workspace_id = $1`, [workspaceId]);
    assert.equal(left.rows[0].n, 0);
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
      await new Promise((res) => setTimeout(res, 300));
      await fan.query('commit');
      assert.equal((await deleting).status, 204);
    } finally {
      await fan.end();
    }
    assert.equal((await db.query(`select count(*)::int as n from webhook_deliveries where webhook_id = $1`, [hook.id])).rows[0].n, 0, 'no delivery outlives its webhook');
  });

  it("the dispatcher's statements plan with indexes only, whatever the statistics say", async () => {
    const statements = new PreparedStatements(w.app.databaseUrl, 1, { asyncCommit: true, indexPathsOnly: true });
    try {
      const [row] = await statements.run<Record<string, string>>(
        'test.settings',
        `select current_setting('synchronous_commit') as sc, current_setting('enable_seqscan') as seq, current_setting('enable_bitmapscan') as bitmap, current_setting('enable_hashjoin') as hash`,
        [],
      );
      assert.deepEqual(row, { sc: 'off', seq: 'off', bitmap: 'off', hash: 'off' });
      // Even on a table the planner believes empty, the claim reads the due index in order.
      await statements.run('test.analyze', 'analyze webhook_deliveries', []);
      const plan = await statements.run<{ 'QUERY PLAN': string }>(
        'test.explain',
        `explain select d.id from webhook_deliveries d where d.state = 'pending' and d.next_attempt_at <= now() order by d.next_attempt_at limit 10 for update of d skip locked`,
        [],
      );
      assert.match(plan.map((p) => p['QUERY PLAN']).join('\n'), /Index Scan using webhook_deliveries_due_idx/);
    } finally {
      await statements.close();
    }
  });

  it('recording outcomes probes each delivery by primary key, however many are pending and however stale the statistics', async () => {
    const { workspaceId } = await w.workspace();
    const hook = await w.register((await w.workspace()).key, ['message.sent']);
    // Statistics taken while the table held next to nothing, then 3,000 pending deliveries (a
    // receiver down for a while, or a burst on a young table): the partial due index looks tiny.
    await db.query('analyze webhook_deliveries');
    await db.query(
      `insert into events (id, workspace_id, type, data, created_at, fanned_out_at)
       select 'evt_pl' || i, $1, 'message.sent', '{}', now(), now() from generate_series(1, 3000) i`,
      [workspaceId],
    );
    await db.query(
      `insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, next_attempt_at, lease_until, created_at, updated_at)
       select 'dlv_pl' || i, $1, $2, 'evt_pl' || i, 'pending', now() + interval '1 hour', now() + interval '1 hour', now(), now() from generate_series(1, 3000) i`,
      [workspaceId, hook.id],
    );
    const statements = new PreparedStatements(w.app.databaseUrl, 1, { asyncCommit: true, indexPathsOnly: true });
    try {
      const lease = new Date(Date.now() + 3_600_000);
      const outcomes = Array.from({ length: 64 }, (_, i) => ({
        deliveryId: `dlv_pl${i + 1}`,
        leaseUntil: lease,
        attemptCount: 0,
        attempt: { at: new Date(), statusCode: 200, error: null, durationMs: 3 },
        state: 'delivered' as const,
        nextAttemptAt: null,
      }));
      const rows = await statements.run<{ 'QUERY PLAN': string }>('test.explain.outcomes', `explain ${OUTCOMES_SQL}`, [outcomesBatch(outcomes), new Date()]);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      const moved = plan.slice(plan.indexOf('CTE moved'), plan.indexOf('CTE late'));
      assert.match(moved, /Index Scan using webhook_deliveries_pkey on webhook_deliveries d\s[^\n]*\n\s+Index Cond: \(id = o(_\d+)?\.id\)/, plan);
      assert.doesNotMatch(moved, /webhook_deliveries_due_idx|Materialize/, plan);
    } finally {
      await statements.close();
    }
  });

  it('a disabled webhook gets nothing new; its pending retries wait and resume when it is enabled', async () => {
    w.receiver.respond = () => 500;
    const { key, workspaceId, hook, eventId } = await oneHookOneEvent();
    await dispatcher.runRound();
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } })).status, 200);
    let d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'pending');
    assert.equal(d.nextAttemptAt, null, 'held');
    const during = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_during' });
    w.clock.advance(60_000);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1, 'no retry and no new event while disabled');
    assert.equal((await w.deliveries(key, hook.id)).length, 1, 'no delivery for the event that happened while disabled');
    const retry = await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key });
    assert.equal(retry.status, 409);
    assert.equal(retry.body.error.code, 'webhook_disabled');

    w.receiver.respond = () => 200;
    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'active' } })).status, 200);
    d = await attemptsOf(key, hook.id);
    assert.equal(d.nextAttemptAt, w.clock.now().toISOString(), 'due at once');
    await dispatcher.runRound();
    assert.deepEqual(
      w.receiver.received.map((r) => r.json.id),
      [eventId, eventId],
    );
    assert.ok(!w.receiver.received.some((r) => r.json.id === during));
    assert.equal((await attemptsOf(key, hook.id)).state, 'delivered');
  });

  it('a deleted webhook gets nothing: its pending retries go with it', async () => {
    w.receiver.respond = () => 500;
    const { key, workspaceId, hook } = await oneHookOneEvent();
    await dispatcher.runRound();
    assert.equal((await w.app.request('DELETE', `/v1/webhooks/${hook.id}`, { key })).status, 204);
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_after' });
    w.clock.advance(60_000);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1);
    const { rows } = await db.query('select count(*)::int as n from webhook_deliveries where webhook_id = $1', [hook.id]);
    assert.equal(rows[0].n, 0);
  });

  it('manual retry: a failed delivery gets one immediate attempt; unknown or foreign deliveries are 404', async () => {
    w.receiver.respond = () => 500;
    const { key, hook } = await oneHookOneEvent();
    await dispatcher.runRound();
    for (const delay of DELAYS) {
      w.clock.advance(delay);
      await dispatcher.runRound();
    }
    let d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'failed');
    w.receiver.respond = () => 200;
    const res = await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.state, 'pending');
    assert.equal(res.body.nextAttemptAt, w.clock.now().toISOString());
    assert.equal(res.body.attempts.length, 6);
    await dispatcher.runRound();
    d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'delivered');
    assert.equal(d.attempts.length, 7);
    assert.equal(d.attempts[6].statusCode, 200);

    // A manual retry that fails again leaves the delivery failed (its retries are used up).
    w.receiver.respond = () => 500;
    await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key });
    await dispatcher.runRound();
    d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'failed');
    assert.equal(d.attempts.length, 8);

    const other = await w.register(key, ['reply.received'], '/other');
    const notFound = await w.app.request('POST', `/v1/webhooks/${other.id}/deliveries/${d.id}/retry`, { key });
    assert.equal(notFound.status, 404);
    assert.equal(notFound.body.error.code, 'delivery_not_found');
    const foreign = await w.workspace();
    const foreignRes = await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key: foreign.key });
    assert.equal(foreignRes.status, 404);
    assert.equal(foreignRes.body.error.code, 'webhook_not_found');
    const body = await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key, body: { now: true } });
    assert.equal(body.status, 400);
  });

  it('the delivery log pages newest first and filters by state', async () => {
    w.receiver.respond = (req) => (req.json.data.messageId === 'msg_bad' ? 500 : 200);
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    for (const m of ['msg_a', 'msg_bad', 'msg_c']) {
      await w.emit(workspaceId, 'message.sent', { messageId: m });
      w.clock.advance(10);
      await dispatcher.runRound();
    }
    const page = await w.app.request('GET', `/v1/webhooks/${hook.id}/deliveries?limit=2`, { key });
    assert.equal(page.body.total, 3);
    assert.equal(page.body.hasMore, true);
    assert.equal(page.body.data.length, 2);
    const all = await w.deliveries(key, hook.id);
    const createdAt = all.map((d: { createdAt: string }) => d.createdAt);
    assert.deepEqual(createdAt, [...createdAt].sort().reverse());
    const pending = await w.app.request('GET', `/v1/webhooks/${hook.id}/deliveries?state=pending`, { key });
    assert.equal(pending.body.total, 1);
    assert.equal(pending.body.data[0].attempts[0].statusCode, 500);
    const delivered = await w.app.request('GET', `/v1/webhooks/${hook.id}/deliveries?state=delivered&offset=1`, { key });
    assert.equal(delivered.body.total, 2);
    assert.equal(delivered.body.data.length, 1);
    assert.equal(delivered.body.hasMore, false);
  });

  it('connection refused and an untrusted certificate are failed attempts with their error', async () => {
    const { key, workspaceId } = await w.workspace();
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const dead = (await w.app.request('POST', '/v1/webhooks', { key, body: { url: `https://127.0.0.1:${port}/x`, events: ['message.sent'] } })).body;
    const hook = await w.register(key, ['message.sent']);
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_x' });
    const untrusting = w.dispatcher({ ca: undefined });
    // A dispatcher without the test CA uses the system trust store, which does not know it.
    await untrusting.runRound();
    const deadAttempt = (await attemptsOf(key, dead.id)).attempts[0];
    assert.equal(deadAttempt.statusCode, null);
    assert.match(deadAttempt.error, /ECONNREFUSED/);
    const tlsAttempt = (await attemptsOf(key, hook.id)).attempts[0];
    assert.equal(tlsAttempt.statusCode, null);
    assert.match(tlsAttempt.error, /certificate/i);
    assert.equal(w.receiver.received.length, 0, 'no request is sent over an unverified connection');
  });

  describe('SSRF guard at delivery time (MAILGATE_WEBHOOK_ALLOW_PRIVATE off for the dispatcher)', () => {
    const guarded = (): Deps => ({ ...w.app.deps, config: { ...w.app.deps.config, webhookAllowPrivate: false } });

    it('a URL that now points to a private address is refused at connect time and nothing is sent', async () => {
      const { key, hook } = await oneHookOneEvent();
      const d = w.dispatcher({}, guarded());
      await d.runRound();
      assert.equal(w.receiver.received.length, 0);
      const attempt = (await attemptsOf(key, hook.id)).attempts[0];
      assert.equal(attempt.statusCode, null);
      assert.match(attempt.error, /^refused: 127\.0\.0\.1 is a loopback address \(SSRF guard\)/);
      assert.equal((await attemptsOf(key, hook.id)).state, 'pending', 'a refusal is a failed attempt like any other');
    });

    it('DNS rebinding: the address checked is the address connected to', async () => {
      // A name that resolved to a public address when it was checked, and to 127.0.0.1 after.
      let calls = 0;
      const rebinding: Resolver = async (host) => {
        assert.equal(host, 'hooks.rebind.test');
        return ++calls === 1 ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
      };
      const url = new URL(w.receiver.url('/rebind', 'hooks.rebind.test'));
      await checkWebhookHost(url, { allowPrivate: false, resolve: rebinding }); // passes: public then
      const { key, workspaceId } = await w.workspace();
      const hook = (await w.app.request('POST', '/v1/webhooks', { key, body: { url: url.href, events: ['message.sent'] } })).body;
      await w.emit(workspaceId, 'message.sent', { messageId: 'msg_rebind' });
      await w.dispatcher({ resolve: rebinding }, guarded()).runRound();
      assert.equal(w.receiver.received.length, 0);
      const attempt = (await attemptsOf(key, hook.id)).attempts[0];
      assert.match(attempt.error, /^refused: hooks\.rebind\.test resolves to 127\.0\.0\.1, a loopback address \(SSRF guard\)/);

      // With private addresses allowed, the same lookup is what the socket connects to: the
      // request reaches the receiver on 127.0.0.1 under the name hooks.rebind.test (TLS checks it).
      w.clock.advance(DELAYS[0]);
      await w.dispatcher({ resolve: async () => [{ address: '127.0.0.1', family: 4 }] }).runRound();
      assert.equal(w.receiver.received.length, 1);
      assert.equal(w.receiver.received[0].headers.host, `hooks.rebind.test:${w.receiver.port}`);
      assert.equal((await attemptsOf(key, hook.id)).state, 'delivered');
    });

    it('a host with one public and one private address is refused', async () => {
      const mixed: Resolver = async () => [
        { address: '93.184.215.14', family: 4 },
        { address: '::ffff:10.0.0.8', family: 6 },
      ];
      await assert.rejects(checkWebhookHost(new URL('https://mixed.example/x'), { allowPrivate: false, resolve: mixed }), /10\.0\.0\.8 inside/);
      const { key, workspaceId } = await w.workspace();
      const hook = (await w.app.request('POST', '/v1/webhooks', { key, body: { url: w.receiver.url('/m', 'hooks.rebind.test'), events: ['message.sent'] } })).body;
      await w.emit(workspaceId, 'message.sent', { messageId: 'msg_mixed' });
      await w.dispatcher({ resolve: mixed }, guarded()).runRound();
      assert.match((await attemptsOf(key, hook.id)).attempts[0].error, /SSRF guard/);
      assert.equal(w.receiver.received.length, 0);
    });
  });
});
