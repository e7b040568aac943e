import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, ManualClock, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { ConnectionLimits, Semaphore } from '../../src/modules/sending/in-flight.ts';

// A server that limits the connections of each account (Microsoft 365: 3 per mailbox) refuses
// the greeting of one connection too many with "421 4.3.2 The maximum number of concurrent server
// connections has exceeded a limit" while the account's other connections deliver. That is not
// the account failing: the message goes back to the queue as it was and the worker opens fewer
// connections. Only a refusal of the worker's one connection backs the account off.

/** Microsoft 365's answer to a connection beyond its limit. */
const CONCURRENT = '4.3.2 The maximum number of concurrent server connections has exceeded a limit, closing transmission channel';

describe('sending: a server that refuses one connection too many', function () {
  this.timeout(60_000);
  let app: TestApp;
  let db: pg.Client;
  const clock = new ManualClock('2026-05-04T10:00:00.000Z'); // a Monday
  /** Each test's sinks, messengers and dispatchers, closed after it. */
  let closing: Array<() => Promise<void>> = [];

  before(async () => {
    app = await startTestApp({ clock, config: { publicUrl: 'https://mg.example.com' } });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
  });
  afterEach(async () => {
    for (const close of closing.reverse()) await close();
    closing = [];
  });
  after(async () => {
    await db.end();
    await app.close();
  });

  const rand = () => Math.random().toString(36).slice(2, 8);

  /**
   * An SMTP server that holds at most `allowed` connections at once and refuses the greeting of
   * any more with Microsoft 365's 421 4.3.2 (smtp-server's onConnect); `refused` counts them.
   */
  async function limitingSink(allowed: number) {
    const open = new Set<string>();
    const s = { sink: new SmtpSink(), refused: 0, allowed };
    await s.sink.start({
      onConnect: (session, cb) => {
        if (open.size >= s.allowed) {
          s.refused++;
          const err = new Error(CONCURRENT) as Error & { responseCode: number };
          err.responseCode = 421;
          return cb(err);
        }
        open.add(session.id);
        cb();
      },
      onClose: (session) => {
        open.delete(session.id);
      },
    });
    closing.push(() => s.sink.stop());
    return s;
  }

  /** A worker that opens up to 3 connections per account (MAILGATE_SMTP_MAX_CONNECTIONS 3). */
  function worker() {
    const messenger = new SmtpMessenger({ maxConnections: 3, timeoutMs: 10_000 });
    const dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 3, retryDelaysMs: [5 * 60_000], batchSize: 20 });
    closing.push(async () => {
      await dispatcher.close();
      await messenger.close();
    });
    return dispatcher;
  }

  /** One account on `sink` in a pool, and a started campaign of `n` leads. */
  async function setup(sink: SmtpSink, n: number) {
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const email = `m365.${rand()}@acme.example`;
    sink.users.set(email, 'pw');
    const s = app.services();
    const account = await s.senders.add({ workspaceId: workspace.id, email, name: 'Sender', smtpUrl: sink.url(email, 'pw') });
    const pool = await s.senders.createPool(workspace.id, 'pool', 10_000, [account.id]);
    const t = { key, accountId: account.id, poolId: pool.id as string };
    return { ...t, ...(await campaign(t, n)) };
  }

  /** A started campaign of `n` new leads on the pool. */
  async function campaign(t: { key: string; poolId: string }, n: number) {
    const c = await app.request('POST', '/v1/campaigns', { key: t.key, body: { name: 'Limit', senderPoolId: t.poolId, sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    const leads = Array.from({ length: n }, (_, i) => `l${i}.${rand()}@lead.example`);
    assert.equal((await app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key: t.key, body: { leads: leads.map((email) => ({ email })) } })).status, 200);
    assert.equal((await app.request('POST', `/v1/campaigns/${c.body.id}/start`, { key: t.key })).status, 200);
    return { campaignId: c.body.id as string, leads };
  }

  /** Rounds until the campaign has nothing left to send, or `rounds` rounds (a waiting condition, not a time). */
  async function sendUntilDone(d: SendDispatcher, campaignId: string, rounds = 10) {
    for (let i = 0; i < rounds; i++) {
      await d.runRound();
      const left = await db.query(`select count(*)::int as n from outbound_messages where campaign_id = $1 and state in ('queued', 'sending')`, [campaignId]);
      if (left.rows[0].n === 0) return;
    }
  }

  const stats = async (key: string, id: string) => (await app.request('GET', `/v1/campaigns/${id}/stats`, { key })).body;
  const account = async (key: string, id: string) => ((await app.request('GET', '/v1/sender-accounts', { key })).body as Array<Record<string, any>>).find((a) => a.id === id)!;
  const messages = async (campaignId: string) => (await db.query(`select state, attempts, bounce_type from outbound_messages where campaign_id = $1`, [campaignId])).rows;
  /** Recipients the sink accepted, sorted (a repeat shows twice). */
  const delivered = (sink: SmtpSink, leads: string[]) => sink.received.map((r) => r.to[0]).filter((to) => leads.includes(to)).sort();
  const lowered = (accountId: string) =>
    app.logs.lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes(accountId) && l.includes('one too many'))
      .map((l) => JSON.parse(l) as { level: number; connections: number; response: string });

  /** Each lead delivered once, nothing bounced or retried, the account healthy with no back-off. */
  async function allSentOnce(t: { key: string; accountId: string; campaignId: string; leads: string[] }, sink: SmtpSink) {
    assert.deepEqual(delivered(sink, t.leads), [...t.leads].sort(), 'every message delivered exactly once');
    const s = await stats(t.key, t.campaignId);
    assert.deepEqual([s.sent, s.delivered, s.bounced, s.queued], [t.leads.length, t.leads.length, 0, 0]);
    const rows = await messages(t.campaignId);
    assert.ok(
      rows.every((m) => m.state === 'sent' && m.attempts === 0 && m.bounce_type === null),
      JSON.stringify(rows.filter((m) => m.state !== 'sent' || m.attempts !== 0)),
    );
    const a = await account(t.key, t.accountId);
    assert.deepEqual([a.health, a.healthRetryAt, a.healthError], ['ok', null, null]);
  }

  it("a server allowing 2 connections (Microsoft 365's 421 4.3.2) to a worker opening 3: each message sent once, the account ok with no back-off; after the recovery interval one more connection is tried", async () => {
    const limited = await limitingSink(2);
    const d = worker();
    const t = await setup(limited.sink, 40);
    await sendUntilDone(d, t.campaignId);
    await allSentOnce(t, limited.sink);
    // The third connection was refused, and the worker then kept to two: not refused again and
    // again (each refusal lowers the limit, so at most 2 before it is 1).
    assert.ok(limited.refused >= 1, 'the server refused the third connection');
    assert.ok(limited.refused <= 2, `${limited.refused} refused connections`);
    const lines = lowered(t.accountId);
    assert.equal(lines.length, limited.refused);
    assert.equal(lines.at(-1)!.connections, 2);
    assert.equal(lines[0].level, 30);
    assert.match(lines[0].response, /4\.3\.2 The maximum number of concurrent/);

    // Ten minutes without a refusal: the worker tries a third connection again, which is
    // refused once more, and keeps to two again; still no back-off, each message once.
    clock.advance(10 * 60_000);
    const before = limited.refused;
    const next = { ...t, ...(await campaign(t, 40)) };
    await sendUntilDone(d, next.campaignId);
    await allSentOnce(next, limited.sink);
    assert.equal(limited.refused - before, 1, 'one more connection tried, and refused');
  });

  it("smtp-server's own maxClients refusal ('421 ... Too many connected clients'): each message sent once, the account ok", async () => {
    const sink = new SmtpSink();
    await sink.start({ maxClients: 2 });
    closing.push(() => sink.stop());
    const d = worker();
    const t = await setup(sink, 30);
    await sendUntilDone(d, t.campaignId);
    await allSentOnce(t, sink);
    const lines = lowered(t.accountId);
    assert.ok(lines.length >= 1 && lines.length <= 2, JSON.stringify(lines));
    assert.match(lines[0].response, /Too many connected clients/);
  });

  it('a server refusing every connection that way: the account is backed off (rate_limited) as before, nothing sent or counted; once it allows 2, each message goes once', async () => {
    const limited = await limitingSink(0);
    const d = worker();
    const t = await setup(limited.sink, 12);
    await d.runRound();
    await d.runRound();
    let a = await account(t.key, t.accountId);
    assert.equal(a.health, 'rate_limited');
    assert.equal(a.healthRetryAt, new Date(clock.now().getTime() + 60_000).toISOString());
    assert.match(a.healthError, /4\.3\.2 The maximum number of concurrent/);
    // At most one refusal per connection the worker had open: no refusal loop before the back-off.
    assert.ok(limited.refused >= 1 && limited.refused <= 3, `${limited.refused} refused connections`);
    const s = await stats(t.key, t.campaignId);
    assert.deepEqual([s.sent, s.bounced, s.queued], [0, 0, 12]);
    assert.ok((await messages(t.campaignId)).every((m) => m.state === 'queued' && m.attempts === 0));
    assert.equal(limited.sink.received.length, 0);

    // The server allows two connections after the back-off: every message goes out once and
    // the account is ok (it used to be backed off again at the third connection).
    limited.allowed = 2;
    clock.advance(61_000);
    await sendUntilDone(d, t.campaignId);
    await allSentOnce(t, limited.sink);
    a = await account(t.key, t.accountId);
    assert.equal(a.health, 'ok');
  });
});

describe('sending: connection limits per account (pure)', () => {
  it('a refusal lowers the limit to the connections that were open, at least one less and at least 1; it comes back one per recovery interval', () => {
    let now = 0;
    const limits = new ConnectionLimits(3, 600_000, () => now);
    assert.equal(limits.of('a'), 3);
    assert.equal(limits.refused('a', 2), 2);
    assert.equal(limits.of('b'), 3, 'per account');
    // Refusals of connections that were themselves being refused still bring it down by one each.
    assert.equal(limits.refused('a', 2), 1);
    assert.equal(limits.refused('a', 1), 1);
    now += 599_999;
    assert.equal(limits.of('a'), 1);
    now += 1;
    assert.equal(limits.of('a'), 2);
    // A refusal restarts the interval.
    now += 300_000;
    assert.equal(limits.refused('a', 1), 1);
    now += 300_000;
    assert.equal(limits.of('a'), 1);
    // Long idle: back to the maximum, never past it.
    now += 10 * 600_000;
    assert.equal(limits.of('a'), 3);
  });

  it('a semaphore lowered while in use starts nothing new until fewer than its limit run; raised, its waiters start', async () => {
    const sem = new Semaphore(3);
    for (let i = 0; i < 3; i++) await sem.acquire();
    sem.resize(2);
    const started: number[] = [];
    const waiters = [1, 2, 3].map((n) => sem.acquire().then(() => started.push(n)));
    sem.release();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [], 'three running above a limit of 2: one ending starts nothing');
    sem.release();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [1]);
    sem.resize(3);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [1, 2]);
    assert.equal(sem.inUse, 3);
    sem.release();
    await Promise.all(waiters);
    assert.deepEqual(started, [1, 2, 3]);
  });
});
