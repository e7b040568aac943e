import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, createTestDatabase, LogSink, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { startMetricsServer } from '../../src/http/metrics-server.ts';
import { serve } from '../../src/main.ts';
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/adapters/logger.ts';
import { readFileSync } from 'node:fs';
import { Metrics } from '../../src/adapters/metrics.ts';
import { openOrm } from '../../src/db/orm.ts';
import { freezingProxy } from '../support/freezing-proxy.ts';
import { sample } from '../support/prometheus.ts';


// Metrics and access logs (issue 16, part 2): a real campaign to the smtp-server sink, then
// /metrics from the metrics listener.
describe('metrics and access logs', function () {
  this.timeout(90_000);
  let app: TestApp;
  let db: pg.Client;
  const sink = new SmtpSink();
  let messenger: SmtpMessenger;
  let metricsUrl: string;
  let closeMetrics: () => Promise<void>;

  before(async () => {
    await sink.start();
    app = await startTestApp({ config: { publicUrl: 'https://mg.example.com' } });
    app.deps.metrics.collectProcessMetrics();
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 2 });
    const m = await startMetricsServer('127.0.0.1:0', app.deps.metrics, app.deps.log);
    metricsUrl = `http://127.0.0.1:${m.port}/metrics`;
    closeMetrics = () => new Promise<void>((resolve) => m.server.close(() => resolve()));
  });
  after(async () => {
    await closeMetrics();
    await messenger.close();
    await db.end();
    await app.close();
    await sink.stop();
  });

  it('after a campaign: sent counter and messages by state match the database; route templates; process metrics', async () => {
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const s = app.services();
    sink.users.set('m@acme.example', 'pw');
    const account = await s.senders.add({ workspaceId: workspace.id, email: 'm@acme.example', name: 'M', smtpUrl: sink.url('m@acme.example', 'pw') });
    const pool = await s.senders.createPool(workspace.id, 'p', 1000, [account.id]);
    const c = await app.request('POST', '/v1/campaigns', {
      key,
      body: { name: 'Metrics', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Hi', bodyHtml: 'x' }, { subject: '', bodyHtml: 'again', delayHours: 24 }] },
    });
    sink.rcptAnswers.set('nobody@lead.example', [550, '5.1.1 no such user']);
    const leads = ['a', 'b', 'c', 'nobody'].map((n) => ({ email: `${n}@lead.example` }));
    assert.equal((await app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key, body: { leads } })).status, 200);
    assert.equal((await app.request('POST', `/v1/campaigns/${c.body.id}/start`, { key })).status, 200);
    const dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000] });
    await dispatcher.runRound();
    await dispatcher.close();
    assert.equal((await app.request('GET', `/v1/campaigns/${c.body.id}/stats`, { key })).status, 200);

    const res = await fetch(metricsUrl);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    assert.equal(sample(text, 'mailgate_messages_sent_total'), 3);
    assert.equal(sample(text, 'mailgate_bounces_total', 'type="hard"'), 1);
    assert.equal(sample(text, 'mailgate_smtp_outcomes_total', 'outcome="accepted"'), 3);
    assert.equal(sample(text, 'mailgate_smtp_outcomes_total', 'outcome="rejected"'), 1);
    assert.equal(sample(text, 'mailgate_smtp_transaction_seconds_count', 'outcome="accepted"'), 3);
    assert.equal(sample(text, 'mailgate_claim_to_send_seconds_count'), 4);
    // The accepted messages' outcome statements: every one counted once, its three messages
    // among them (group commit), each statement's time under its sum.
    const writes = sample(text, 'mailgate_outcome_write_seconds_count')!;
    assert.ok(writes >= 1 && writes <= 3, String(writes));
    assert.equal(sample(text, 'mailgate_outcome_write_messages_count'), writes);
    assert.equal(sample(text, 'mailgate_outcome_write_messages_sum'), 3);
    assert.ok(sample(text, 'mailgate_outcome_write_seconds_sum')! > 0);
    // The queue by state, as the database holds it; the history (sent, bounced) is not read at
    // scrape time (the counters above, and the campaign's stats, count it).
    const states = (await db.query(`select state, count(*)::int as n from outbound_messages group by state`)).rows as Array<{ state: string; n: number }>;
    assert.deepEqual(states.map((r) => r.state).sort(), ['bounced', 'scheduled', 'sent']);
    assert.equal(sample(text, 'mailgate_messages', 'state="scheduled"'), states.find((r) => r.state === 'scheduled')!.n);
    assert.equal(sample(text, 'mailgate_messages', 'state="queued"'), 0);
    assert.equal(sample(text, 'mailgate_messages', 'state="sending"'), 0);
    assert.equal(sample(text, 'mailgate_messages', 'state="sent"'), undefined);
    // Per account: what it sent in the rolling 24 hours (its daily limit's count), 3 accepted + 1 bounced at once.
    const sentLast24h = (await app.request('GET', '/v1/sender-accounts', { key })).body.find((a: { id: string }) => a.id === account.id).sentLast24h;
    assert.equal(sample(text, 'mailgate_sender_sent_24h', `sender_account="${account.id}"`), sentLast24h);
    assert.ok(sentLast24h >= 3, String(sentLast24h));
    assert.equal(sample(text, 'mailgate_sender_accounts', 'health="ok"'), 1);
    // HTTP by route template, never the raw path with its id.
    assert.equal(sample(text, 'mailgate_http_requests_total', 'method="GET",route="/v1/campaigns/:campaignId/stats",status="200"'), 1);
    assert.equal(sample(text, 'mailgate_http_requests_total', 'method="POST",route="/v1/campaigns/:campaignId/leads/bulk",status="200"'), 1);
    assert.ok(!text.includes(c.body.id), 'no campaign id in any label');
    assert.match(text, /mailgate_http_request_duration_seconds_bucket\{le="0\.005",method="GET",route="\/v1\/campaigns\/:campaignId\/stats",status="200"\} \d+/);
    // Node's process metrics.
    assert.ok(sample(text, 'process_resident_memory_bytes')! > 0);
    assert.match(text, /^nodejs_eventloop_lag_seconds /m);
    // Only GET /metrics on that listener.
    const other = await fetch(metricsUrl.replace('/metrics', '/v1/campaigns'));
    assert.equal(other.status, 404);
    assert.equal((await other.json()).error.code, 'not_found');
  });

  it('an access log line per request at info with X-Request-Id echoed or generated; never a header or query secret', async () => {
    const { adminKey: key } = await seedWorkspace(app);
    const mine = await app.request('GET', '/v1/sender-accounts', { key, headers: { 'x-request-id': 'req-abc.123' } });
    assert.equal(mine.headers.get('x-request-id'), 'req-abc.123');
    // An unknown query parameter is refused (400): the line is written for errors too, without the query.
    const refused = await app.request('GET', '/v1/sender-accounts?token=query-secret-1', { key, headers: { 'x-request-id': 'req-q' } });
    assert.equal(refused.status, 400);
    assert.equal(refused.headers.get('x-request-id'), 'req-q');
    const made = await app.request('GET', '/v1/campaigns/cmp_nothere', { key, headers: { 'x-request-id': 'bad id with spaces' } });
    assert.equal(made.status, 404);
    const generated = made.headers.get('x-request-id')!;
    assert.match(generated, /^[0-9a-f-]{36}$/);
    const tooLong = await app.request('GET', '/v1/nowhere/at/all', { headers: { 'x-request-id': 'x'.repeat(129) } });
    assert.notEqual(tooLong.headers.get('x-request-id'), 'x'.repeat(129));

    const lines = app.logs.lines.flatMap((l) => l.split('\n')).filter(Boolean).map((l) => JSON.parse(l));
    const access = (id: string) => lines.filter((l) => l.msg === 'request' && l.requestId === id);
    assert.deepEqual(
      access('req-abc.123').map((l) => [l.level, l.method, l.route, l.status, typeof l.ms]),
      [[30, 'GET', '/v1/sender-accounts', 200, 'number']],
    );
    assert.deepEqual(access('req-q').map((l) => [l.route, l.status]), [['/v1/sender-accounts', 400]]);
    assert.deepEqual(access(generated).map((l) => [l.route, l.status]), [['/v1/campaigns/:campaignId', 404]]);
    assert.deepEqual(access(tooLong.headers.get('x-request-id')!).map((l) => [l.route, l.status]), [['unmatched', 404]]);
    assert.doesNotMatch(app.logs.text, new RegExp(`${key}|query-secret-1|cmp_nothere|Bearer`));
  });

  it('exposure: /metrics is not on the API port; MAILGATE_METRICS_ADDRESS opens a separate listener', async () => {
    const onApi = await app.request('GET', '/metrics');
    assert.equal(onApi.status, 404);
    assert.equal(onApi.body.error.code, 'not_found');

    const database = await createTestDatabase();
    const logs = new LogSink();
    const config = loadConfig({}, { databaseUrl: database.url, port: 0, metricsAddress: '127.0.0.1:0', dataDir: '.tmp/test-data', secretKey: 'a'.repeat(64) });
    const daemon = await serve(config, createLogger('info', logs), 'api', { stdout: { write: () => true, isTTY: false }, stderr: { write: () => true, isTTY: false } } as never);
    try {
      assert.ok(daemon.metricsPort && daemon.metricsPort !== daemon.port);
      const api = await fetch(`http://127.0.0.1:${daemon.port}/metrics`);
      assert.equal(api.status, 404);
      await fetch(`http://127.0.0.1:${daemon.port}/healthz`);
      const text = await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text();
      assert.equal(sample(text, 'mailgate_http_requests_total', 'method="GET",route="/healthz",status="200"'), 1);
      assert.equal(sample(text, 'mailgate_http_requests_total', 'method="GET",route="unmatched",status="404"'), 1);
      assert.match(text, /^process_cpu_user_seconds_total /m);
    } finally {
      await daemon.shutdown('test');
      await database.drop();
    }
  });

  it('the sending lag counts running campaigns inside their window only, from the window\'s opening', async () => {
    const own = await startTestApp({ database: await createTestDatabase() });
    const ownDb = new pg.Client({ connectionString: own.databaseUrl });
    await ownDb.connect();
    try {
      const { adminKey: key, workspace } = await seedWorkspace(own);
      const s = own.services();
      const account = await s.senders.add({ workspaceId: workspace.id, email: 'lag@acme.example', name: 'L', smtpUrl: 'smtp://lag:pw@127.0.0.1:9' });
      const pool = await s.senders.createPool(workspace.id, 'p', 1000, [account.id]);
      const h = new Date().getUTCHours();
      const hh = (n: number) => `${String((n + 24) % 24).padStart(2, '0')}:00`;
      const all = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
      /** A started campaign with one queued first step, due `ago` seconds ago. */
      const campaign = async (name: string, ago: number, schedule: unknown = null) => {
        const c = await own.request('POST', '/v1/campaigns', { key, body: { name, senderPoolId: pool.id, schedule, sequenceSteps: [{ subject: 'Hi', bodyHtml: 'x' }] } });
        assert.equal(c.status, 201, c.text);
        await own.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key, body: { leads: [{ email: `${name}@lead.example` }] } });
        await own.request('POST', `/v1/campaigns/${c.body.id}/start`, { key });
        await ownDb.query(`update outbound_messages set due_at = now() - make_interval(secs => $2) where campaign_id = $1`, [c.body.id, ago]);
        return c.body.id as string;
      };
      const lag = async () => sample(await new Metrics(own.deps.orm).text(), 'mailgate_queue_oldest_due_seconds')!;
      await campaign('running', 600);
      const paused = await campaign('paused', 2 * 86_400);
      await own.request('POST', `/v1/campaigns/${paused}/pause`, { key });
      // Its window opens in two hours: nothing of it could be sent now.
      await campaign('closed', 86_400, { timezone: 'UTC', days: all, start: hh(h + 2), end: hh(h + 3) });
      const first = await lag();
      assert.ok(first >= 600 && first < 660, `the running campaign's 600 s, not the paused one's nor the closed window's: ${first}`);
      // Due three hours ago, before its window opened an hour before this hour: late since the opening.
      await campaign('open', 3 * 3600, { timezone: 'UTC', days: all, start: hh(h - 1), end: hh(h + 1) });
      const opening = new Date();
      opening.setUTCMinutes(0, 0, 0);
      const expected = (Date.now() - (opening.getTime() - 3_600_000)) / 1000;
      const second = await lag();
      assert.ok(Math.abs(second - expected) < 60, `since the window opened (${expected} s): ${second}`);
    } finally {
      await ownDb.end();
      await own.close();
    }
  });

  it('the Grafana dashboard and docs/operating.md name only metrics that exist', () => {
    const m = new Metrics();
    m.collectProcessMetrics();
    const known = new Set(m.registry.getMetricsAsArray().map((x) => x.name));
    const used = (text: string) => new Set([...text.matchAll(/\b((?:mailgate|process|nodejs)_[a-z0-9_]+)/g)].map((x) => x[1].replace(/_(bucket|sum|count)$/, '')));
    const dashboard = readFileSync('deploy/grafana-dashboard.json', 'utf8');
    const inDashboard = [...used(dashboard)];
    assert.ok(inDashboard.length >= 15);
    assert.deepEqual(inDashboard.filter((n) => !known.has(n)), []);
    const documented = [...used(readFileSync('docs/operating.md', 'utf8'))].filter((n) => n.startsWith('mailgate_'));
    assert.deepEqual(documented.filter((n) => !known.has(n)), []);
    // Every mailgate metric is documented.
    assert.deepEqual([...known].filter((n) => n.startsWith('mailgate_') && !documented.includes(n)), []);
  });

  it('with the database unreachable /metrics still answers: the process metrics, mailgate_database_up 0, no database gauges', async () => {
    // Found by a review (2026-11-29): one failed database read failed the whole scrape (500), so
    // during a database outage Prometheus took a live process for down and lost its counters.
    const database = await createTestDatabase();
    const proxy = await freezingProxy(new URL(database.url));
    const url = new URL(database.url);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const orm = await openOrm(url.toString(), 2);
    const logs = new LogSink();
    const metrics = new Metrics(orm);
    metrics.collectProcessMetrics();
    const m = await startMetricsServer('127.0.0.1:0', metrics, createLogger('info', logs));
    try {
      metrics.sent.inc();
      let text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      assert.equal(sample(text, 'mailgate_database_up'), 1);
      assert.equal(sample(text, 'mailgate_queue_oldest_due_seconds'), 0);
      proxy.down();
      // Past the 5 s the database read is cached for.
      await new Promise((r) => setTimeout(r, 5_100));
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`http://127.0.0.1:${m.port}/metrics`);
        assert.equal(res.status, 200);
        text = await res.text();
        assert.equal(sample(text, 'mailgate_database_up'), 0);
        assert.equal(sample(text, 'mailgate_messages_sent_total'), 1, 'the process counters are served');
        assert.match(text, /^process_cpu_user_seconds_total /m);
        for (const gauge of ['mailgate_queue_oldest_due_seconds', 'mailgate_imap_oldest_sync_age_seconds', 'mailgate_webhook_deliveries_pending']) assert.equal(sample(text, gauge), undefined, `${gauge} left out`);
      }
      // Logged once, not at every scrape.
      assert.equal(logs.text.split('the database cannot be read').length - 1, 1);
      proxy.up();
      await new Promise((r) => setTimeout(r, 5_100));
      text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      assert.equal(sample(text, 'mailgate_database_up'), 1);
      assert.equal(sample(text, 'mailgate_queue_oldest_due_seconds'), 0);
    } finally {
      await new Promise<void>((resolve) => (m.server.closeAllConnections(), m.server.close(() => resolve())));
      await orm.close(true);
      await proxy.close();
      await database.drop();
    }
  });
});
