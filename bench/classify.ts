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
import type { ClassifierInput, ReplyClassifier } from '../src/modules/inbound/classifier.ts';
import * as classifiers from '../src/modules/inbound/classifier.ts';
import { median } from './results.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIR = path.join(ROOT, 'fixtures/mail/replies/holdout');
const N = Number(process.env.BENCH_CLASSIFY ?? 4100);
const RUNS = 3;
const files = readdirSync(DIR).flatMap((lang) => readdirSync(path.join(DIR, lang)).map((f) => path.join(DIR, lang, f))).sort();
const input = Array.from({ length: N }, (_, i) => files[i % files.length]);

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
const inprocCpu: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) await analyzeMessage(raws[i % raws.length]);
  const c = process.cpuUsage(c0);
  inproc.push(N / ((performance.now() - t0) / 1000));
  inprocCpu.push(N / ((c.user + c.system) / 1e6));
}
// The classifier stage alone, on the inputs analyzeMessage hands it: what a classifier change
// costs, apart from MIME parsing and quote stripping. CPU time, so other load on the machine
// matters less than for the wall-clock figures above.
const inputs: ClassifierInput[] = [];
await Promise.all(raws.map((raw) => analyzeMessage(raw, { classifier: { classify: async (i) => (inputs.push(i), { classification: 'interested', decidedBy: 'x', confidence: 0 }) } })));
const stage: Array<[string, ReplyClassifier]> = [['rules', new classifiers.RuleClassifier()]];
if ('HybridClassifier' in classifiers) {
  const { default: model } = await import('../src/modules/inbound/reply-model.json', { with: { type: 'json' } });
  stage.push(['rules+model', new (classifiers as any).HybridClassifier(model)]);
}
const stageLines: string[] = [];
for (const [name, c] of stage) {
  const per: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) await c.classify(inputs[i % inputs.length]);
    const u = process.cpuUsage(c0);
    per.push(N / ((u.user + u.system) / 1e6));
  }
  stageLines.push(`classifier stage only (${name}), median of ${RUNS}: ${median(per).toFixed(0)} messages per CPU-second`);
}
console.log(`mailgate classify --json, ${N} files (${files.length} held-out replies cycled), median of ${RUNS}: ${median(cli).toFixed(0)} messages/s (runs: ${cli.map((x) => x.toFixed(0)).join(', ')})`);
console.log(`analyzeMessage in-process, same messages, median of ${RUNS}: ${median(inproc).toFixed(0)} messages/s (runs: ${inproc.map((x) => x.toFixed(0)).join(', ')}); ${median(inprocCpu).toFixed(0)} messages per CPU-second`);
for (const l of stageLines) console.log(l);
