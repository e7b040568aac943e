import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createTestDatabase, startTestApp, type TestApp } from '../support/harness.ts';
import { startWorkerProcess, type WorkerProcess } from '../support/worker-process.ts';
import { waitFor } from '../support/wait.ts';

// A live worker survives its database sessions being ended (what a PostgreSQL restart does to
// them; found by a review, 2026-11-29): the job runner's pool had no 'error' listener, so an
// idle connection the server ended was an unhandled 'error' event, and the process exited.
describe('a worker process whose database sessions are terminated', function () {
  this.timeout(120_000);
  let app: TestApp;
  let db: pg.Client;
  let w: WorkerProcess | undefined;
  const secret = randomBytes(32);
  before(async () => {
    app = await startTestApp({ database: await createTestDatabase(), secretKey: secret });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await w?.kill('SIGKILL');
    await db?.end();
    await app?.close();
  });

  it('keeps running: its heartbeat and its jobs resume on new sessions', async () => {
    w = await startWorkerProcess({ DATABASE_URL: app.databaseUrl, MAILGATE_SECRET_KEY: secret.toString('hex'), MAILGATE_WORKER_HEARTBEAT: '1s', MAILGATE_WORKER_DEAD_AFTER: '3s' });
    const proc = w.proc;
    const exited = () => (proc.exitCode !== null ? `the worker exited (code ${proc.exitCode}):\n${w!.output().split('\n').filter((l) => !l.startsWith('{')).slice(0, 40).join('\n')}` : null);
    // The job runner's sessions are open (its jobs ran) and the heartbeat's too.
    await waitFor('the worker running its jobs', async () => Number((await db.query(`select count(*) as n from agenda_jobs where last_run_at is not null`)).rows[0].n) > 0);
    const { rows } = await db.query<{ n: number; at: Date }>(
      `select count(pg_terminate_backend(a.pid))::int as n, now() as at from pg_stat_activity a
        where a.datname = current_database() and a.pid <> pg_backend_pid()
          and (a.query ilike '%agenda%' or a.application_name = 'mailgate worker heartbeat')`,
    );
    assert.ok(rows[0].n >= 2, `the job runner's and the heartbeat's sessions terminated (${rows[0].n})`);
    const terminatedAt = rows[0].at;
    await waitFor('a heartbeat and a job round after the terminations', async () => {
      const dead = exited();
      if (dead) throw new Error(dead);
      const beat = await db.query(`select 1 from workers where pid = $1 and heartbeat_at > $2`, [w!.pid, terminatedAt]);
      const ran = await db.query(`select 1 from agenda_jobs where last_run_at > $1`, [terminatedAt]);
      return beat.rows.length > 0 && ran.rows.length > 0;
    }, 30_000);
    assert.equal(exited(), null);
  });
});
