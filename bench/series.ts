// Issue 20's table in one command: npm run bench:series (it builds first: bench:send and
// bench:webhooks run the built worker). Runs each of the issue's benchmarks BENCH_RUNS times
// (default 5), each run a process of its own, round after round (one run of each per round, so
// a machine that slows down for a while slows every path alike rather than one), and prints for
// every target the median of the runs, their spread and whether the median meets the target
// (the worker's peak RSS: whether the highest run stays under it). Every run's whole report is
// kept in a temp dir named at the end. BENCH_SERIES picks some of them (comma-separated ids:
// send3, send5, webhooks, enroll, inbox). Exits 1 when a run failed or printed no result, never
// because a target is missed: it measures, it does not judge the build.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, parseResults, type BenchResult } from './results.ts';

interface Bench {
  id: string;
  file: string;
  env: Record<string, string>;
}

const BENCHES: Bench[] = [
  { id: 'send3', file: 'send.ts', env: { BENCH_CONNECTIONS: '3' } },
  { id: 'send5', file: 'send.ts', env: { BENCH_CONNECTIONS: '5' } },
  { id: 'webhooks', file: 'webhooks.ts', env: {} },
  // (c), the stats read with a million messages, is no target of issue 20.
  { id: 'enroll', file: 'enroll.ts', env: { BENCH_SKIP_C: '1' } },
  // Its breakdown and its churn and scale checks are no target either.
  { id: 'inbox', file: 'inbox.ts', env: { BENCH_TARGET_ONLY: '1' } },
];

interface Target {
  path: string;
  /** The result line (benchResult's name) and its figure. */
  result: string;
  figure: string;
  target: string;
  meets: (v: number) => boolean;
  /** What is judged: the median of the runs, or the highest run (a peak must hold in every run). */
  judge: 'median' | 'max';
  digits: number;
}

const atLeast = (x: number) => (v: number) => v >= x;
const below = (x: number) => (v: number) => v < x;
const TARGETS: Target[] = [
  { path: 'send, 3 connections: mailgate / bare pool', result: 'send at 3', figure: 'ratio', target: '>= 0.85', meets: atLeast(0.85), judge: 'median', digits: 2 },
  { path: 'send, 3 connections: worker peak RSS (MB)', result: 'send at 3', figure: 'peakRssMb', target: '< 250', meets: below(250), judge: 'max', digits: 0 },
  { path: 'send, 5 connections: mailgate / bare pool', result: 'send at 5', figure: 'ratio', target: '>= 0.85', meets: atLeast(0.85), judge: 'median', digits: 2 },
  { path: 'send, 5 connections: worker peak RSS (MB)', result: 'send at 5', figure: 'peakRssMb', target: '< 250', meets: below(250), judge: 'max', digits: 0 },
  { path: 'bulk enroll, 10k leads: API / bare insert', result: 'enroll', figure: 'ratio', target: '<= 1.5', meets: (v) => v <= 1.5, judge: 'median', digits: 2 },
  { path: 'start, 100k enrolled leads (ms)', result: 'start', figure: 'ms', target: '< 1000', meets: below(1000), judge: 'median', digits: 0 },
  { path: 'webhooks, 12k deliveries: mailgate / bare loop', result: 'webhooks', figure: 'ratio', target: '>= 0.7', meets: atLeast(0.7), judge: 'median', digits: 2 },
  { path: 'SDR inbox, 100k threads: API p95 (ms)', result: 'inbox', figure: 'p95Ms', target: '< 15', meets: below(15), judge: 'median', digits: 1 },
];

/** Which bench a result line comes from (the send results are named by their connections). */
const benchOf = (result: string) => ({ 'send at 3': 'send3', 'send at 5': 'send5', start: 'enroll' })[result] ?? result;

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`BENCH_RUNS must be a whole number >= 1, not ${process.env.BENCH_RUNS}`);
const picked = process.env.BENCH_SERIES?.split(',').map((s) => s.trim()).filter(Boolean);
const unknown = picked?.filter((id) => !BENCHES.some((b) => b.id === id)) ?? [];
if (unknown.length) throw new Error(`BENCH_SERIES: unknown ${unknown.join(', ')} (known: ${BENCHES.map((b) => b.id).join(', ')})`);
const benches = picked ? BENCHES.filter((b) => picked.includes(b.id)) : BENCHES;

const here = path.dirname(fileURLToPath(import.meta.url));
const logDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-series-'));

/** One run of one benchmark in a process of its own; its report is kept in logDir. */
function runOnce(b: Bench, round: number): Promise<{ results: Map<string, BenchResult>; ok: boolean; seconds: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, b.file)], {
      env: { ...process.env, ...b.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('close', (code) => {
      writeFileSync(path.join(logDir, `${b.id}-${round}.log`), out);
      const results = parseResults(out);
      resolve({ results, ok: code === 0 && results.size > 0, seconds: (performance.now() - started) / 1000 });
    });
  });
}

const cpu = os.cpus();
console.log(`${new Date().toISOString()}: ${RUNS} runs of ${benches.map((b) => b.id).join(', ')}; ${cpu.length} cores (${cpu[0]?.model ?? 'unknown'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`);
const figures = new Map<string, BenchResult[]>();
const failed: string[] = [];
for (let round = 1; round <= RUNS; round++) {
  for (const b of benches) {
    const r = await runOnce(b, round);
    if (!r.ok) failed.push(`${b.id} run ${round} (${path.join(logDir, `${b.id}-${round}.log`)})`);
    for (const [name, f] of r.results) figures.set(name, [...(figures.get(name) ?? []), f]);
    const shown = [...r.results].map(([name, f]) => `${name}: ${Object.entries(f).map(([k, v]) => `${k} ${v === null ? 'n/a' : +v.toFixed(3)}`).join(', ')}`);
    console.log(`round ${round}, ${b.id} (${r.seconds.toFixed(0)} s)${r.ok ? '' : ' FAILED'}: ${shown.join('; ') || 'no result'}`);
  }
}

console.log('');
console.log('| path | target | judged on | result | runs (in order) | met |');
console.log('|---|---|---|---|---|---|');
for (const t of TARGETS) {
  if (!benches.some((b) => b.id === benchOf(t.result))) continue;
  const values = (figures.get(t.result) ?? []).map((f) => f[t.figure]).filter((v): v is number => typeof v === 'number');
  if (!values.length) {
    console.log(`| ${t.path} | ${t.target} | ${t.judge} | no result | | no |`);
    continue;
  }
  const v = t.judge === 'median' ? median(values) : Math.max(...values);
  const sorted = [...values].sort((a, b) => a - b);
  const spread = `${sorted[0].toFixed(t.digits)}-${sorted[sorted.length - 1].toFixed(t.digits)}`;
  const judged = t.judge === 'median' ? `median of ${values.length} (spread ${spread})` : `highest of ${values.length}`;
  console.log(`| ${t.path} | ${t.target} | ${judged} | ${v.toFixed(t.digits)} | ${values.map((x) => x.toFixed(t.digits)).join(', ')} | ${t.meets(v) ? 'yes' : 'no'} |`);
}
console.log(`\nevery run's report: ${logDir}`);
if (failed.length) {
  console.log(`failed runs: ${failed.join('; ')}`);
  process.exit(1);
}
