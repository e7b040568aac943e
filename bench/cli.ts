// The CLI's and the daemon's start-up cost, as an operator meets it: wall time of one-shot CLI
// commands (median of N runs, against a bare `node -e 0` in the same run for the ratio) while a
// daemon with an embedded PostgreSQL runs, then warm restarts of `npm start` on the same data
// dir, timed from spawn to the first `/readyz` 200.
//
//   npm run bench:cli [-- --runs 10 --restarts 5]
//
// A command this checkout does not have (older code) is reported with its exit code instead of a
// time, so the same file measures the code before a change when copied into an older checkout.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './results.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'bin', 'mailgate.js');

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const RUNS = arg('runs', 10);
const RESTARTS = arg('restarts', 5);

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-bench-cli-'));
const env: NodeJS.ProcessEnv = { ...process.env, MAILGATE_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info' };
delete env.DATABASE_URL;
delete env.NODE_ENV;

/** Runs a command to its end; wall time in ms from spawn to exit. */
function timed(cmd: string, args: string[]): Promise<{ ms: number; code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(cmd, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ ms: Number(process.hrtime.bigint() - t0) / 1e6, code, out }));
  });
}

/**
 * CPU time (user + system, ms) of one run of a command, from bash's `times` (its children's
 * line). Unlike wall time it barely moves with the other load on a shared machine, so it tells
 * what the command itself costs; on an idle machine its wall time is this plus the waits on
 * PostgreSQL and the disk.
 */
function cpuTimed(cmd: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', '"$@" >/dev/null 2>&1; times', 'cpu', cmd, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('error', reject);
    child.on('close', () => {
      // "0m0.004s 0m0.000s\n0m0.152s 0m0.031s\n": the shell's own, then its children's.
      const m = /(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$/.exec(out.trim());
      if (!m) return reject(new Error(`no times output: ${out}`));
      resolve((Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4])) * 1000);
    });
  });
}

interface Daemon {
  proc: ChildProcess;
  /** The node process of mailgate itself (npm and sh sit above it). */
  pid: number;
  port: number;
  firstStartKey?: string;
}

/** `npm start` until `/readyz` answers 200; resolves with the time that took. */
async function startDaemon(): Promise<{ daemon: Daemon; ms: number }> {
  const t0 = process.hrtime.bigint();
  const proc = spawn('npm', ['start', '--silent'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (c) => (stderr += c));
  const up = await new Promise<{ pid: number; port: number; key?: string }>((resolve, reject) => {
    let buf = '';
    let key: string | undefined;
    proc.stdout!.on('data', (c) => {
      buf += c;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        key ??= /ADMIN API KEY[^:]*: (\S+)/.exec(line)?.[1];
        if (!line.startsWith('{')) continue;
        const rec = JSON.parse(line) as { msg?: string; port?: number };
        if (rec.msg === 'mailgate is up') resolve({ pid: mailgatePid(proc.pid!), port: rec.port!, key });
      }
    });
    proc.on('exit', (code) => reject(new Error(`npm start exited with ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`)));
  });
  for (;;) {
    const res = await fetch(`http://127.0.0.1:${up.port}/readyz`).catch(() => null);
    if (res?.status === 200) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  proc.stdout!.resume();
  return { daemon: { proc, pid: up.pid, port: up.port, firstStartKey: up.key }, ms };
}

/** The mailgate node process under npm (npm -> sh -> node), found through /proc. */
function mailgatePid(pid: number): number {
  const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  if (cmd.includes('mailgate.js') || cmd.includes('cli/main.js')) return pid;
  for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) {
    const found = mailgatePid(Number(child));
    if (found) return found;
  }
  return 0;
}

async function stopDaemon(d: Daemon) {
  const exited = new Promise((r) => d.proc.once('exit', r));
  if (!d.pid) throw new Error('mailgate process not found under npm');
  // Only mailgate's own process: a second SIGTERM (npm forwarding one) would cut its drain short.
  process.kill(d.pid, 'SIGTERM');
  await exited;
}

const results: { measure: string; value: string; cpu: string; target: string }[] = [];

async function measureCli(label: string, args: string[], baseline: number, baselineCpu: number, target: string) {
  const times: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const r = await timed(process.execPath, [bin, ...args]);
    if (r.code !== 0) {
      results.push({ measure: label, value: `n/a (exit ${r.code})`, cpu: '', target });
      return;
    }
    times.push(r.ms);
    cpu.push(await cpuTimed(process.execPath, [bin, ...args]));
  }
  const m = median(times);
  const c = median(cpu);
  results.push({
    measure: label,
    value: `${(m / 1000).toFixed(3)} s (${(m / baseline).toFixed(1)}x node -e 0)`,
    cpu: `${(c / 1000).toFixed(3)} s (${(c / baselineCpu).toFixed(1)}x)`,
    target,
  });
}

console.error(`bench:cli in ${root}; data dir ${dataDir}; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
const first = await startDaemon();
console.error(`first start (initdb, migrations): ${(first.ms / 1000).toFixed(1)} s`);
try {
  for (let i = 0; i < 5; i++) {
    const r = await timed(process.execPath, [
      bin, 'sender', 'add', '--workspace', 'default', '--email', `s${i}@example.com`, '--name', `S${i}`,
      '--smtp', `smtp://s${i}%40example.com:pw@127.0.0.1:2525`, '--json',
    ]);
    if (r.code !== 0) throw new Error(`sender add exited with ${r.code}`);
  }

  const base: number[] = [];
  const baseCpu: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    base.push((await timed(process.execPath, ['-e', '0'])).ms);
    baseCpu.push(await cpuTimed(process.execPath, ['-e', '0']));
  }
  const baseline = median(base);
  const baselineCpu = median(baseCpu);
  results.push({ measure: 'node -e 0 (baseline)', value: `${(baseline / 1000).toFixed(3)} s`, cpu: `${(baselineCpu / 1000).toFixed(3)} s`, target: '' });
  await measureCli('mailgate --version', ['--version'], baseline, baselineCpu, '< 0.4 s');
  await measureCli('mailgate --help', ['--help'], baseline, baselineCpu, '');
  await measureCli('mailgate sender list --json (5 senders, daemon running)', ['sender', 'list', '--json'], baseline, baselineCpu, '< 0.4 s');
  await measureCli('mailgate followup-rule list --workspace default --json', ['followup-rule', 'list', '--workspace', 'default', '--json'], baseline, baselineCpu, '');
} finally {
  await stopDaemon(first.daemon);
}

const restarts: number[] = [];
for (let i = 0; i < RESTARTS; i++) {
  const r = await startDaemon();
  restarts.push(r.ms);
  await stopDaemon(r.daemon);
}
results.push({
  measure: `warm restart: npm start to /readyz 200 (median of ${RESTARTS}; ${restarts.map((t) => (t / 1000).toFixed(2)).join(', ')} s)`,
  value: `${(median(restarts) / 1000).toFixed(2)} s`,
  cpu: '',
  target: '< 3 s',
});

rmSync(dataDir, { recursive: true, force: true });
console.log(`| measure (median of ${RUNS} unless said) | wall time | CPU time (user+sys) | target (wall, idle machine) |\n|---|---|---|---|`);
for (const r of results) console.log(`| ${r.measure} | ${r.value} | ${r.cpu} | ${r.target} |`);
console.log(`load average after: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
