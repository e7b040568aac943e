// Throughput of `mailgate classify` (issue 19): the compiled-free CLI as an operator runs it, one
// process over the 205 held-out replies (fixtures/mail/replies/holdout) cycled to BENCH_CLASSIFY
// files, so process start-up is included and amortised; plus the same analysis in-process.
// The input is fixed so figures before and after a classifier change compare.
// Run: npm run bench:classify
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { analyzeMessage } from '../src/modules/inbound/analyze.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIR = path.join(ROOT, 'fixtures/mail/replies/holdout');
const N = Number(process.env.BENCH_CLASSIFY ?? 4100);
const RUNS = 3;
const files = readdirSync(DIR).flatMap((lang) => readdirSync(path.join(DIR, lang)).map((f) => path.join(DIR, lang, f))).sort();
const input = Array.from({ length: N }, (_, i) => files[i % files.length]);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cli: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const t0 = performance.now();
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(ROOT, 'bin/mailgate.js'), 'classify', '--json', ...input], { maxBuffer: 256 * 1024 * 1024 });
  const elapsed = (performance.now() - t0) / 1000;
  if ((JSON.parse(stdout) as unknown[]).length !== N) throw new Error('classify printed the wrong number of records');
  cli.push(N / elapsed);
}
const raws = files.map((f) => readFileSync(f));
const inproc: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await analyzeMessage(raws[i % raws.length]);
  inproc.push(N / ((performance.now() - t0) / 1000));
}
console.log(`mailgate classify --json, ${N} files (${files.length} held-out replies cycled), median of ${RUNS}: ${median(cli).toFixed(0)} messages/s (runs: ${cli.map((x) => x.toFixed(0)).join(', ')})`);
console.log(`analyzeMessage in-process, same messages, median of ${RUNS}: ${median(inproc).toFixed(0)} messages/s (runs: ${inproc.map((x) => x.toFixed(0)).join(', ')})`);
