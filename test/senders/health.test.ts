import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, ManualClock, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { laterPort } from '../support/ports.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { recordSenderFailure } from '../../src/modules/senders/health.ts';

// Sender health from what SMTP servers actually answer (issue 16, part 1), against real
// servers: a closed port, an smtp-server that refuses the login, one that answers 421.
describe('sender account health from real SMTP outcomes', function () {
  this.timeout(60_000);
  let app: TestApp;
  let db: pg.Client;
  const clock = new ManualClock('2026-05-04T10:00:00.000Z'); // a Monday
  const good = new SmtpSink();
  /** Answers 421 to MAIL FROM while `throttling`. */
  const throttled = new SmtpSink();
  let throttling = true;
  /** Refuses every message after its data with Microsoft 365's "sending quota exceeded". */
  const overQuota = new SmtpSink();
  /** Not started until the test brings it up: its port (below the ephemeral range) refuses until then. */
  const down = new SmtpSink();
  let downPort = 0;
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;

  before(async () => {
    await good.start();
    await throttled.start({
      onMailFrom: (_address, _session, cb) => {
        if (!throttling) return cb();
        const err = new Error('4.7.0 Too many messages, rate limit exceeded; try again later') as Error & { responseCode: number };
        err.responseCode = 421;
        cb(err);
      },
    });
    await overQuota.start({
      onData: (stream, _session, cb) => {
        stream.resume();
        stream.on('end', () => {
          const err = new Error('5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException; Failed to process message due to a permanent exception with message Cannot submit message.') as Error & {
            responseCode: number;
          };
          err.responseCode = 554;
          cb(err);
        });
      },
    });
    downPort = await laterPort();
    app = await startTestApp({ clock, config: { publicUrl: 'https://mg.example.com' } });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 2, timeoutMs: 5_000 });
    dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [5 * 60_000] });
  });
  after(async () => {
    await messenger.close();
    await dispatcher.close();
    await db.end();
    await app.close();
    await good.stop();
    await throttled.stop();
    await overQuota.stop();
    await down.stop();
  });

  const rand = () => Math.random().toString(36).slice(2, 8);

  /** A pool of the given accounts (SMTP URLs) and a started campaign to `n` leads. */
  async function setup(urls: Array<{ email: string; url: string }>, n: number) {
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const s = app.services();
    const ids: string[] = [];
    for (const u of urls) ids.push((await s.senders.add({ workspaceId: workspace.id, email: u.email, name: 'Sender', smtpUrl: u.url })).id);
    const pool = await s.senders.createPool(workspace.id, 'pool', 1000, ids);
    const c = await app.request('POST', '/v1/campaigns', { key, body: { name: 'Health', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    const leads = Array.from({ length: n }, (_, i) => ({ email: `l${i}.${rand()}@lead.example` }));
    if (!n) return { key, ids, campaignId: c.body.id as string, leads: [] };
    assert.equal((await app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key, body: { leads } })).status, 200);
    assert.equal((await app.request('POST', `/v1/campaigns/${c.body.id}/start`, { key })).status, 200);
    return { key, ids, campaignId: c.body.id as string, leads: leads.map((l) => l.email) };
  }

  const accounts = async (key: string) => (await app.request('GET', '/v1/sender-accounts', { key })).body as Array<Record<string, any>>;
  const stats = async (key: string, id: string) => (await app.request('GET', `/v1/campaigns/${id}/stats`, { key })).body;
  /** Health transition lines logged for one account: [level, msg]. */
  const transitions = (accountId: string) =>
    app.logs.lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes(accountId) && l.includes('sender account health'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; response: string | null; from: string; to: string });
  const sentBy = (sink: SmtpSink, email: string) => sink.received.filter((r) => r.user === email).length;

  it('a closed port: unreachable (logged once), backed off, the pool\'s other account sends; a later success is ok', async () => {
    const bad = `down.${rand()}@acme.example`;
    const fine = `fine.${rand()}@acme.example`;
    good.users.set(fine, 'pw');
    good.users.set(bad, 'pw');
    const t = await setup([{ email: bad, url: `smtp://${encodeURIComponent(bad)}:pw@127.0.0.1:${downPort}` }, { email: fine, url: good.url(fine, 'pw') }], 6);
    const [badId, fineId] = t.ids;
    const before = good.received.length;
    // The failed account's messages go back to the queue; the next round gives them to the other.
    await dispatcher.runRound();
    await dispatcher.runRound();
    assert.equal(good.received.length - before, 6, 'every message went through the reachable account');
    assert.equal(sentBy(good, fine), 6);

    const list = await accounts(t.key);
    const b = list.find((a) => a.id === badId)!;
    assert.equal(b.health, 'unreachable');
    assert.match(b.healthError, /ECONNREFUSED/);
    assert.equal(b.healthRetryAt, new Date(clock.now().getTime() + 60_000).toISOString());
    assert.equal(list.find((a) => a.id === fineId)!.health, 'ok');
    const s = await stats(t.key, t.campaignId);
    assert.deepEqual([s.sent, s.bounced, s.queued, s.sendersAvailable, s.blockedReason], [6, 0, 0, 1, null]);

    const lines = transitions(badId);
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0].level, 40);
    assert.equal(lines[0].msg, 'sender account health unknown -> unreachable');
    assert.match(lines[0].response!, /ECONNREFUSED/);

    // The server comes back; after the back-off the account is tried again and is ok.
    await down.start({}, downPort);
    down.users.set(bad, 'pw');
    const leads = Array.from({ length: 2 }, (_, i) => ({ email: `again${i}.${rand()}@lead.example` }));
    const c2 = await app.request('POST', '/v1/campaigns', {
      key: t.key,
      body: { name: 'Again', senderPoolId: (await db.query(`select pool_id from pool_members where sender_account_id = $1`, [badId])).rows[0].pool_id, sequenceSteps: [{ subject: 'Hi', bodyHtml: 'x' }] },
    });
    await app.request('POST', `/v1/campaigns/${c2.body.id}/leads/bulk`, { key: t.key, body: { leads } });
    // Only the recovered account is in the pool now.
    await db.query(`delete from pool_members where sender_account_id = $1`, [fineId]);
    await app.request('POST', `/v1/campaigns/${c2.body.id}/start`, { key: t.key });
    await dispatcher.runRound();
    assert.equal(sentBy(down, bad), 0, 'still backed off: not tried before healthRetryAt');
    assert.equal((await stats(t.key, c2.body.id)).blockedReason, 'no_sender_available');
    clock.advance(61_000);
    assert.equal((await stats(t.key, c2.body.id)).sendersAvailable, 1);
    await dispatcher.runRound();
    assert.equal(sentBy(down, bad), 2);
    const after = (await accounts(t.key)).find((a) => a.id === badId)!;
    assert.deepEqual([after.health, after.healthError, after.healthRetryAt], ['ok', null, null]);
    const all = transitions(badId);
    assert.deepEqual(all.map((l) => [l.level, l.msg]), [[40, 'sender account health unknown -> unreachable'], [40, 'sender account health unreachable -> ok']]);
  });

  it('421 on MAIL FROM: rate_limited with a back-off, the other account sends, a later success is ok', async () => {
    const slow = `slow.${rand()}@acme.example`;
    const fine = `fine.${rand()}@acme.example`;
    throttled.users.set(slow, 'pw');
    good.users.set(fine, 'pw');
    throttling = true;
    const t = await setup([{ email: slow, url: throttled.url(slow, 'pw') }, { email: fine, url: good.url(fine, 'pw') }], 4);
    const [slowId] = t.ids;
    await dispatcher.runRound();
    await dispatcher.runRound();
    assert.equal(sentBy(good, fine), 4);
    assert.equal(throttled.received.length, 0);
    const a = (await accounts(t.key)).find((x) => x.id === slowId)!;
    assert.equal(a.health, 'rate_limited');
    assert.match(a.healthError, /421.*rate limit/);
    assert.equal(transitions(slowId).length, 1);
    assert.equal(transitions(slowId)[0].msg, 'sender account health unknown -> rate_limited');
    const s = await stats(t.key, t.campaignId);
    assert.deepEqual([s.sent, s.bounced, s.queued], [4, 0, 0]);

    // The provider lets go; after the back-off the account sends again and is ok.
    throttling = false;
    await db.query(`delete from pool_members where sender_account_id = $1`, [t.ids[1]]);
    const c2 = await app.request('POST', '/v1/campaigns', {
      key: t.key,
      body: { name: 'Later', senderPoolId: (await db.query(`select pool_id from pool_members where sender_account_id = $1`, [slowId])).rows[0].pool_id, sequenceSteps: [{ subject: 'Hi', bodyHtml: 'x' }] },
    });
    await app.request('POST', `/v1/campaigns/${c2.body.id}/leads/bulk`, { key: t.key, body: { leads: [{ email: `later.${rand()}@lead.example` }] } });
    await app.request('POST', `/v1/campaigns/${c2.body.id}/start`, { key: t.key });
    clock.advance(61_000);
    await dispatcher.runRound();
    assert.equal(throttled.received.length, 1);
    assert.equal((await accounts(t.key)).find((x) => x.id === slowId)!.health, 'ok');
    assert.deepEqual(transitions(slowId).map((l) => l.msg), ['sender account health unknown -> rate_limited', 'sender account health rate_limited -> ok']);
  });

  it("a 5xx that says the account's sending quota is used up is the account's throttling: rate_limited, no lead bounced or suppressed, the other account sends", async () => {
    const full = `full.${rand()}@acme.example`;
    const fine = `fine.${rand()}@acme.example`;
    overQuota.users.set(full, 'pw');
    good.users.set(fine, 'pw');
    const t = await setup([{ email: full, url: overQuota.url(full, 'pw') }, { email: fine, url: good.url(fine, 'pw') }], 4);
    const [fullId] = t.ids;
    await dispatcher.runRound();
    await dispatcher.runRound();
    assert.equal(sentBy(good, fine), 4);
    const a = (await accounts(t.key)).find((x) => x.id === fullId)!;
    assert.equal(a.health, 'rate_limited');
    assert.match(a.healthError, /SubmissionQuotaExceeded/);
    const s = await stats(t.key, t.campaignId);
    assert.deepEqual([s.sent, s.bounced, s.queued], [4, 0, 0]);
    const suppressed = await db.query(`select count(*)::int as n from suppressions where workspace_id = (select workspace_id from campaigns where id = $1)`, [t.campaignId]);
    assert.equal(suppressed.rows[0].n, 0, "no lead suppressed for the account's quota");
  });

  it('a refused login: auth_failed, not retried after any back-off, cleared by resume; one line per change', async () => {
    const locked = `locked.${rand()}@acme.example`;
    good.users.set(locked, 'right');
    const t = await setup([{ email: locked, url: good.url(locked, 'wrong') }], 2);
    const [id] = t.ids;
    await dispatcher.runRound();
    await dispatcher.runRound();
    let a = (await accounts(t.key)).find((x) => x.id === id)!;
    assert.deepEqual([a.health, a.healthRetryAt], ['auth_failed', null]);
    assert.match(a.healthError, /535/);
    // Every account of the pool is down: the messages wait queued, nothing is bounced, and the
    // campaign says why.
    let s = await stats(t.key, t.campaignId);
    assert.deepEqual([s.sent, s.bounced, s.queued, s.sendersAvailable, s.blockedReason], [0, 0, 2, 0, 'no_sender_available']);
    clock.advance(2 * 3_600_000);
    await dispatcher.runRound();
    assert.equal(sentBy(good, locked), 0);
    assert.equal(transitions(id).length, 1);

    // New credentials at the provider's side, then the operator resumes the account.
    good.users.set(locked, 'wrong');
    await app.services().senders.setStatus(id, 'active');
    a = (await accounts(t.key)).find((x) => x.id === id)!;
    assert.deepEqual([a.health, a.healthError], ['unknown', null]);
    await dispatcher.runRound();
    assert.equal(sentBy(good, locked), 2);
    s = await stats(t.key, t.campaignId);
    assert.deepEqual([s.sent, s.queued, s.blockedReason], [2, 0, null]);
    assert.deepEqual(
      transitions(id).map((l) => [l.level, l.msg]),
      [
        [40, 'sender account health unknown -> auth_failed'],
        [40, 'sender account health auth_failed -> unknown'],
        [30, 'sender account health unknown -> ok'],
      ],
    );
  });

  it('two workers failing the same account at once: the change is seen (and logged) once', async () => {
    const t = await setup([{ email: `race.${rand()}@acme.example`, url: 'smtp://u:p@127.0.0.1:1' }], 0);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => app.deps.orm.em.fork().transactional((tx) => recordSenderFailure(tx, t.ids[0], 'unreachable', 'connect ECONNREFUSED', clock.now()))),
    );
    assert.equal(results.filter(Boolean).length, 1);
    const [row] = (await db.query(`select health, health_failures from sender_accounts where id = $1`, [t.ids[0]])).rows;
    // One failure within the back-off, not eight.
    assert.deepEqual(row, { health: 'unreachable', health_failures: 1 });
  });
});
