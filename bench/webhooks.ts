// Webhook delivery benchmark (issue 6). Run: npm run bench:webhooks
// A local HTTPS receiver in its own process (certificates made with openssl at run time, as the
// tests do) receives:
//  - bare: 10,000 signed POSTs from a loop with CONCURRENCY requests in flight over a keep-alive
//    agent: no database, the floor of what delivery can cost. The ratio's baseline (since
//    session 41) runs it in a new process for each run, as the worker is one, before mailgate and
//    again after it, using the mean of the two; it also runs in this process before and after
//    (slower there, its process holding the app and this script's data: the baseline until
//    session 41);
//  - mailgate: 10,000 events committed to the outbox (20 transactions of 500), delivered by a
//    real `serve --role worker` process (Agenda job, fan-out, claims, leases, signed POSTs,
//    recorded attempts) trusting the receiver's CA through NODE_EXTRA_CA_CERTS;
//  - paced: 2,000 events committed at 200/s, to show the commit-to-receipt lag at steady load;
//  - floor: 10,000 more events committed the same way, delivered by a loop in a new process (as
//    the worker is one; until session 42 it ran in this process) that does the least database
//    work any design recording each event's fan-out and each delivery's outcome must do
//    (floorLoop): it bounds the ratio mailgate can reach in this bench.
// For reference it also runs the bare loop over undici (the daemon's HTTP client), which costs
// less per request than node:https; the ratio is against the node:https loop.
// Prints deliveries per second for each, the ratio (target >= 0.7, issue 20), p50/p95 lag from each
// event's commit to its receipt, the CPU per delivery of every process on each side, and how
// long each side's main thread ran and waited for a core (bench/support.ts threadTimes).
import https from 'node:https';
import { fork } from 'node:child_process';
import pg from 'pg';
import type { Pool as UndiciPool } from 'undici';
import { deliveryHeaders, envelope } from '../src/modules/webhooks/payload.ts';
import { readFileSync, readdirSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const COUNT = Number(process.env.BENCH_COUNT ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16); // the WebhookDispatcher default
const PACED = Number(process.env.BENCH_PACED ?? 2_000);
const PACED_RATE = 200;
/**
 * BENCH_WARM=1: both sides run once untimed first (the bare loop one more time before its first
 * timed run; the worker a backlog of as many events), so both are timed with their code
 * compiled. By default neither is: the worker is timed from its first delivery.
 */
const WARM = process.env.BENCH_WARM === '1';

if (process.env.BENCH_WEBHOOK_RECEIVER) {
  // --- the receiver process: records each event id's receipt time, answers 200.
  const dir = process.env.BENCH_CERT_DIR!;
  const times = new Map<string, number>();
  const server = https.createServer({ key: readFileSync(`${dir}/server.key`), cert: readFileSync(`${dir}/server.crt`) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = JSON.parse(Buffer.concat(chunks).toString('utf8')).id as string;
      if (!times.has(id)) times.set(id, Date.now());
      res.writeHead(200).end();
    });
  });
  // TLS connections opened since the last reset: a client that keeps its connections alive opens
  // one per request in flight, not one per request.
  let connections = 0;
  server.on('secureConnection', () => connections++);
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as { port: number }).port }));
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'count') process.send!({ count: times.size, connections });
    if (m.cmd === 'times') process.send!({ times: [...times] });
    if (m.cmd === 'reset') {
      times.clear();
      connections = 0;
      process.send!({ count: 0 });
    }
    if (m.cmd === 'exit') process.exit(0);
  });
} else if (process.env.BENCH_WEBHOOK_BARE) {
  await bareProcess();
} else if (process.env.BENCH_WEBHOOK_FLOOR) {
  await floorProcess();
} else {
  await main();
}

/** What a bare loop needs: where to post, whom to trust, how to sign. */
interface BareTarget {
  port: number;
  ca: string;
  secret: string;
  webhookId: string;
}

/** An event's data as the bench's events carry it (both sides send the same envelope shape). */
function dataOf(i: number) {
  return {
    campaignId: 'cmp_bench',
    leadId: `lead_${i}`,
    email: `lead${i}@bench.example`,
    sequenceStep: 0,
    messageId: `msg_${i}`,
    messageIdHeader: `<msg_${i}.x@bench.example>`,
    sentAt: new Date().toISOString(),
  };
}

/** A pool of CONCURRENCY connections to the receiver over undici, the daemon's HTTP client. */
async function undiciPool(target: BareTarget): Promise<UndiciPool> {
  const { Pool } = await import('undici');
  return new Pool(`https://127.0.0.1:${target.port}`, { connections: CONCURRENCY, connect: { ca: target.ca } });
}

/** One signed POST over undici (the undici reference loop's and the floor's); answers the status. */
async function undiciPost(target: BareTarget, pool: UndiciPool, body: Buffer, eventId: string): Promise<number> {
  const headers = deliveryHeaders({ secret: target.secret, body, eventId, at: new Date(), attempt: 1 });
  const res = await pool.request({ path: '/hook', method: 'POST', headers, body });
  await res.body.dump();
  return res.statusCode;
}

/** The bare loops' envelopes, made before their clocks start. */
async function bareBodies(webhookId: string): Promise<Buffer[]> {
  return Array.from({ length: COUNT }, (_, i) => envelope({ eventId: `evt_bare${i}`, event: 'message.sent', eventCreatedAt: new Date(), webhookId, data: dataOf(i) }));
}

/**
 * The bare loop: COUNT signed POSTs of envelopes made before the clock, CONCURRENCY in flight
 * over a keep-alive node:https agent, no database. Returns the wall time from its first
 * request to its last answer.
 */
async function bareLoop(target: BareTarget, bodies: Buffer[]): Promise<number> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca: target.ca });
  const post = (body: Buffer, i: number) =>
    new Promise<void>((resolve, reject) => {
      const headers = deliveryHeaders({ secret: target.secret, body, eventId: `evt_bare${i}`, at: new Date(), attempt: 1 });
      const req = https.request({ host: '127.0.0.1', port: target.port, path: '/hook', method: 'POST', agent, headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < COUNT) {
        const i = next++;
        await post(bodies[i], i);
      }
    }),
  );
  const ms = performance.now() - t0;
  agent.destroy();
  return ms;
}

/**
 * The bare loop in a process of its own, started for one timed run as the worker is (with
 * BENCH_WARM=1 it runs once untimed first, like the worker's untimed backlog). The parent says `go` (and `warm`), it answers with its time.
 */
async function bareProcess() {
  const target = JSON.parse(process.env.BENCH_WEBHOOK_BARE!) as BareTarget;
  const bodies = await bareBodies(target.webhookId);
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'exit') process.exit(0);
    void bareLoop(target, bodies).then((ms) => process.send!({ done: m.cmd, ms }));
  });
  process.send!({ ready: true });
}

/** What the floor's loop needs besides a bare loop's: the database, and the workspace it writes in. */
interface FloorTarget extends BareTarget {
  databaseUrl: string;
  workspaceId: string;
}

/**
 * The floor: a bare loop over undici (CONCURRENCY in flight) plus the least database work any
 * design must do that records each event's fan-out and each delivery with its outcome: per batch
 * of 64 events one statement that takes and marks them, and per 64 outcomes one insert of
 * finished deliveries into webhook_deliveries (its indexes are the API's), on a pool with
 * asynchronous commit like the dispatcher's. It is not crash-safe (an event is marked before its
 * POST) and keeps no lease or retry state: no design that is can do less. It takes the events
 * as they are committed (by the benchmark's process, exactly as for mailgate) until it has
 * posted COUNT and written their outcomes; returns its wall time from its start.
 */
async function floorLoop(target: FloorTarget): Promise<number> {
  const { newId } = await import('../src/adapters/ids.ts');
  const fpool = new pg.Pool({ connectionString: target.databaseUrl, max: 3, options: '-c synchronous_commit=off' });
  // undici, the daemon's client (cheaper per request than node:https): the floor's loop is the better of the two bare loops.
  const http = await undiciPool(target);
  await Promise.all(Array.from({ length: 3 }, () => fpool.query('select 1')));
  type Ev = { id: string; type: 'message.sent'; data: Record<string, unknown>; created_at: Date };
  const queue: Ev[] = [];
  const outcomes: Array<{ id: string; eventId: string; at: string; status: number; ms: number }> = [];
  const writes: Array<Promise<unknown>> = [];
  let taken = 0;
  let fetching = false;
  const waiting: Array<() => void> = [];
  const nudge = () => {
    for (const w of waiting.splice(0)) w();
  };
  const flush = () => {
    const batch = outcomes.splice(0);
    writes.push(
      fpool.query(
        `insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, attempt_count, attempts, created_at, updated_at)
         select t.id, $1, $2, t.event_id, 'delivered', 1, jsonb_build_array(jsonb_build_object('at', t.at, 'statusCode', t.status, 'error', null, 'durationMs', t.ms)), now(), now()
           from unnest($3::text[], $4::text[], $5::text[], $6::int[], $7::int[]) as t(id, event_id, at, status, ms)`,
        [target.workspaceId, target.webhookId, batch.map((o) => o.id), batch.map((o) => o.eventId), batch.map((o) => o.at), batch.map((o) => o.status), batch.map((o) => o.ms)],
      ),
    );
  };
  const fetchMore = async () => {
    fetching = true;
    try {
      while (taken < COUNT && queue.length < 4 * CONCURRENCY) {
        const { rows } = await fpool.query<Ev>(
          `with ev as (select id from events where fanned_out_at is null order by created_at limit 64 for update skip locked)
           update events e set fanned_out_at = now() from ev where e.id = ev.id returning e.id, e.type, e.data, e.created_at`,
        );
        taken += rows.length;
        queue.push(...rows);
        nudge();
        if (!rows.length) await new Promise((r) => setTimeout(r, 2));
      }
    } finally {
      fetching = false;
    }
  };
  const post = (e: Ev) => undiciPost(target, http, envelope({ eventId: e.id, event: e.type, eventCreatedAt: e.created_at, webhookId: target.webhookId, data: e.data }), e.id);
  const t0 = performance.now();
  void fetchMore();
  let posted = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (posted < COUNT) {
        if (!queue.length) {
          if (!fetching) void fetchMore();
          await new Promise<void>((r) => waiting.push(r));
          continue;
        }
        if (queue.length < 2 * CONCURRENCY && !fetching) void fetchMore();
        const e = queue.shift()!;
        posted++;
        const at = new Date();
        const status = await post(e);
        outcomes.push({ id: newId('dlv'), eventId: e.id, at: at.toISOString(), status, ms: Date.now() - at.getTime() });
        if (outcomes.length >= 64) flush();
        nudge();
      }
    }),
  );
  if (outcomes.length) flush();
  await Promise.all(writes);
  const ms = performance.now() - t0;
  await http.close();
  await fpool.end();
  return ms;
}

/** The floor's loop in a process of its own, for one run: the parent says `go` as it starts committing the events. */
async function floorProcess() {
  const target = JSON.parse(process.env.BENCH_WEBHOOK_FLOOR!) as FloorTarget;
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'exit') process.exit(0);
    void floorLoop(target).then((ms) => process.send!({ done: m.cmd, ms }));
  });
  process.send!({ ready: true });
}

function cpuMs(u: NodeJS.CpuUsage): number {
  return (u.user + u.system) / 1000;
}

/** A process's CPU so far (utime + stime, in clock ticks of 10 ms), in ms. */
function procCpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

async function main() {
  const { testCertificates } = await import('../test/support/https.ts');
  const { benchEnvironment, spawnWorker, childRun, percentile, threadTimes, threadTimesPer, describeThreadTimes } = await import('./support.ts');
  const { benchResult } = await import('./results.ts');
  const { newId } = await import('../src/adapters/ids.ts');
  const { owedWebhooksSql } = await import('../src/modules/events/outbox.ts');

  const certs = testCertificates();
  const receiver = fork(fileURLToPath(import.meta.url), [], { execArgv: ['--import', 'tsx'], env: { ...process.env, BENCH_WEBHOOK_RECEIVER: '1', BENCH_CERT_DIR: certs.dir } });
  const ask = <T>(cmd: string) =>
    new Promise<T>((resolve) => {
      receiver.once('message', (m) => resolve(m as T));
      receiver.send({ cmd });
    });
  const port = await new Promise<number>((resolve) => receiver.once('message', (m) => resolve((m as { port: number }).port)));
  const waitForCount = async (n: number) => {
    for (;;) {
      const r = await ask<{ count: number; connections: number }>('count');
      if (r.count >= n) return r.connections;
      await new Promise((res) => setTimeout(res, 20));
    }
  };
  const url = `https://127.0.0.1:${port}/hook`;

  const env = await benchEnvironment();
  // The receiver is on 127.0.0.1: this is the one place the SSRF guard must be off.
  env.deps.config = { ...env.deps.config, webhookAllowPrivate: true };
  const { id: webhookId, signingSecret } = await env.api('POST', '/v1/webhooks', { url, events: ['message.sent'] });
  const target: BareTarget = { port, ca: certs.ca, secret: signingSecret, webhookId };
  const bodies = await bareBodies(webhookId);
  /**
   * The bare loop in this process, run before mailgate and again after it (the mean of the two
   * was the ratio's baseline until session 41): this shared machine's speed drifts within a
   * minute (the bare send loop moved from 628 to 1,158 msg/s within one run of bench:send). This
   * process also holds the app, its pools and this script's data, and ran the loop about 1.2x
   * slower than a process of its own (docs/benchmarks.md, "Session 41"): bareFreshRun is the
   * like-for-like baseline.
   */
  const bareRun = async () => {
    const threads0 = threadTimes(process.pid);
    const cpu0 = process.cpuUsage();
    const receiverCpu0 = procCpuMs(receiver.pid!);
    const ms = await bareLoop(target, bodies);
    const connections = await waitForCount(COUNT);
    const cpu = cpuMs(process.cpuUsage(cpu0));
    const receiverCpu = procCpuMs(receiver.pid!) - receiverCpu0;
    const threads = threadTimesPer(threads0, threadTimes(process.pid), COUNT);
    await ask('reset');
    return { ms, cpu, receiverCpu, connections, threads };
  };
  /**
   * The baseline of the ratio (since session 41): the bare loop in a new process for each run,
   * as the worker is a process of its own, both timed from their first request (or, with
   * BENCH_WARM=1, both run once untimed first). Run before mailgate and again after it; the
   * ratio uses the mean of the two, for the machine's drift. Its CPU and thread times are read
   * from /proc, as the worker's are.
   */
  const bareFreshRun = async () => {
    const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ['--import', 'tsx'], env: { ...process.env, BENCH_WEBHOOK_BARE: JSON.stringify(target) } });
    const out = await childRun(child, {
      warm: WARM,
      settle: () => waitForCount(COUNT).then(() => ask('reset')),
      before: () => ({ threads: threadTimes(child.pid!), cpu: procCpuMs(child.pid!), receiverCpu: procCpuMs(receiver.pid!) }),
      after: async (c0) => {
        const connections = await waitForCount(COUNT);
        const threads = threadTimesPer(c0.threads, threadTimes(child.pid!), COUNT);
        return { cpu: procCpuMs(child.pid!) - c0.cpu, receiverCpu: procCpuMs(receiver.pid!) - c0.receiverCpu, connections, threads };
      },
    });
    await ask('reset');
    return out;
  };
  const freshBefore = await bareFreshRun();
  if (WARM) await bareLoop(target, bodies).then(() => waitForCount(COUNT)).then(() => ask('reset'));
  const bareBefore = await bareRun();
  let t: number;

  // --- for reference, the same bare loop over undici (the client the daemon uses), which costs
  // less per request than node:https. The ratio above is the (a plain node:https loop).
  const pool = await undiciPool(target);
  let next = 0;
  const undiciCpu0 = process.cpuUsage();
  t = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < COUNT) {
        const i = next++;
        const status = await undiciPost(target, pool, bodies[i], `evt_bare${i}`);
        if (status !== 200) throw new Error(`status ${status}`);
      }
    }),
  );
  await waitForCount(COUNT);
  const undiciMs = performance.now() - t;
  const undiciCpuMs = cpuMs(process.cpuUsage(undiciCpu0));
  await pool.close();
  await ask('reset');

  // --- mailgate: a worker process delivers what the outbox holds.
  // BENCH_WORKER_NODE_ARGS: extra node flags for the worker (bench/support.ts spawnWorker).
  const worker = spawnWorker(env, { MAILGATE_WEBHOOK_ALLOW_PRIVATE: 'true', NODE_EXTRA_CA_CERTS: certs.caPath });
  await new Promise((r) => setTimeout(r, 4000)); // let the worker boot before the clock starts

  /** Commits `n` events in one transaction (one multi-row insert); returns ids and commit time. */
  const commitEvents = async (from: number, n: number) => {
    const ids = Array.from({ length: n }, () => newId('evt'));
    const client = await env.pool.connect();
    try {
      await client.query('begin');
      await client.query(
        // as the event writers write them, with the webhooks each is owed to (events/outbox.ts)
        `insert into events (id, workspace_id, type, data, created_at, webhook_ids)
         select t.id, $1, 'message.sent', t.data::jsonb, now(), ${owedWebhooksSql('$1', "'message.sent'")}
           from unnest($2::text[], $3::text[]) as t(id, data)`,
        [env.workspaceId, ids, ids.map((_, k) => JSON.stringify(dataOf(from + k)))],
      );
      await client.query('commit');
    } finally {
      client.release();
    }
    return { ids, at: Date.now() };
  };
  const lags = async (commits: Array<{ ids: string[]; at: number }>) => {
    const received = new Map((await ask<{ times: Array<[string, number]> }>('times')).times);
    return commits.flatMap((c) => c.ids.map((id) => received.get(id)! - c.at));
  };

  /**
   * The floor (floorLoop) in a new process, as the worker is one: the events are committed by
   * this process exactly as for mailgate, from the moment the floor's process is told to go,
   * and timed the same way (to the receipt of the last). The ratio floor / bare bounds what
   * mailgate can reach in this bench on this machine.
   */
  const floorRun = async () => {
    const floorTarget: FloorTarget = { ...target, databaseUrl: env.url, workspaceId: env.workspaceId };
    const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ['--import', 'tsx'], env: { ...process.env, BENCH_WEBHOOK_FLOOR: JSON.stringify(floorTarget) } });
    const out = await childRun(child, {
      warm: false,
      settle: async () => {},
      before: () => {
        const at = { pg: pgCpu(), receiver: procCpuMs(receiver.pid!), cpu: procCpuMs(child.pid!), t0: performance.now() };
        const committing = (async () => {
          const made: Array<{ ids: string[]; at: number }> = [];
          for (let i = 0; i < COUNT; i += 500) made.push(await commitEvents(2 * COUNT + i, Math.min(500, COUNT - i)));
          return made;
        })();
        return { ...at, committing };
      },
      after: async (s0) => {
        await waitForCount(COUNT);
        const ms = performance.now() - s0.t0;
        let pgMs = 0;
        for (const [pid, v] of pgCpu()) pgMs += v - (s0.pg.get(pid) ?? 0);
        return { wallMs: ms, cpu: procCpuMs(child.pid!) - s0.cpu, pgMs, receiverMs: procCpuMs(receiver.pid!) - s0.receiver, lag: await lags(await s0.committing) };
      },
    });
    return { ms: out.wallMs, cpu: out.cpu, pgMs: out.pgMs, receiverMs: out.receiverMs, lag: out.lag };
  };

  const workerCpu = () => procCpuMs(worker.pid!);
  // PostgreSQL's CPU: the postmaster and every backend it runs (by parent pid), summed.
  const { rows: [{ pid: backendPid }] } = await env.pool.query('select pg_backend_pid() as pid');
  const postmaster = Number(readFileSync(`/proc/${backendPid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
  const pgCpu = () => {
    const byPid = new Map<number, number>();
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const f = readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ');
        if (Number(d) === postmaster || Number(f[1]) === postmaster) byPid.set(Number(d), (Number(f[11]) + Number(f[12])) * 10);
      } catch {
        // gone meanwhile
      }
    }
    return byPid;
  };
  if (WARM) {
    for (let i = 0; i < COUNT; i += 500) await commitEvents(5 * COUNT + i, Math.min(500, COUNT - i));
    await waitForCount(COUNT);
    await new Promise((r) => setTimeout(r, 1000));
    await ask('reset');
  }
  // WAL written per delivery (every process's: the bench's event commits are in both sides').
  const walAt = async () => (await env.pool.query<{ lsn: string }>(`select pg_current_wal_insert_lsn()::text as lsn`)).rows[0].lsn;
  const walSince = async (from: string) =>
    Number((await env.pool.query<{ n: string }>(`select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn) as n`, [from])).rows[0].n);
  const mgWal0 = await walAt();
  const pgCpuAt = pgCpu();
  const workerCpuAt = workerCpu();
  const workerThreadsAt = threadTimes(worker.pid!);
  const receiverCpuAt = procCpuMs(receiver.pid!);
  await env.statementStats(true);
  t = performance.now();
  const commits: Array<{ ids: string[]; at: number }> = [];
  for (let i = 0; i < COUNT; i += 500) commits.push(await commitEvents(i, Math.min(500, COUNT - i)));
  const committedMs = performance.now() - t;
  const mailgateConnections = await waitForCount(COUNT);
  const mailgateMs = performance.now() - t;
  const workerCpuMs = workerCpu() - workerCpuAt;
  const workerThreads = threadTimesPer(workerThreadsAt, threadTimes(worker.pid!), COUNT);
  const receiverCpuMs = procCpuMs(receiver.pid!) - receiverCpuAt;
  let pgCpuMs = 0;
  for (const [pid, ms] of pgCpu()) pgCpuMs += ms - (pgCpuAt.get(pid) ?? 0);
  const mgWal = await walSince(mgWal0);
  const backlogLag = await lags(commits);
  // BENCH_PG_STATEMENTS=1: the backlog's statements (the bench's own inserts included).
  const stmts = await env.statementStats();
  if (stmts) {
    console.log(`statements per delivery: ${(stmts.calls / COUNT).toFixed(2)}; execution ${((stmts.execMs * 1000) / COUNT).toFixed(0)} us, planning ${((stmts.planMs * 1000) / COUNT).toFixed(0)} us per delivery`);
    for (const q of stmts.top) console.log(`  ${String(q.calls).padStart(7)} calls ${q.ms.toFixed(0).padStart(6)} ms ${String(q.plans).padStart(6)} plans ${q.plan_ms.toFixed(0).padStart(5)} ms ${String(q.jit_fns).padStart(5)} jit fns ${q.jit_ms.toFixed(0).padStart(5)} jit ms  ${q.query}`);
  }
  const rss = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${worker.pid}/status`, 'utf8'))![1]) / 1024;
  await ask('reset');

  // --- paced: PACED_RATE events per second, one per transaction, while the worker runs.
  const paced: Array<{ ids: string[]; at: number }> = [];
  const start = performance.now();
  for (let i = 0; i < PACED; i++) {
    const due = start + (i * 1000) / PACED_RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    paced.push(await commitEvents(COUNT + i, 1));
  }
  await waitForCount(PACED);
  const pacedLag = await lags(paced);

  // Outcomes are written just after receipt: wait for the last of them.
  let rows: Array<{ delivered: number; deliveries: number; attempts: number }> = [];
  for (let tries = 0; tries < 100; tries++) {
    ({ rows } = await env.pool.query(
      `select count(*) filter (where state = 'delivered')::int as delivered, count(*)::int as deliveries,
              sum(jsonb_array_length(attempts))::int as attempts
         from webhook_deliveries`,
    ));
    if (rows[0].delivered === COUNT * (WARM ? 2 : 1) + PACED) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  worker.kill('SIGTERM');
  await new Promise((r) => worker.once('exit', r));
  await ask('reset');
  const floorWal0 = await walAt();
  const floor = await floorRun();
  const floorWal = await walSince(floorWal0);
  await ask('reset');
  const bareAfter = await bareRun();
  const freshAfter = await bareFreshRun();
  const bareMs = (bareBefore.ms + bareAfter.ms) / 2;
  const bareCpuMs = (bareBefore.cpu + bareAfter.cpu) / 2;
  const bareReceiverCpuMs = (bareBefore.receiverCpu + bareAfter.receiverCpu) / 2;
  const bareConnections = bareAfter.connections;

  const bareRate = COUNT / (bareMs / 1000);
  const mgRate = COUNT / (mailgateMs / 1000);
  const fmt = (v: number[]) => `p50 ${percentile(v, 50).toFixed(0)} ms, p95 ${percentile(v, 95).toFixed(0)} ms`;
  const rateOf = (ms: number) => (COUNT / (ms / 1000)).toFixed(0);
  console.log(
    `bare loop of signed POSTs (${CONCURRENCY} in flight): ${COUNT} in ${(bareMs / 1000).toFixed(2)} s = ${bareRate.toFixed(0)} deliveries/s ` +
      `(mean of the runs before and after mailgate: ${rateOf(bareBefore.ms)} and ${rateOf(bareAfter.ms)} deliveries/s)`,
  );
  console.log(
    `mailgate worker (${CONCURRENCY} in flight): ${COUNT} in ${(mailgateMs / 1000).toFixed(2)} s from the first commit = ${mgRate.toFixed(0)} deliveries/s ` +
      `(events committed in ${(committedMs / 1000).toFixed(2)} s); lag commit -> receipt ${fmt(backlogLag)}`,
  );
  const us = (ms: number) => `${((ms * 1000) / COUNT).toFixed(0)} us`;
  console.log(`CPU: bare loop ${(bareCpuMs / 1000).toFixed(2)} s, worker ${(workerCpuMs / 1000).toFixed(2)} s (per delivery ${us(bareCpuMs)} vs ${us(workerCpuMs)}); PostgreSQL ${(pgCpuMs / 1000).toFixed(2)} s`);
  console.log(
    `CPU per delivery, every process: bare = loop ${us(bareCpuMs)} + receiver ${us(bareReceiverCpuMs)}; ` +
      `mailgate = worker ${us(workerCpuMs)} + PostgreSQL ${us(pgCpuMs)} + receiver ${us(receiverCpuMs)} (this script's event commits are in PostgreSQL's share)`,
  );
  console.log(
    `for reference, the same bare loop over undici: ${COUNT} in ${(undiciMs / 1000).toFixed(2)} s = ${(COUNT / (undiciMs / 1000)).toFixed(0)} deliveries/s, ${us(undiciCpuMs)} CPU per delivery (mailgate / it: ${(mgRate / (COUNT / (undiciMs / 1000))).toFixed(2)})`,
  );
  // Both bare runs' figures, and the worker's, per delivery (bench/support.ts threadTimes).
  console.log(
    `per delivery, ${describeThreadTimes('bare loop (before / after):', bareBefore.threads)}; ${describeThreadTimes('/', bareAfter.threads)}; ` +
      describeThreadTimes('mailgate worker:', workerThreads),
  );
  console.log(`TLS connections opened: bare loop ${bareConnections}, mailgate ${mailgateConnections}`);
  console.log(`ratio mailgate / bare in this process (which slows the loop; the ratio until session 41): ${(mgRate / bareRate).toFixed(2)}`);
  const freshMs = (freshBefore.ms + freshAfter.ms) / 2;
  const freshRate = COUNT / (freshMs / 1000);
  console.log(
    `bare loop, each run in a new process as the worker is (${WARM ? 'after an untimed run' : 'timed from its first request'}): ${COUNT} in ${(freshMs / 1000).toFixed(2)} s = ${freshRate.toFixed(0)} deliveries/s ` +
      `(runs before and after mailgate: ${rateOf(freshBefore.ms)} and ${rateOf(freshAfter.ms)}); CPU per delivery: loop ${us((freshBefore.cpu + freshAfter.cpu) / 2)} + receiver ${us((freshBefore.receiverCpu + freshAfter.receiverCpu) / 2)}; ` +
      `${describeThreadTimes('before:', freshBefore.threads)}; ${describeThreadTimes('after:', freshAfter.threads)}`,
  );
  console.log(`ratio mailgate / bare, both timed from a new process: ${(mgRate / freshRate).toFixed(2)} (target >= 0.7, issue 20)`);
  const floorRate = COUNT / (floor.ms / 1000);
  console.log(
    `floor (in a new process: the bare undici loop + one statement per 64 events to take them + one insert per 64 finished deliveries): ${COUNT} in ${(floor.ms / 1000).toFixed(2)} s = ${floorRate.toFixed(0)} deliveries/s, ` +
      `ratio floor / bare (both in new processes) ${(floorRate / freshRate).toFixed(2)}, mailgate / floor ${(mgRate / floorRate).toFixed(2)}; CPU per delivery: loop ${us(floor.cpu)} + PostgreSQL ${us(floor.pgMs)} + receiver ${us(floor.receiverMs)}; lag ${fmt(floor.lag)}`,
  );
  console.log(`WAL per delivery (the events' commits included): mailgate ${(mgWal / COUNT).toFixed(0)} bytes, floor ${(floorWal / COUNT).toFixed(0)} bytes`);
  console.log(`paced ${PACED} events at ${PACED_RATE}/s: lag commit -> receipt ${fmt(pacedLag)}`);
  console.log(`rows: ${rows[0].delivered}/${rows[0].deliveries} deliveries delivered, ${rows[0].attempts} attempts; worker peak RSS ${rss.toFixed(0)} MB`);
  benchResult('webhooks', { ratio: mgRate / freshRate, mailgateRate: mgRate, bareRate: freshRate, floorRatio: floorRate / freshRate, peakRssMb: rss });
  receiver.send({ cmd: 'exit' });
  await env.close();
}
