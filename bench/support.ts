// Shared set-up for benchmarks: an embedded PostgreSQL in a temp dir (or BENCH_DATABASE_URL,
// an admin URL), a migrated database, and the real app listening on an ephemeral port.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { EmbeddedDatabase } from '../src/db/embedded.ts';
import { openOrm, migrate } from '../src/db/orm.ts';
import { loadConfig } from '../src/config/index.ts';
import { createLogger } from '../src/adapters/logger.ts';
import { Crypto } from '../src/adapters/crypto.ts';
import { systemClock } from '../src/adapters/clock.ts';
import { realMailProbe } from '../src/adapters/mailprobe.ts';
import { Metrics } from '../src/adapters/metrics.ts';
import { buildApp } from '../src/app.ts';
import { createHttpServer } from '../src/http/server.ts';
import { createServices } from '../src/services.ts';
import { createDeps, type Deps } from '../src/deps.ts';

/**
 * A `serve --role worker` process of the built daemon on the benchmark's database, its output on
 * this process's. `env` adds to or overrides its environment. BENCH_WORKER_NODE_ARGS: extra
 * node flags for it (e.g. --cpu-prof --cpu-prof-dir=/tmp/prof), for profiling.
 */
export function spawnWorker(db: { url: string; secretKey: Buffer }, env: Record<string, string>): ChildProcess {
  const nodeArgs = (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  return spawn('node', [...nodeArgs, 'bin/mailgate.js', 'serve', '--role', 'worker'], {
    env: { ...process.env, DATABASE_URL: db.url, MAILGATE_SECRET_KEY: db.secretKey.toString('hex'), PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

export async function benchEnvironment() {
  let embedded: EmbeddedDatabase | undefined;
  let adminUrl = process.env.BENCH_DATABASE_URL;
  // BENCH_PG_STATEMENTS=1: the embedded cluster loads pg_stat_statements (a restart after
  // ALTER SYSTEM), so a benchmark can count statements per message (statementStats below).
  const withStatements = !adminUrl && process.env.BENCH_PG_STATEMENTS === '1';
  let dataDir: string | undefined;
  if (!adminUrl) {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-bench-'));
    embedded = new EmbeddedDatabase({ dataDir, ephemeral: !withStatements });
    await embedded.start();
    adminUrl = embedded.adminUrl('postgres');
    if (withStatements) {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`alter system set shared_preload_libraries = 'pg_stat_statements'`);
      await c.query(`alter system set pg_stat_statements.track = 'all'`);
      await c.query(`alter system set pg_stat_statements.track_planning = on`);
      await c.end();
      await embedded.stop();
      await embedded.start();
      adminUrl = embedded.adminUrl('postgres');
    }
  }
  const name = `mailgate_bench_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const orm = await openOrm(url, 10);
  await migrate(orm, url);
  const config = loadConfig({}, { databaseUrl: url, port: 0, logLevel: 'warn' });
  const secretKey = randomBytes(32);
  const deps: Deps = createDeps({ orm, config, clock: systemClock, crypto: new Crypto(secretKey), log: createLogger('warn', process.stderr), mailProbe: realMailProbe, metrics: new Metrics(orm) });
  // The daemon's HTTP server (src/http/server.ts), with its keep-alive timeout.
  const server = createHttpServer(buildApp(deps).callback(), { keepAliveTimeoutMs: config.httpKeepAliveTimeout });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const services = () => createServices(deps, orm.em.fork());
  if (withStatements) await pool.query('create extension if not exists pg_stat_statements');
  const ws = await services().workspaces.create('bench');
  const key = (await services().workspaces.createKey({ workspace: ws.id })).key;
  return {
    url,
    secretKey,
    base,
    key,
    workspaceId: ws.id,
    pool,
    deps,
    services,
    async api(method: string, p: string, body?: unknown) {
      const res = await fetch(base + p, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const json = await res.json();
      if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    /** pg_stat_statements of this database (BENCH_PG_STATEMENTS=1), or null: reset, or read the totals. */
    async statementStats(reset = false): Promise<null | { calls: number; execMs: number; planMs: number; top: Array<{ calls: number; ms: number; plan_ms: number; plans: number; jit_fns: number; jit_ms: number; query: string }> }> {
      if (!withStatements) return null;
      if (reset) {
        await pool.query('select pg_stat_statements_reset()');
        return null;
      }
      const { rows } = await pool.query(
        `select calls::int, total_exec_time as ms, total_plan_time as plan_ms, plans::int, jit_functions::int as jit_fns,
                jit_generation_time + jit_inlining_time + jit_optimization_time + jit_emission_time as jit_ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) as query
           from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database()) order by total_exec_time desc`,
      );
      return {
        calls: rows.reduce((n, r) => n + r.calls, 0),
        execMs: rows.reduce((n, r) => n + r.ms, 0),
        planMs: rows.reduce((n, r) => n + r.plan_ms, 0),
        top: rows.slice(0, 12),
      };
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await pool.end();
      await orm.close(true);
      await embedded?.stop();
      if (withStatements && dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * One timed run of a bare loop in a child process of its own (the ratio's baseline of bench:send
 * and bench:webhooks since session 41). The child says it is ready, runs its loop on `warm` and
 * on `go`, answering each with its wall time, and exits on `exit`. With `warm` set it runs once
 * untimed first, then `settle` runs; `before` reads what is to be measured just before `go`,
 * `after` reads it again once the child has answered. Returns what `after` returns, with the
 * child's time of the timed run.
 */
export async function childRun<S, R>(
  child: ChildProcess,
  run: { warm: boolean; settle: () => Promise<unknown>; before: () => S; after: (s: S) => Promise<R> },
): Promise<R & { ms: number }> {
  // A child that dies (its loop failed) fails the benchmark instead of leaving it waiting.
  const answer = <T>() =>
    new Promise<T>((resolve, reject) => {
      const died = (code: number | null) => reject(new Error(`the bare loop's process exited (${code}) before it answered`));
      child.once('exit', died);
      child.once('message', (m) => {
        child.off('exit', died);
        resolve(m as T);
      });
    });
  await answer();
  if (run.warm) {
    child.send({ cmd: 'warm' });
    await answer();
    await run.settle();
  }
  const s = run.before();
  child.send({ cmd: 'go' });
  const { ms } = await answer<{ ms: number }>();
  const out = await run.after(s);
  child.send({ cmd: 'exit' });
  await new Promise((r) => child.once('exit', r));
  return { ...out, ms };
}

/** CPU seconds used by a process (and its reaped children), from /proc (clock ticks of 10 ms). */
export function cpuOf(pid: number, withChildren = false): number {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]) + (withChildren ? Number(f[13]) + Number(f[14]) : 0);
    return ticks / 100;
  } catch {
    return 0;
  }
}
export { percentile, median } from './results.ts';

export const ms = (n: number) => `${n.toFixed(1)} ms`;

/**
 * Scheduler figures of a process's threads, from /proc (Linux schedstat, nanoseconds): `run`
 * on a CPU and `wait` runnable on a run queue but not running (waiting for a core), for its
 * main thread (tid = pid) and for its other threads together (V8's GC helpers, libuv's pool).
 * Null where the kernel has no schedstat. On these 2-core machines `wait` is how long a
 * process's work was held up by the other processes of the benchmark, not by its own CPU.
 */
export interface ThreadTimes {
  mainRun: number;
  mainWait: number;
  othersRun: number;
  othersWait: number;
}

export function threadTimes(pid: number): ThreadTimes | null {
  const out: ThreadTimes = { mainRun: 0, mainWait: 0, othersRun: 0, othersWait: 0 };
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  for (const tid of tids) {
    let fields: string[];
    try {
      fields = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ');
    } catch {
      // a thread that ended meanwhile; no schedstat at all is told by the main thread below
      if (Number(tid) === pid) return null;
      continue;
    }
    const run = Number(fields[0]);
    const wait = Number(fields[1]);
    if (Number(tid) === pid) {
      out.mainRun += run;
      out.mainWait += wait;
    } else {
      out.othersRun += run;
      out.othersWait += wait;
    }
  }
  return out;
}

/** What `threadTimes` counted between two readings, in microseconds per item. */
export function threadTimesPer(a: ThreadTimes | null, b: ThreadTimes | null, items: number): ThreadTimes | null {
  if (!a || !b) return null;
  const per = (x: number, y: number) => (y - x) / 1000 / items;
  return { mainRun: per(a.mainRun, b.mainRun), mainWait: per(a.mainWait, b.mainWait), othersRun: per(a.othersRun, b.othersRun), othersWait: per(a.othersWait, b.othersWait) };
}

/** "main thread ran R us and waited W us for a core, other threads ran O us" per item. */
export function describeThreadTimes(label: string, t: ThreadTimes | null): string {
  if (!t) return `${label} n/a`;
  return `${label} main thread ran ${t.mainRun.toFixed(0)} us and waited ${t.mainWait.toFixed(0)} us for a core, its other threads ran ${t.othersRun.toFixed(0)} us`;
}
