import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, startTestApp, seedWorkspace, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';

/** SMTP connections per sender account of each worker. */
const CONNECTIONS = 3;

/** `mailgate serve --role worker` as a real process. */
function startWorker(env: NodeJS.ProcessEnv): { proc: ChildProcess; output: () => string } {
  const proc = spawn('node', ['bin/mailgate.js', 'serve', '--role', 'worker'], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'warn', MAILGATE_SEND_LEASE: '2s', MAILGATE_SMTP_MAX_CONNECTIONS: String(CONNECTIONS), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c) => (out += c));
  proc.stderr!.on('data', (c) => (out += c));
  return { proc, output: () => out };
}

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function stop(proc: ChildProcess, signal: NodeJS.Signals = 'SIGTERM') {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill(signal);
  });
}

describe('sending across worker processes', function () {
  this.timeout(120_000);
  const sink = new SmtpSink();
  const secret = randomBytes(32);
  let app: TestApp;
  let env: NodeJS.ProcessEnv;
  const workers: ChildProcess[] = [];

  before(async () => {
    await sink.start();
    const db = await createTestDatabase();
    app = await startTestApp({ database: db, secretKey: secret });
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: secret.toString('hex') };
  });
  after(async () => {
    for (const w of workers) await stop(w, 'SIGKILL');
    await app.close();
    await sink.stop();
  });
  beforeEach(() => {
    sink.received.length = 0;
    sink.delayMs = 0;
  });

  async function campaign(leadCount: number, capacity: number, prefix: string) {
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const s = app.services();
    sink.users.set(`${prefix}@acme.example`, 'pw');
    const sender = await s.senders.add({ workspaceId: workspace.id, email: `${prefix}@acme.example`, name: 'S', smtpUrl: sink.url(`${prefix}@acme.example`, 'pw') });
    const pool = await s.senders.createPool(workspace.id, 'p', capacity, [sender.id]);
    const c = await app.request('POST', '/v1/campaigns', { key, body: { name: 'c', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Hi {{firstName}}', bodyHtml: '<p>Hi</p>' }] } });
    const leads = Array.from({ length: leadCount }, (_, i) => ({ email: `${prefix}${i}@lead.example`, firstName: `L${i}` }));
    await app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key, body: { leads } });
    await app.request('POST', `/v1/campaigns/${c.body.id}/start`, { key });
    return { key, campaignId: c.body.id as string };
  }

  it('two workers send every message exactly once and never exceed the pool capacity', async () => {
    const { key, campaignId } = await campaign(300, 200, 'two');
    const a = startWorker(env);
    const b = startWorker(env);
    workers.push(a.proc, b.proc);
    await waitFor('200 messages', () => sink.received.length >= 200);
    // Give both workers time to (wrongly) send more.
    await new Promise((r) => setTimeout(r, 3000));
    await stop(a.proc);
    await stop(b.proc);
    assert.equal(sink.received.length, 200, `${a.output()}\n${b.output()}`);
    assert.equal(new Set(sink.received.map((r) => r.to[0])).size, 200);
    const stats = (await app.request('GET', `/v1/campaigns/${campaignId}/stats`, { key })).body;
    assert.equal(stats.sent, 200);
    assert.equal(stats.queued, 100);
    const pools = (await app.request('GET', '/v1/sender-pools', { key })).body;
    assert.equal(pools[0].remainingVolume, 0);
  });

  it('a worker killed with SIGKILL mid-batch loses nothing; only in-flight messages may repeat', async () => {
    sink.delayMs = 40;
    const { key, campaignId } = await campaign(120, 100_000, 'kill');
    const first = startWorker(env);
    workers.push(first.proc);
    await waitFor('the first messages', () => sink.received.length >= 20);
    await stop(first.proc, 'SIGKILL');
    const atKill = sink.received.length;
    assert.ok(atKill < 120, 'killed mid-campaign');
    const second = startWorker(env);
    workers.push(second.proc);
    const everyone = () => new Set(sink.received.map((r) => r.to[0])).size === 120;
    await waitFor('every lead to get its message', everyone);
    await waitFor('the counters to settle', async () => (await app.request('GET', `/v1/campaigns/${campaignId}/stats`, { key })).body.sent === 120);
    await stop(second.proc);
    // What a SIGKILL can repeat: the messages the server accepted whose outcome was not yet
    // committed. The dispatcher lets a message end its data only while fewer than CONNECTIONS of
    // its account are in that state (one sender account here, one worker killed), however slow
    // the outcome writes are on a loaded machine; so at most CONNECTIONS, whatever the timing.
    const duplicates = sink.received.length - 120;
    assert.ok(duplicates >= 0 && duplicates <= CONNECTIONS, `at most the ${CONNECTIONS} in-flight messages repeat, got ${duplicates}`);
    const stats = (await app.request('GET', `/v1/campaigns/${campaignId}/stats`, { key })).body;
    assert.equal(stats.sent, 120);
    assert.equal(stats.queued, 0);
  });
});
