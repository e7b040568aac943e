import assert from 'node:assert/strict';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createTestDatabase } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);

interface Daemon {
  proc: ChildProcess;
  port: number;
  output(): string;
  /** stdout alone: the JSON log stream. */
  stdout(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `mailgate serve` as a real process and waits until it listens. */
async function startDaemon(env: NodeJS.ProcessEnv, args: string[] = []): Promise<Daemon> {
  const proc = spawn('node', ['bin/mailgate.js', 'serve', ...args], { env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let stdout = '';
  proc.stdout!.on('data', (c) => ((out += c), (stdout += c)));
  proc.stderr!.on('data', (c) => (out += c));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon did not start:\n${out}`)), 60_000);
    const check = () => {
      const m = /"port":(\d+)[^\n]*"msg":"mailgate is up"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    proc.stdout!.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited with ${code}:\n${out}`));
    });
  });
  return {
    proc,
    port,
    output: () => out,
    stdout: () => stdout,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        proc.removeAllListeners('exit');
        proc.once('exit', (code) => resolve(code));
        proc.kill(signal);
      }),
  };
}

async function get(port: number, p: string, key?: string) {
  const res = await fetch(`http://127.0.0.1:${port}${p}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, headers: res.headers, body: await res.json().catch(() => undefined) };
}

/**
 * The first-start admin key. Without a terminal (as here) it goes to `dataDir/admin-api-key`
 * (mode 0600), announced by a log line naming the file, never into the log stream itself.
 */
function printedKey(out: string, dataDir: string): string | undefined {
  const announced = out.split('\n').find((l) => l.includes('its admin API key'));
  if (!announced) return undefined;
  const file = path.join(dataDir, 'admin-api-key');
  assert.equal(JSON.parse(announced).file, file);
  assert.equal(statSync(file).mode & 0o777, 0o600);
  return /^(mgk_\S+)\n$/.exec(readFileSync(file, 'utf8'))?.[1];
}

/** stdout is the log stream: one JSON object per line, nothing else. */
function assertJsonLines(out: string) {
  for (const l of out.split('\n').filter(Boolean)) assert.doesNotThrow(() => JSON.parse(l), `not a JSON log line: ${l}`);
}

describe('mailgate serve (a real process)', function () {
  this.timeout(120_000);

  it('first start writes the admin key once, to a 0600 file (the log stream stays JSON); the API answers with it; SIGTERM stops cleanly', async () => {
    const db = await createTestDatabase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-daemon-'));
    const env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex'), MAILGATE_DATA_DIR: dataDir };
    try {
      const d1 = await startDaemon(env);
      const key = printedKey(d1.output(), dataDir);
      assert.ok(key, d1.output());
      const res = await get(d1.port, '/v1/sender-accounts', key);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, []);
      // MAILGATE_HTTP_KEEPALIVE_TIMEOUT's default (65 s, past a proxy's 60 s), and SIGTERM with
      // that connection kept still stops at once.
      assert.equal(res.headers.get('keep-alive'), 'timeout=65');
      assert.equal(await d1.stop(), 0);
      assert.match(d1.output(), /"msg":"stopped"/);
      // The key is in no output at all, and the log stream stays one JSON object per line.
      assert.ok(!d1.output().includes(key!));
      assertJsonLines(d1.stdout());

      // The file not deleted yet: a later start writes no second key, and reminds (at warn)
      // that the file still holds the admin key (it started silently; a review, 2026-11-29).
      const d2 = await startDaemon(env);
      assert.equal(printedKey(d2.output(), dataDir), undefined);
      assert.equal(readFileSync(path.join(dataDir, 'admin-api-key'), 'utf8'), `${key}\n`, 'no second key');
      const reminder = d2.stdout().split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((l) => l.file === path.join(dataDir, 'admin-api-key'));
      assert.ok(reminder, d2.output());
      assert.equal(reminder.level, 40);
      assert.match(reminder.msg, /still holds the first start's admin API key: store it and delete the file/);
      assert.ok(!d2.output().includes(key!));
      assert.equal(await d2.stop('SIGINT'), 0);

      rmSync(path.join(dataDir, 'admin-api-key'));
      const d3 = await startDaemon(env);
      assert.equal(printedKey(d3.output(), dataDir), undefined);
      assert.ok(!existsSync(path.join(dataDir, 'admin-api-key')), 'no second key');
      assert.ok(!d3.output().includes('still holds'), d3.output());
      assert.equal((await get(d3.port, '/v1/sender-pools', key)).status, 200);
      assert.equal(await d3.stop('SIGINT'), 0);
    } finally {
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('roles: api answers the API; worker only health and readiness', async () => {
    const db = await createTestDatabase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-daemon-'));
    const env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex'), MAILGATE_DATA_DIR: dataDir };
    try {
      const api = await startDaemon(env, ['--role', 'api']);
      const key = printedKey(api.output(), dataDir);
      assert.equal((await get(api.port, '/v1/sender-accounts', key)).status, 200);
      const worker = await startDaemon(env, ['--role', 'worker']);
      assert.equal((await get(worker.port, '/healthz')).status, 200);
      assert.equal((await get(worker.port, '/readyz')).status, 200);
      const w = await get(worker.port, '/v1/sender-accounts', key);
      assert.equal(w.status, 404);
      assert.equal(w.body.error.code, 'not_found');
      // The worker hears the webhook changes the API process commits (one connection, LISTEN
      // on the channel), and closes that connection when it stops.
      const listening = async () => {
        const c = new pg.Client({ connectionString: db.url });
        await c.connect();
        try {
          return (await c.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and query = 'listen mailgate_webhooks'`)).rows[0].n;
        } finally {
          await c.end();
        }
      };
      assert.equal(await listening(), 1);
      assert.equal(await worker.stop(), 0);
      // Its backend ends a moment after the process: waited for, not read once.
      await waitFor('the worker\'s listening connection to end', async () => (await listening()) === 0);
      assert.equal(await api.stop(), 0);
    } finally {
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('embedded PostgreSQL when DATABASE_URL is unset: shared with the CLI, stopped on shutdown', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-embedded-'));
    const env = { DATABASE_URL: '', MAILGATE_DATA_DIR: dataDir };
    try {
      const d = await startDaemon(env);
      const key = printedKey(d.output(), dataDir);
      assert.ok(key);
      assert.equal((await get(d.port, '/v1/sender-accounts', key)).status, 200);
      assert.ok(existsSync(path.join(dataDir, 'pg', 'postmaster.pid')));
      assert.ok(existsSync(path.join(dataDir, 'secret.key')));
      // The CLI finds the daemon's running cluster.
      const { stdout } = await run('node', ['bin/mailgate.js', 'sender', 'add', '--workspace', 'default', '--email', 'a@send.example', '--name', 'A', '--smtp', 'smtp://u:p@127.0.0.1:2525', '--json'], {
        env: { ...process.env, ...env },
      });
      assert.equal(JSON.parse(stdout).email, 'a@send.example');
      const listed = await get(d.port, '/v1/sender-accounts', key);
      assert.equal(listed.body.length, 1);
      assert.equal(await d.stop(), 0);
      assert.ok(!existsSync(path.join(dataDir, 'pg', 'postmaster.pid')), 'embedded PostgreSQL stopped');
      // With no daemon running the CLI starts (and stops) the cluster itself.
      const again = await run('node', ['bin/mailgate.js', 'sender', 'pause', JSON.parse(stdout).id, '--json'], { env: { ...process.env, ...env } });
      assert.equal(JSON.parse(again.stdout).status, 'paused');
      assert.ok(!existsSync(path.join(dataDir, 'pg', 'postmaster.pid')));
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
