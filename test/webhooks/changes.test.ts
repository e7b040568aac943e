import assert from 'node:assert/strict';
import pg from 'pg';
import { webhookWorld, verifySignature, type WebhookWorld } from './helpers.ts';
import { DeliveryRound, type RoundWork } from '../../src/modules/webhooks/round.ts';
import type { ClaimedDelivery } from '../../src/modules/webhooks/entities.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { waitFor } from '../support/wait.ts';

// A worker holds up to a queue of attempts it has taken (fanned out or claimed) with the URL,
// secret and state it read then. Until 2026-11-29 (a review), a webhook disabled, deleted,
// moved to a new URL or given a new secret through the API still got those attempts the old
// way until the queue drained. Now the API's change notifies the workers on commit
// (notifyWebhookChanges) and a listening worker applies it to the attempts it has not started.
//
// Each test holds the receiver's answers so that one attempt is in flight and the rest of the
// batch waits in the worker's queue (one slot), changes the webhook through the API, waits for
// the worker to have heard it, then releases the receiver.
describe('webhooks: a change through the API reaches the attempts a worker holds', function () {
  this.timeout(60_000);
  let w: WebhookWorld;
  let db: pg.Client;
  before(async () => {
    // A long timeout: held answers must not time out.
    w = await webhookWorld({ webhookTimeout: '20s' });
    db = new pg.Client({ connectionString: w.app.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await w.close();
  });
  beforeEach(() => w.receiver.reset());
  afterEach(async () => {
    await db.query('delete from webhooks');
    await db.query('delete from webhook_fanouts');
  });

  /** The receiver records requests as they come and answers 200 to all of them once released. */
  function holdAnswers(): () => void {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    w.receiver.respond = () => gate.then(() => 200);
    return release;
  }

  /** A worker listening for webhook changes, with `slots` attempts at once and a queue of 20. */
  async function listeningWorker(slots = 1): Promise<WebhookDispatcher> {
    const d = w.dispatcher({ concurrency: slots, queue: 20 });
    await d.listen();
    return d;
  }

  /** Waits until the worker has applied `n` changes of the webhook to attempts it holds (its log line). */
  async function heard(hookId: string, n = 1): Promise<void> {
    await waitFor(`the worker to apply ${n} change(s) of ${hookId}`, async () => {
      const lines = w.app.logs.lines.map((l) => JSON.parse(l)).filter((l) => l.webhookId === hookId && typeof l.attempts === 'number' && /^webhook /.test(l.msg));
      return lines.length >= n;
    });
  }

  async function emitEvents(workspaceId: string, n: number, tag: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await w.emit(workspaceId, 'message.sent', { messageId: `msg_${tag}${i}` }));
    return ids;
  }

  const toPath = (p: string) => w.receiver.received.filter((r) => r.path === p);

  it('disabled: its queued first attempts do not go out; they are held like its other deliveries and go out once it is enabled', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent'], '/disabled');
    const events = await emitEvents(workspaceId, 10, 'dis');
    const release = holdAnswers();
    const worker = await listeningWorker();
    const round = worker.runRound();
    await w.receiver.waitFor(1); // one in flight, nine queued behind it

    const res = await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } });
    assert.equal(res.status, 200);
    assert.equal(w.receiver.received.length, 1);
    await heard(hook.id);
    release();
    const r = await round;
    assert.equal(w.receiver.received.length, 1, 'nothing queued went out after the disable committed');
    assert.equal(r.fannedOut, 10);
    assert.equal(r.delivered, 1, 'the attempt in flight finished as before');

    // The batch was given back when the round ended; the next round takes it again and writes
    // the nine pairs held, as for any event owed to a disabled webhook.
    w.receiver.respond = () => 200;
    await worker.runRound();
    assert.equal(w.receiver.received.length, 1);
    const held = await w.deliveries(key, hook.id, '?limit=50');
    assert.equal(held.length, 10);
    const pending = held.filter((d: { state: string }) => d.state === 'pending');
    assert.equal(pending.length, 9);
    assert.ok(pending.every((d: { attempts: unknown[]; nextAttemptAt: unknown }) => d.attempts.length === 0 && d.nextAttemptAt === null), JSON.stringify(pending));
    assert.equal((await db.query(`select count(*)::int as n from webhook_fanouts`)).rows[0].n, 0);

    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'active' } })).status, 200);
    await worker.runRound();
    assert.equal(w.receiver.received.length, 10);
    assert.deepEqual(w.receiver.received.map((q) => q.json.id).sort(), events.slice().sort(), 'each event once');
    const after = await w.deliveries(key, hook.id, '?limit=50');
    assert.ok(after.every((d: { state: string; attempts: unknown[] }) => d.state === 'delivered' && d.attempts.length === 1), JSON.stringify(after));
  });

  it('disabled: its queued retries do not go out; they are held with their attempts and go out once it is enabled', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent'], '/disabled-retries');
    await emitEvents(workspaceId, 10, 'disr');
    // First attempts fail: ten pending retries, due after the first delay (1 s).
    w.receiver.respond = () => 500;
    const worker = await listeningWorker();
    assert.equal((await worker.runRound()).retrying, 10);
    w.receiver.reset();
    w.clock.advance(1_000);
    const release = holdAnswers();
    const round = worker.runRound();
    await w.receiver.waitFor(1);

    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'disabled' } })).status, 200);
    await heard(hook.id);
    release();
    const r = await round;
    assert.equal(r.claimed, 10);
    assert.equal(w.receiver.received.length, 1, 'nothing queued went out after the disable committed');

    const held = await w.deliveries(key, hook.id, '?limit=50');
    const pending = held.filter((d: { state: string }) => d.state === 'pending');
    assert.equal(pending.length, 9);
    assert.ok(pending.every((d: { attempts: unknown[]; nextAttemptAt: unknown }) => d.attempts.length === 1 && d.nextAttemptAt === null), JSON.stringify(pending));
    w.receiver.respond = () => 200;
    await worker.runRound();
    assert.equal(w.receiver.received.length, 1, 'held while disabled');

    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { status: 'active' } })).status, 200);
    await worker.runRound();
    assert.equal(w.receiver.received.length, 10);
    const after = await w.deliveries(key, hook.id, '?limit=50');
    assert.ok(after.every((d: { state: string; attempts: unknown[] }) => d.state === 'delivered' && d.attempts.length === 2), JSON.stringify(after));
  });

  it('deleted: its queued attempts do not go out and write nothing; another webhook of the same batch gets all of its own', async () => {
    const { key, workspaceId } = await w.workspace();
    const gone = await w.register(key, ['message.sent'], '/deleted');
    const kept = await w.register(key, ['message.sent'], '/kept');
    const events = await emitEvents(workspaceId, 6, 'del');
    const release = holdAnswers();
    const worker = await listeningWorker(2);
    const round = worker.runRound();
    await w.receiver.waitFor(2); // the first event's two pairs in flight, ten queued

    assert.equal((await w.app.request('DELETE', `/v1/webhooks/${gone.id}`, { key })).status, 204);
    const atChange = toPath('/deleted').length;
    assert.equal(atChange, 1);
    await heard(gone.id);
    release();
    await round;
    assert.equal(toPath('/deleted').length, atChange, 'nothing queued went out after the deletion committed');
    assert.deepEqual(toPath('/kept').map((q) => q.json.id).sort(), events.slice().sort(), 'the other webhook got every event once');

    // The batch given back is taken again: nothing is owed to the deleted webhook any more.
    await worker.runRound();
    assert.equal(toPath('/deleted').length, atChange);
    assert.equal(toPath('/kept').length, 6);
    assert.equal((await db.query(`select count(*)::int as n from webhook_deliveries where webhook_id = $1`, [gone.id])).rows[0].n, 0);
    assert.equal((await db.query(`select count(*)::int as n from webhook_fanouts`)).rows[0].n, 0);
    const keptLog = await w.deliveries(key, kept.id, '?limit=50');
    assert.equal(keptLog.length, 6);
    assert.ok(keptLog.every((d: { state: string; attempts: unknown[] }) => d.state === 'delivered' && d.attempts.length === 1));
  });

  it('a new URL and a rotated secret: its queued attempts go to the new URL, signed with the new secret', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent'], '/old');
    const events = await emitEvents(workspaceId, 10, 'url');
    const release = holdAnswers();
    const worker = await listeningWorker();
    const round = worker.runRound();
    await w.receiver.waitFor(1);

    assert.equal((await w.app.request('PATCH', `/v1/webhooks/${hook.id}`, { key, body: { url: w.receiver.url('/new') } })).status, 200);
    const rotated = await w.app.request('POST', `/v1/webhooks/${hook.id}/rotate-secret`, { key });
    assert.equal(rotated.status, 200);
    assert.equal(toPath('/old').length, 1);
    await heard(hook.id, 2);
    release();
    await round;

    assert.equal(toPath('/old').length, 1, 'only the attempt in flight at the change went to the old URL');
    const moved = toPath('/new');
    assert.equal(moved.length, 9);
    assert.ok(moved.every((q) => verifySignature(q, rotated.body.signingSecret)), 'signed with the new secret');
    assert.deepEqual(w.receiver.received.map((q) => q.json.id).sort(), events.slice().sort(), 'each event once');
    const log = await w.deliveries(key, hook.id, '?limit=50');
    assert.equal(log.length, 10);
    assert.ok(log.every((d: { state: string; attempts: unknown[] }) => d.state === 'delivered' && d.attempts.length === 1));
    assert.equal((await db.query(`select count(*)::int as n from webhook_fanouts`)).rows[0].n, 0, 'the batch was finished by its last outcome');
  });
});

// The round's side of it, alone: a statement that started before the change committed may bring
// attempts read the old way after the worker heard the change. Which fetch is under way when a
// change commits is up to timing, so this drives a DeliveryRound directly: its fetch answers when
// the test says, after the change was heard.
describe('webhooks: a change heard while a fetch is under way (DeliveryRound)', () => {
  const claimOf = (id: string, webhookId: string): ClaimedDelivery => ({
    id,
    attemptCount: 1,
    leaseUntil: new Date(0),
    webhookId,
    url: `https://old.example/${webhookId}`,
    signingSecretEnc: 'old',
    eventId: `evt_${id}`,
    event: 'message.sent',
    data: {},
    eventCreatedAt: '2026-05-04T10:00:00.000Z',
  });

  it('applies the change to the fetched attempts when they arrive: taken out, or brought up to date', async () => {
    let answer!: (claims: ClaimedDelivery[]) => void;
    let claims = 0;
    const attempted: ClaimedDelivery[] = [];
    const givenBack: ClaimedDelivery[] = [];
    const work: RoundWork = {
      stopping: () => false,
      claim: () => (claims++ ? Promise.resolve([]) : new Promise((resolve) => (answer = resolve))),
      fanOut: async () => ({ events: 0, claims: [] }),
      attempt: (c, _result, answered, written) => {
        attempted.push(c);
        answered();
        written();
      },
      giveBack: async (cs) => void givenBack.push(...cs),
      settled: async () => {},
    };
    const round = new DeliveryRound(work, { concurrency: 1, capacity: 4, pollMs: 10, maxRoundMs: 10_000, lingerMs: 0 });
    const running = round.run();
    await waitFor('the claim to start', async () => claims > 0);
    // Heard while the claim is under way: nothing is queued yet.
    assert.equal(round.changed({ webhookId: 'whk_off', keep: () => false }), 0);
    assert.equal(
      round.changed({
        webhookId: 'whk_moved',
        keep: (c) => {
          c.url = 'https://new.example/moved';
          c.signingSecretEnc = 'new';
          return true;
        },
      }),
      0,
    );
    answer([claimOf('dlv_1', 'whk_off'), claimOf('dlv_2', 'whk_moved'), claimOf('dlv_3', 'whk_other'), claimOf('dlv_4', 'whk_off')]);
    await running;
    assert.deepEqual(
      attempted.map((c) => [c.id, c.url, c.signingSecretEnc]),
      [
        ['dlv_2', 'https://new.example/moved', 'new'],
        ['dlv_3', 'https://old.example/whk_other', 'old'],
      ],
    );
    assert.deepEqual(
      givenBack.map((c) => c.id),
      ['dlv_1', 'dlv_4'],
    );
  });
});
