import assert from 'node:assert/strict';
import net from 'node:net';
import { claimDue, fanOut, recordOutcomes, viaOrm } from '../../src/modules/webhooks/repository.ts';
import { verifySignature } from './helpers.ts';
import type { WebhookWorld } from './helpers.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import type pg from 'pg';
import { deliveryWorld, DELAYS } from './delivery-world.ts';

describe('webhook delivery: attempts, retries, timeouts, the delivery log', function () {
  this.timeout(60_000);
  const d = deliveryWorld();
  let w: WebhookWorld, db: pg.Client, dispatcher: WebhookDispatcher;
  before(() => ({ w, db, dispatcher } = d));
  const { oneHookOneEvent, attemptsOf, staleClaim } = d;

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

  it('a request that cannot be prepared (a signing secret that does not decrypt) is a failed attempt with its reason; its retries run out and it ends failed', async () => {
    const { key, hook } = await oneHookOneEvent();
    // As after a change of MAILGATE_SECRET_KEY: the stored secret no longer decrypts.
    await db.query(`update webhooks set signing_secret_enc = 'v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.AAAA' where id = $1`, [hook.id]);
    const t0 = w.clock.now().getTime();
    const r = await dispatcher.runRound();
    assert.equal(r.retrying, 1);
    let d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'pending');
    assert.equal(d.nextAttemptAt, new Date(t0 + DELAYS[0]).toISOString());
    assert.equal(d.attempts.length, 1);
    assert.equal(d.attempts[0].statusCode, null);
    assert.match(d.attempts[0].error, /^the request could not be prepared: /);
    for (const delay of DELAYS) {
      w.clock.advance(delay);
      await dispatcher.runRound();
    }
    d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'failed');
    assert.equal(d.nextAttemptAt, null);
    assert.equal(d.attempts.length, 6);
    assert.equal(w.receiver.received.length, 0, 'nothing unsigned reached the receiver');
    assert.match(w.app.logs.text, /a webhook request could not be prepared/);
    // The repair: a new secret, then a manual retry, delivered and signed with the new secret.
    const rotated = await w.app.request('POST', `/v1/webhooks/${hook.id}/rotate-secret`, { key });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    assert.equal((await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { key })).status, 200);
    await dispatcher.runRound();
    assert.equal((await attemptsOf(key, hook.id)).state, 'delivered');
    assert.equal(w.receiver.received.length, 1);
    assert.ok(verifySignature(w.receiver.received[0], rotated.body.signingSecret));
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

  it('manual retry of a delivery whose attempt is in flight: that attempt is logged, and the delivery stays due for the retry whatever the attempt made of it', async () => {
    // A delivery on its automatic schedule, claimed by a worker whose attempt has not answered.
    const { key, hook } = await oneHookOneEvent();
    const db2 = viaOrm(w.app.deps.orm.em.fork());
    const t0 = w.clock.now();
    await fanOut(db2, t0, 10);
    const [claim] = await claimDue(db2, t0, new Date(t0.getTime() + 60_000), 10);
    assert.ok(claim);
    const res = await w.app.request('POST', `/v1/webhooks/${hook.id}/deliveries/${claim.id}/retry`, { key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.state, 'pending');
    assert.equal(res.body.nextAttemptAt, t0.toISOString());
    // The attempt in flight then fails for good (as the last of its schedule would): it is
    // logged, but the retry asked for after it keeps the delivery due.
    const at = new Date(t0.getTime() + 50);
    const [moved] = await recordOutcomes(db2, [
      { deliveryId: claim.id, leaseUntil: claim.leaseUntil, attemptCount: claim.attemptCount, attempt: { at, statusCode: 500, error: 'receiver answered 500', durationMs: 5 }, state: 'failed', nextAttemptAt: null },
    ], at);
    assert.equal(moved, false);
    let d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'pending');
    assert.equal(d.nextAttemptAt, t0.toISOString());
    assert.deepEqual(d.attempts.map((a: { statusCode: number }) => a.statusCode), [500]);
    // The retry itself goes out at the next round.
    w.clock.advance(100);
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1);
    d = await attemptsOf(key, hook.id);
    assert.equal(d.state, 'delivered');
    assert.deepEqual(d.attempts.map((a: { statusCode: number }) => a.statusCode), [500, 200]);
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

  it('with the database down, a polling round logs each failing poll once, not every 100 ms, and says when it works again', async () => {
    // Found by a review (2026-11-29): each poll's failure was an error line, 18 a second for the
    // fan-out and the claim together for as long as the database was down.
    const p = w.dispatcher({ lingerMs: 1_500, pollMs: 100, maxRoundMs: 2_000 });
    const stmts = (p as unknown as { db: { run: (name: string, text: string, params: unknown[]) => Promise<unknown> } }).db;
    const run = stmts.run.bind(stmts);
    let down = true;
    let refused = 0;
    stmts.run = async (name, text, params) => {
      if (down) {
        refused++;
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      }
      return run(name, text, params);
    };
    const lines = (what: string) => w.app.logs.text.split('\n').filter((l) => l.includes(what)).length;
    const before = { fanOut: lines('fanning out webhook events failed'), claim: lines('claiming webhook deliveries failed') };
    await p.runRound();
    assert.ok(refused >= 10, `${refused} polls refused`);
    assert.equal(lines('fanning out webhook events failed') - before.fanOut, 1);
    assert.equal(lines('claiming webhook deliveries failed') - before.claim, 1);
    down = false;
    await p.runRound();
    assert.equal(lines('fanning out webhook events works again'), 1);
    assert.equal(lines('claiming webhook deliveries works again'), 1);
  });
});
