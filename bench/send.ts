// Sending benchmark (issue 4). Run: npm run bench:send
// 10,000 personalized messages, one sender account, capacity unlimited, to a local SMTP sink in
// its own process: mailgate (a `serve --role worker` process) from `start` to the last message
// accepted, vs a bare nodemailer pooled-transport loop sending the same rendered messages to
// the same sink with the same connection count (bench/send-bare.ts). The ratio's baseline (since
// session 41) runs the loop in a new process for each run, as the worker is one, before mailgate
// and again after it, using the mean of the two; the loop also runs in this process before and
// after (slower there, its process holding the app and this script's data: the baseline until
// session 41).
// Prints messages/s for both, the ratio, CPU per message of every
// process, how long each side's main thread ran and waited for a core (bench/support.ts
// threadTimes), the worker's peak RSS and its outcome statements (their count and mean time, read
// from its metrics listener). With BENCH_WAL=1, also the write-ahead log per message by record
// type and relation (index entries, row locks, updates: counts that do not depend on the machine).
import { fork } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { benchEnvironment, spawnWorker, childRun, cpuOf, threadTimes, threadTimesPer, describeThreadTimes, type ThreadTimes } from './support.ts';
import { steps, benchLeads, renderedMessages, bareSend, type BareMode } from './send-bare.ts';
import { benchResult } from './results.ts';
import { backfillTalliesSql } from '../src/modules/messages/tallies.ts';
import { nativePlaceholders } from '../src/db/sql.ts';
import { freePort } from '../src/db/embedded.ts';
import { sample } from '../test/support/prometheus.ts';

const COUNT = Number(process.env.BENCH_COUNT ?? 10_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 3);
/**
 * BENCH_WARM=1: both sides run once untimed first (the bare loop one more time before its first
 * timed run; the worker a campaign of as many messages to other leads), so both are timed with
 * their code compiled. By default neither is: the worker is timed from its first message.
 */
const WARM = process.env.BENCH_WARM === '1';

const sink = fork(new URL('./sink.ts', import.meta.url).pathname, [], { execArgv: ['--import', 'tsx'] });
const ask = (cmd: string) =>
  new Promise<{ count: number }>((resolve) => {
    sink.once('message', (m) => resolve(m as { count: number }));
    sink.send({ cmd });
  });
const port = await new Promise<number>((resolve) => sink.once('message', (m) => resolve((m as { port: number }).port)));
/** The embedded PostgreSQL's postmaster (a child of this process) and its backends. */
function postgresCpu(): number | null {
  const stat = (pid: string) => {
    try {
      const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      return { comm: s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')), ppid: Number(f[1]) };
    } catch {
      return null;
    }
  };
  const pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  const master = pids.find((p) => { const s = stat(p); return s?.ppid === process.pid && s.comm === 'postgres'; });
  if (!master) return null;
  let total = cpuOf(Number(master), true);
  for (const p of pids) if (stat(p)?.ppid === Number(master)) total += cpuOf(Number(p));
  return total;
}
/**
 * BENCH_WAL=1: the write-ahead log written from the start request to the last message accepted,
 * per message: records, bytes and commits, by record type and by relation and record type
 * (pg_walinspect, loaded into the bench's database; the embedded cluster's user is a superuser).
 * Counts, not times: a B-tree leaf insert is one index entry, a heap LOCK a row lock written (or
 * an update whose new version goes to another page), so two designs compare without the
 * machine's noise.
 */
const WAL = process.env.BENCH_WAL === '1';
async function walPosition(): Promise<string> {
  await env.pool.query('create extension if not exists pg_walinspect');
  return (await env.pool.query(`select pg_current_wal_lsn()::text as lsn`)).rows[0].lsn;
}
async function printWal(a: string, b: string): Promise<void> {
  const per = (n: number, digits = 2) => (n / COUNT).toFixed(digits);
  // From the log itself, not pg_stat_wal: a backend reports its WAL counters to it at most once a
  // second (idle: within ten), so a run's totals there took in records written before it (43
  // records per message against the log's 34) and could miss its own last ones.
  const types = await env.pool.query(
    `select "resource_manager/record_type" as type, count::float8 as n, combined_size::float8 as bytes
       from pg_get_wal_stats($1, $2, true) where count > 0 order by combined_size desc`,
    [a, b],
  );
  const total = types.rows.reduce((t, r) => ({ n: t.n + r.n, bytes: t.bytes + r.bytes }), { n: 0, bytes: 0 });
  const commits = types.rows.find((r) => r.type === 'Transaction/COMMIT')?.n ?? 0;
  console.log(`WAL per message (BENCH_WAL): ${per(total.n, 1)} records, ${per(total.bytes, 0)} bytes, ${per(commits)} commits`);
  console.log(`  by record type: ${types.rows.slice(0, 12).map((r) => `${r.type} ${per(r.n)} (${per(r.bytes, 0)} B)`).join(', ')}`);
  const rels = await env.pool.query(
    `select record_type as type, coalesce(pg_filenode_relation(0, substring(block_ref from 'rel \\d+/\\d+/(\\d+)')::oid)::text, '?') as rel, count(*)::float8 as n
       from pg_get_wal_records_info($1, $2) where resource_manager in ('Heap', 'Heap2', 'Btree')
      group by 1, 2 order by 3 desc limit 30`,
    [a, b],
  );
  console.log(`  heap and B-tree records by relation: ${rels.rows.map((r) => `${r.rel} ${r.type} ${per(r.n)}`).join(', ')}`);
}
/** BENCH_PG_BREAKDOWN=1: PostgreSQL CPU seconds by process kind (backends, WAL writer, exited children such as autovacuum workers, ...). */
function postgresCpuByKind(): Map<string, number> {
  const out = new Map<string, number>();
  const add = (k: string, v: number) => out.set(k, (out.get(k) ?? 0) + v);
  const pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  const parentOf = (pid: string) => {
    try {
      const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return { comm: s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')), ppid: Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]) };
    } catch {
      return null;
    }
  };
  const master = pids.find((p) => { const s = parentOf(p); return s?.ppid === process.pid && s.comm === 'postgres'; });
  if (!master) return out;
  add('postmaster', cpuOf(Number(master)));
  add('exited children (autovacuum workers, ended backends)', cpuOf(Number(master), true) - cpuOf(Number(master)));
  for (const p of pids) {
    if (parentOf(p)?.ppid !== Number(master)) continue;
    let cmd = '';
    try { cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').trim(); } catch { continue; }
    const kind = /postgres: (walwriter|checkpointer|background writer|autovacuum launcher|autovacuum worker|logical replication launcher|walsender)/.exec(cmd)?.[1] ?? 'backends';
    add(kind, cpuOf(Number(p)));
  }
  return out;
}
const cpuLine = (label: string, secs: number | null) => (secs === null ? '' : ` ${label} ${((secs * 1000) / COUNT).toFixed(3)} ms`);

const waitForCount = async (n: number) => {
  while ((await ask('count')).count < n) await new Promise((r) => setTimeout(r, 20));
};

const env = await benchEnvironment();
const leads = benchLeads(COUNT);

// --- baseline: bare nodemailer pool, same rendered messages, same connections.
const rendered = renderedMessages(leads);
type BareRun = { ms: number; client: number; sink: number; threads: ThreadTimes | null };
/**
 * The bare loop in this process, run before mailgate and again after it (the mean of the two was
 * the ratio's baseline until session 41): this shared machine's speed drifts over a minute (the
 * same loop ran 740-1,340 msg/s in one session), and one run on one side only would put that
 * drift into the ratio. This process also holds the app, its pools and this script's data, and
 * ran the loop about 1.3x slower than a process of its own (docs/benchmarks.md, "Session 41"):
 * bareFreshRun is the like-for-like baseline.
 */
async function bareRun(): Promise<BareRun> {
  const threads0 = threadTimes(process.pid);
  const c0 = { self: process.cpuUsage(), sink: cpuOf(sink.pid!) };
  const ms = await bareSend(port, CONNECTIONS, rendered);
  await waitForCount(COUNT);
  const self = process.cpuUsage(c0.self);
  const out = { ms, client: (self.user + self.system) / 1e6, sink: cpuOf(sink.pid!) - c0.sink, threads: threadTimesPer(threads0, threadTimes(process.pid), COUNT) };
  await ask('reset');
  return out;
}
/**
 * The ratio's baseline (since session 41): the bare loop in a new process for each run
 * (bench/send-bare.ts), as the worker is a process of its own, both timed from their first
 * message (with BENCH_WARM=1 both run once untimed first). Its CPU and thread times come from
 * /proc, as the worker's do.
 */
function bareFreshRun(): Promise<BareRun> {
  return freshRun('pool', () => waitForCount(COUNT).then(() => ask('reset')));
}
/** BENCH_BARE_NODE_ARGS: extra node flags for the bare loops' new processes (as BENCH_WORKER_NODE_ARGS for the worker). */
const bareNodeArgs = process.env.BENCH_BARE_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
/** One timed run of a loop of bench/send-bare.ts in a new process; `settle` runs after its untimed run (BENCH_WARM=1). */
async function freshRun(mode: BareMode, settle: () => Promise<unknown>): Promise<BareRun> {
  const child = fork(new URL('./send-bare.ts', import.meta.url).pathname, [], {
    execArgv: ['--import', 'tsx', ...bareNodeArgs],
    env: { ...process.env, BENCH_SEND_BARE: JSON.stringify({ port, connections: CONNECTIONS, count: COUNT, mode, url: env.url }) },
  });
  const out = await childRun(child, {
    warm: WARM,
    settle,
    before: () => ({ threads: threadTimes(child.pid!), client: cpuOf(child.pid!), sink: cpuOf(sink.pid!) }),
    after: async (c0) => {
      await waitForCount(COUNT);
      return { client: cpuOf(child.pid!) - c0.client, sink: cpuOf(sink.pid!) - c0.sink, threads: threadTimesPer(c0.threads, threadTimes(child.pid!), COUNT) };
    },
  });
  await ask('reset');
  return out;
}

/**
 * What the crash bound costs by itself (contract: after a crash at most the messages in flight
 * on the open connections can repeat): two more bare loops (bench/send-bare.ts rawSend), each in
 * a new process for each run as the baseline is (since session 41), sending bytes composed
 * before the clock starts (as mailgate's worker sends finished bytes) so neither pays for
 * composing: `raw`, the bytes through the same pooled transport, nothing else; `bound`, the same
 * with each end of data waiting for an acceptance place freed by the message's committed
 * acceptance. bound / raw is the share of the wire's rate a sender keeps once it keeps the bound.
 */
async function rawRun(bound: boolean): Promise<BareRun> {
  if (bound) {
    await env.pool.query('create table if not exists bench_bound (n int primary key)');
    await env.pool.query('truncate bench_bound');
  }
  return freshRun(bound ? 'bound' : 'raw', async () => {
    await waitForCount(COUNT);
    await ask('reset');
    if (bound) await env.pool.query('truncate bench_bound');
  });
}
const freshBefore = await bareFreshRun();
if (WARM) await bareRun();
const bareBefore = await bareRun();
const rawBefore = await rawRun(false);
const boundBefore = await rawRun(true);

// --- mailgate: a worker process sends the campaign.
const s = env.services();
const sender = await s.senders.add({ workspaceId: env.workspaceId, email: 'sender@bench.example', name: 'Bench Sender', smtpUrl: `smtp://u:p@127.0.0.1:${port}` });
const pool = await s.senders.createPool(env.workspaceId, 'bench', 10_000_000, [sender.id]);
const { id } = await env.api('POST', '/v1/campaigns', { name: 'send bench', senderPoolId: pool.id, sequenceSteps: steps });
// BENCH_PRIOR_SENT=N: the pool has already sent N messages in the last 23 hours (an earlier
// campaign of the day, vacuumed, each with its Message-ID as sent mail has), to see what the
// day's volume costs the claim's rolling count.
const PRIOR_SENT = Number(process.env.BENCH_PRIOR_SENT ?? 0);
if (PRIOR_SENT > 0) {
  await env.pool.query(
    `insert into outbound_messages (id, workspace_id, campaign_id, step_index, kind, state, due_at, pool_id, sender_account_id, to_email, message_id_header, sent_at, created_at, updated_at)
     select 'msg_prior_' || g, $1, 'cmp_prior', 0, 'campaign', 'sent', x.t, $2, $3, 'prior' || g || '@bench.example', '<prior.' || g || '@bench.example>', x.t, x.t, x.t
       from generate_series(1, $4::int) g, lateral (select now() - (g::float8 / $4::int) * interval '23 hours' as t) x`,
    [env.workspaceId, pool.id, sender.id, PRIOR_SENT],
  );
  // Written directly, so tallied as the migration tallies what was sent before it (tallies.ts).
  await env.pool.query(nativePlaceholders(backfillTalliesSql()), [new Date(Date.now() - 48 * 3_600_000)]);
  await env.pool.query('vacuum analyze outbound_messages');
  await env.pool.query('vacuum analyze sent_tallies');
}
for (let i = 0; i < COUNT; i += 10_000) await env.api('POST', `/v1/campaigns/${id}/leads/bulk`, { leads: leads.slice(i, i + 10_000) });
const warmId = WARM ? (await env.api('POST', '/v1/campaigns', { name: 'warm-up', senderPoolId: pool.id, sequenceSteps: steps })).id : null;
if (warmId) for (let i = 0; i < COUNT; i += 10_000) await env.api('POST', `/v1/campaigns/${warmId}/leads/bulk`, { leads: leads.slice(i, i + 10_000).map((l) => ({ ...l, email: `warm.${l.email}` })) });
// The worker's metrics listener (docs/operating.md): its outcome statements are read from it.
const metricsPort = await freePort();
// BENCH_WORKER_NODE_ARGS: extra node flags for the worker (bench/support.ts spawnWorker).
const worker = spawnWorker(env, { MAILGATE_SMTP_MAX_CONNECTIONS: String(CONNECTIONS), MAILGATE_METRICS_ADDRESS: `127.0.0.1:${metricsPort}` });
await new Promise((r) => setTimeout(r, 3000)); // let the worker boot before the clock starts
if (warmId) {
  await env.api('POST', `/v1/campaigns/${warmId}/start`);
  await waitForCount(COUNT);
  await new Promise((r) => setTimeout(r, 1500));
  await ask('reset');
}
/**
 * The worker's outcome statements so far (mailgate_outcome_write_seconds and _messages): how many,
 * the messages they recorded, their time, and how many took at most 1 ms.
 */
const outcomeWrites = async () => {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const value = (name: string, labels = '') => {
    const v = sample(text, name, labels);
    if (v === undefined) throw new Error(`the worker's metrics have no ${name}`);
    return v;
  };
  return {
    statements: value('mailgate_outcome_write_seconds_count'),
    seconds: value('mailgate_outcome_write_seconds_sum'),
    messages: value('mailgate_outcome_write_messages_sum'),
    within1ms: value('mailgate_outcome_write_seconds_bucket', 'le="0.001"'),
  };
};
const writes0 = await outcomeWrites();
const cpu0 = { sink: cpuOf(sink.pid!), pg: postgresCpu() };
const pgKinds0 = postgresCpuByKind();
const worker0 = cpuOf(worker.pid!);
const workerThreads0 = threadTimes(worker.pid!);
await env.statementStats(true);
const wal0 = WAL ? await walPosition() : null;
const t = performance.now();
await env.api('POST', `/v1/campaigns/${id}/start`);
await waitForCount(COUNT);
const mailgateMs = performance.now() - t;
const wal1 = WAL ? await walPosition() : null;
const writes1 = await outcomeWrites();
const writes = {
  statements: writes1.statements - writes0.statements,
  seconds: writes1.seconds - writes0.seconds,
  messages: writes1.messages - writes0.messages,
  within1ms: writes1.within1ms - writes0.within1ms,
};
const pgNow = postgresCpu();
const pgKinds1 = postgresCpuByKind();
const workerThreads = threadTimesPer(workerThreads0, threadTimes(worker.pid!), COUNT);
const mgCpu = { worker: cpuOf(worker.pid!) - worker0, sink: cpuOf(sink.pid!) - cpu0.sink, pg: pgNow === null || cpu0.pg === null ? null : pgNow - cpu0.pg };
/** The worker's resident memory now and its peak so far (/proc), in MB. */
const rssMb = () => {
  const st = readFileSync(`/proc/${worker.pid}/status`, 'utf8');
  return { now: Number(/VmRSS:\s+(\d+) kB/.exec(st)![1]) / 1024, peak: Number(/VmHWM:\s+(\d+) kB/.exec(st)![1]) / 1024 };
};
const peakRssMb = rssMb().peak;
const stmts = await env.statementStats();
const stats = await env.api('GET', `/v1/campaigns/${id}/stats`);
// BENCH_CAMPAIGNS=N: after the timed campaign, N-1 more campaigns of as many messages (to other
// leads) through the same worker, one after another, untimed: the worker's resident memory after
// each campaign and its peak over all of them (docs/operating.md, "Memory").
const CAMPAIGNS = Number(process.env.BENCH_CAMPAIGNS ?? 1);
const afterEach = [rssMb().now];
for (let n = 2; n <= CAMPAIGNS; n++) {
  await ask('reset');
  const next = (await env.api('POST', '/v1/campaigns', { name: `send bench ${n}`, senderPoolId: pool.id, sequenceSteps: steps })).id;
  for (let i = 0; i < COUNT; i += 10_000) await env.api('POST', `/v1/campaigns/${next}/leads/bulk`, { leads: leads.slice(i, i + 10_000).map((l) => ({ ...l, email: `c${n}.${l.email}` })) });
  await env.api('POST', `/v1/campaigns/${next}/start`);
  await waitForCount(COUNT);
  afterEach.push(rssMb().now);
}
const seriesPeakMb = rssMb().peak;
worker.kill('SIGTERM');
await new Promise((r) => worker.once('exit', r));

await ask('reset');
const boundAfter = await rawRun(true);
const rawAfter = await rawRun(false);
const bareAfter = await bareRun();
const freshAfter = await bareFreshRun();
const bareMs = (bareBefore.ms + bareAfter.ms) / 2;
const bareCpu = { client: (bareBefore.client + bareAfter.client) / 2, sink: (bareBefore.sink + bareAfter.sink) / 2 };
const bareRate = COUNT / (bareMs / 1000);
const freshMs = (freshBefore.ms + freshAfter.ms) / 2;
const freshCpu = { client: (freshBefore.client + freshAfter.client) / 2, sink: (freshBefore.sink + freshAfter.sink) / 2 };
const freshRate = COUNT / (freshMs / 1000);
const rateOf = (ms: number) => (COUNT / (ms / 1000)).toFixed(0);
const mgRate = COUNT / (mailgateMs / 1000);
console.log(
  `bare nodemailer pool (${CONNECTIONS} connections), each run in a new process as the worker is (${WARM ? 'after an untimed run' : 'timed from its first message'}): ` +
    `${COUNT} messages in ${(freshMs / 1000).toFixed(2)} s = ${freshRate.toFixed(0)} msg/s (runs before and after mailgate: ${rateOf(freshBefore.ms)} and ${rateOf(freshAfter.ms)} msg/s)`,
);
console.log(`bare nodemailer pool (${CONNECTIONS} connections) in this process: ${COUNT} messages in ${(bareMs / 1000).toFixed(2)} s = ${bareRate.toFixed(0)} msg/s (mean of the runs before and after mailgate: ${rateOf(bareBefore.ms)} and ${rateOf(bareAfter.ms)} msg/s)`);
if (PRIOR_SENT > 0) console.log(`the pool had sent ${PRIOR_SENT} messages in the 23 hours before (BENCH_PRIOR_SENT)`);
console.log(`mailgate worker (${CONNECTIONS} connections):       ${COUNT} messages in ${(mailgateMs / 1000).toFixed(2)} s = ${mgRate.toFixed(0)} msg/s (stats: sent ${stats.sent}, queued ${stats.queued})`);
const rawRate = COUNT / ((rawBefore.ms + rawAfter.ms) / 2 / 1000);
const boundRate = COUNT / ((boundBefore.ms + boundAfter.ms) / 2 / 1000);
const cpuOfRuns = (x: { client: number; sink: number }, y: { client: number; sink: number }) => `${cpuLine('client', (x.client + y.client) / 2)}${cpuLine('sink', (x.sink + y.sink) / 2)}`;
console.log(`bare pool in a new process, bytes composed before the clock: ${rawRate.toFixed(0)} msg/s (runs ${rateOf(rawBefore.ms)} and ${rateOf(rawAfter.ms)}); CPU per message —${cpuOfRuns(rawBefore, rawAfter)}`);
console.log(`the same with the crash bound (${CONNECTIONS} acceptance places, one commit each): ${boundRate.toFixed(0)} msg/s (runs ${rateOf(boundBefore.ms)} and ${rateOf(boundAfter.ms)}); CPU per message —${cpuOfRuns(boundBefore, boundAfter)}`);
console.log(`the crash bound alone keeps ${(boundRate / rawRate).toFixed(2)} of the raw rate; mailgate / bound: ${(mgRate / boundRate).toFixed(2)}`);
console.log(`ratio mailgate / bare in this process (which slows the loop; the ratio until session 41): ${(mgRate / bareRate).toFixed(2)}`);
console.log(`ratio mailgate / bare, both timed from a new process: ${(mgRate / freshRate).toFixed(2)} (target >= 0.85, issue 20); worker peak RSS ${peakRssMb.toFixed(0)} MB (target < 250 MB)`);
console.log(
  `CPU per message: bare in a new process —${cpuLine('client', freshCpu.client)}${cpuLine('sink', freshCpu.sink)}; bare in this process —${cpuLine('client', bareCpu.client)}${cpuLine('sink', bareCpu.sink)}; ` +
    `mailgate —${cpuLine('worker', mgCpu.worker)}${cpuLine('postgres', mgCpu.pg)}${cpuLine('sink', mgCpu.sink)}`,
);
if (mgCpu.pg !== null) {
  const mgTotal = mgCpu.worker + mgCpu.pg + mgCpu.sink;
  const freshTotal = freshCpu.client + freshCpu.sink;
  console.log(`CPU per message, all processes: bare in a new process ${((freshTotal * 1000) / COUNT).toFixed(3)} ms, mailgate ${((mgTotal * 1000) / COUNT).toFixed(3)} ms (${(mgTotal / freshTotal).toFixed(2)}x)`);
}
// Per message (bench/support.ts threadTimes): how long each side's main thread ran, and how long it
// was runnable but waited for a core while the other processes of the run had them.
console.log(
  `per message, ${describeThreadTimes('bare loop in a new process (before / after):', freshBefore.threads)}; ${describeThreadTimes('/', freshAfter.threads)}; ` +
    `${describeThreadTimes('in this process (before / after):', bareBefore.threads)}; ${describeThreadTimes('/', bareAfter.threads)}; ` +
    describeThreadTimes('mailgate worker:', workerThreads),
);
// The wait that paces each connection (docs/benchmarks.md, "Session 44"): a message ends its data
// only once its connection's previous outcome is committed.
console.log(
  `outcome statements (the worker's metrics): ${writes.statements} for ${writes.messages} messages (${(writes.messages / writes.statements).toFixed(2)} per statement), ` +
    `mean ${((writes.seconds * 1000) / writes.statements).toFixed(3)} ms from start to commit, ${((100 * writes.within1ms) / writes.statements).toFixed(0)}% within 1 ms`,
);
if (CAMPAIGNS > 1) console.log(`${CAMPAIGNS} campaigns of ${COUNT} messages in a row through one worker: RSS after each ${afterEach.map((v) => v.toFixed(0)).join(', ')} MB; peak over all ${seriesPeakMb.toFixed(0)} MB (BENCH_CAMPAIGNS)`);
if (process.env.BENCH_PG_BREAKDOWN) {
  const parts = [...pgKinds1].map(([k, v]) => `${k} ${(((v - (pgKinds0.get(k) ?? 0)) * 1000) / COUNT).toFixed(3)} ms`);
  console.log(`PostgreSQL CPU per message by process: ${parts.join(', ')}`);
}
if (wal0 && wal1) await printWal(wal0, wal1);
if (stmts) {
  console.log(`statements per message (pg_stat_statements, the worker's and the start request's): ${(stmts.calls / COUNT).toFixed(2)}; execution ${((stmts.execMs * 1000) / COUNT).toFixed(0)} us, planning ${((stmts.planMs * 1000) / COUNT).toFixed(0)} us per message`);
  for (const q of stmts.top) console.log(`  ${String(q.calls).padStart(7)} calls ${q.ms.toFixed(0).padStart(6)} ms ${String(q.plans).padStart(6)} plans ${q.plan_ms.toFixed(0).padStart(5)} ms ${String(q.jit_fns).padStart(5)} jit fns ${q.jit_ms.toFixed(0).padStart(5)} jit ms  ${q.query}`);
}
benchResult(`send at ${CONNECTIONS}`, {
  ratio: mgRate / freshRate,
  mailgateRate: mgRate,
  bareRate: freshRate,
  peakRssMb,
  cpuPerMessageMs: mgCpu.pg === null ? null : ((mgCpu.worker + mgCpu.pg + mgCpu.sink) * 1000) / COUNT,
  bareCpuPerMessageMs: ((freshCpu.client + freshCpu.sink) * 1000) / COUNT,
  outcomeWriteMs: (writes.seconds * 1000) / writes.statements,
  messagesPerWrite: writes.messages / writes.statements,
});
sink.send({ cmd: 'exit' });
await env.close();
