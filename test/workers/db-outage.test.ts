import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createTestDatabase, startTestApp, seedWorkspace, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { freezingProxy } from '../support/freezing-proxy.ts';
import { startWorkerProcess, type WorkerProcess } from '../support/worker-process.ts';
import { waitFor } from '../support/wait.ts';

// A worker process whose PostgreSQL goes away under its sends (found on call, 2026-11-30):
// every connection of the worker goes through a proxy the test takes down (connections cut,
// new ones cut at once) and brings back; the SMTP server is a real sink whose acceptance the
// test holds. The test's own connection and the API's are direct.
describe('a worker process sending while its database is unreachable', function () {
  this.timeout(180_000);
  const secret = randomBytes(32);
  const sink = new SmtpSink();
  let app: TestApp;
  let db: pg.Client;
  let proxy: Awaited<ReturnType<typeof freezingProxy>>;
  let proxiedUrl: string;
  let dataDir: string;
  const workers: WorkerProcess[] = [];

  before(async () => {
    await sink.start();
    app = await startTestApp({ database: await createTestDatabase(), secretKey: secret });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    proxy = await freezingProxy(new URL(app.databaseUrl));
    const url = new URL(app.databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    proxiedUrl = url.toString();
  });
  beforeEach(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-outage-'));
    sink.received.length = 0;
    sink.hold = undefined;
    proxy.up();
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) await w.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  after(async () => {
    await proxy?.close();
    await db?.end();
    await app?.close();
    await sink.stop();
  });

  async function worker(env: NodeJS.ProcessEnv = {}): Promise<WorkerProcess> {
    const w = await startWorkerProcess({
      DATABASE_URL: proxiedUrl,
      MAILGATE_SECRET_KEY: secret.toString('hex'),
      MAILGATE_DATA_DIR: dataDir,
      MAILGATE_WORKER_HEARTBEAT: '1s',
      MAILGATE_WORKER_DEAD_AFTER: '3s',
      ...env,
    });
    workers.push(w);
    return w;
  }
  /** Resolves once the process has exited and its output is all read. */
  const closed = (w: WorkerProcess) => new Promise<void>((resolve) => w.proc.once('close', () => resolve()));

  /** A campaign of one lead through one sender account of the sink, not started. */
  async function campaign(prefix: string) {
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const s = app.services();
    const email = `${prefix}@acme.example`;
    sink.users.set(email, 'pw');
    const sender = await s.senders.add({ workspaceId: workspace.id, email, name: 'S', smtpUrl: sink.url(email, 'pw') });
    const pool = await s.senders.createPool(workspace.id, 'p', 1_000, [sender.id]);
    const c = await app.request('POST', '/v1/campaigns', { key, body: { name: 'c', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } });
    const lead = `${prefix}.lead@lead.example`;
    assert.equal((await app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key, body: { leads: [{ email: lead }] } })).status, 200);
    const message = async () =>
      (await db.query<{ id: string; state: string; attempts: number; claimed_by: string | null }>(`select id, state, attempts, claimed_by from outbound_messages where campaign_id = $1`, [c.body.id])).rows[0];
    return { key, lead, campaignId: c.body.id as string, start: () => app.request('POST', `/v1/campaigns/${c.body.id}/start`, { key }), message };
  }

  /**
   * Starts the campaign and lets the sink accept its message only once the worker's database
   * connections are cut: the worker knows the server has it and cannot record it.
   */
  async function acceptedDuringOutage(w: WorkerProcess, c: Awaited<ReturnType<typeof campaign>>) {
    let accept!: () => void;
    sink.hold = new Promise<void>((r) => (accept = r));
    assert.equal((await c.start()).status, 200);
    await waitFor('the message data ended at the sink', async () => sink.dataEnded.some((to) => to.includes(c.lead)), 30_000);
    proxy.down();
    accept();
    await waitFor('the worker unable to record the accepted message', async () => w.output().includes('the server accepted a message but the database cannot be reached to record it'), 30_000);
    assert.equal(sink.received.filter((r) => r.to.includes(c.lead)).length, 1);
  }

  it('SIGTERM while an accepted message cannot be recorded: its write is retried until the shutdown deadline, and the database back within it records it', async () => {
    const c = await campaign('grace');
    const w = await worker({ MAILGATE_SHUTDOWN_TIMEOUT: '60s' });
    await acceptedDuringOutage(w, c);
    const gone = closed(w);
    w.proc.kill('SIGTERM');
    // Until 2026-11-30 a stopping worker gave the write up at its next failure; the message
    // stayed `sending` and went out again once another worker took it over.
    await waitFor('the stopping worker retrying the write', async () => w.output().includes('stopping with accepted messages whose outcome the database cannot take yet'), 30_000);
    proxy.up();
    await gone;
    assert.match(w.output(), /the outcome of an accepted message was written once the database was back/);
    assert.doesNotMatch(w.output(), /could not be written before the shutdown deadline/);
    const m = await c.message();
    assert.equal(m.state, 'sent');
    assert.equal((await app.request('GET', `/v1/campaigns/${c.campaignId}/stats`, { key: c.key })).body.sent, 1);
    assert.equal(existsSync(path.join(dataDir, 'unrecorded-sends.jsonl')), false);
  });

  it('SIGTERM with the database down past the deadline: the message is logged and journaled, and the next worker records it sent instead of sending it again', async () => {
    const c = await campaign('journal');
    const first = await worker({ MAILGATE_SHUTDOWN_TIMEOUT: '2s' });
    const firstId = (await db.query<{ id: string }>(`select id from workers where pid = $1`, [first.pid])).rows[0].id;
    await acceptedDuringOutage(first, c);
    const { id } = await c.message();
    const gone = closed(first);
    first.proc.kill('SIGTERM');
    await gone;
    // The database is back; the stopped worker could not deregister, so the next one takes its
    // claims over once it has beaten for MAILGATE_WORKER_DEAD_AFTER. Until 2026-11-30 that sent
    // the lead a second copy.
    proxy.up();
    const next = await worker();
    await waitFor('the stopped worker taken over and the message recorded', async () => {
      const registered = (await db.query(`select 1 from workers where id = $1`, [firstId])).rows.length;
      return registered === 0 && (await c.message()).state === 'sent';
    }, 60_000);
    assert.equal(sink.received.filter((r) => r.to.includes(c.lead)).length, 1, 'one copy');
    assert.equal((await app.request('GET', `/v1/campaigns/${c.campaignId}/stats`, { key: c.key })).body.sent, 1);
    assert.match(next.output(), /is recorded sent \(from the unrecorded sends journal\)/);
    assert.equal(existsSync(path.join(dataDir, 'unrecorded-sends.jsonl')), false, 'the journal replayed and removed');
    // The stopped worker said which message it could not record, and where it put it.
    const line = first
      .output()
      .split('\n')
      .find((l) => l.includes('could not be written before the shutdown deadline'));
    assert.ok(line, first.output().slice(-3000));
    const logged = JSON.parse(line) as { level: number; messageId: string; journal: string | null };
    assert.deepEqual([logged.level, logged.messageId, logged.journal], [50, id, path.join(dataDir, 'unrecorded-sends.jsonl')]);
  });

  it('a message whose guard could not be answered during the outage is given back to the queue once the database is back, not after its lease, and sent once', async () => {
    const c = await campaign('guard');
    assert.equal((await c.start()).status, 200);
    // The guard reads the suppression list; held under a lock here, it waits (the claim and the
    // load do not read it), and the outage then cuts it.
    const lock = new pg.Client({ connectionString: app.databaseUrl });
    await lock.connect();
    try {
      await lock.query('begin');
      await lock.query('lock table suppressions in access exclusive mode');
      const lockPid = (await lock.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      const w = await worker();
      await waitFor('the guard waiting while the message crosses the wire', async () => {
        // The outcome writer's statement, which answers the guards (messages/transitions.ts
        // ACCEPTED_SQL; pg_stat_activity keeps its first kilobyte).
        const blocked = (await db.query(`select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid)) and query like '%as t(id, sent, response, mid,%'`, [lockPid])).rows.length;
        return blocked > 0 && sink.dataBegun.some((to) => to.includes(c.lead));
      }, 30_000);
      const downAt = new Date();
      const acceptedAtDown = proxy.accepted;
      proxy.down();
      await waitFor('the message given up for now', async () => w.output().includes('messages that did not go out cannot be given back to the queue'), 30_000).catch((err: Error) => {
        // Failed twice in CI (2026-11-30) with the worker's output ending 5 s after the outage:
        // what each side did, with the times, to tell a stalled process from a lost log line.
        // Without the lines every outage repeats each second (heartbeat, LISTEN, leases).
        const said = w
          .output()
          .split('\n')
          .filter((l) => !/"msg":"(worker heartbeat failed|listening for [a-z ]+ notifications failed; retrying|mailbox lease round failed)"/.test(l))
          .map((l) => l.replace(/"stack":"(?:[^"\\]|\\.)*"/g, '"stack":"..."'))
          .join('\n');
        throw new Error(
          `${err.message} (down at ${downAt.toISOString()}, given up at ${new Date().toISOString()}; the proxy took ${proxy.accepted - acceptedAtDown} connections since; the worker ${w.proc.exitCode ?? w.proc.signalCode ?? 'running'}); the worker said:\n${said.slice(-8000)}`,
        );
      });
      await lock.query('rollback');
      proxy.up();
      // The lease is 10 minutes (MAILGATE_SEND_LEASE): until 2026-11-30 the message waited for it.
      await waitFor('the message sent', async () => (await c.message()).state === 'sent', 60_000);
      assert.match(w.output(), /messages that did not go out during the database outage are back in the queue/);
    } finally {
      await lock.end().catch(() => {});
    }
    const m = await c.message();
    assert.equal(m.attempts, 0, 'no attempt counted');
    assert.equal(sink.received.filter((r) => r.to.includes(c.lead)).length, 1, 'one copy');
  });
});
