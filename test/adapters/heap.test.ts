import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { HEAP_GROWING_PERCENT, applyHeapPolicy } from '../../src/adapters/heap.ts';

// A process that applies the policy (or not) and then allocates as a sending worker does: batches
// of objects kept alive across a few scavenges (promoted), then dropped. It prints how many full
// collections ran and its peak RSS. The allocation is the same in every run; only V8's limit
// for the next full collection differs.
const CHILD = (heapModule: string) => `
import { PerformanceObserver, constants } from 'node:perf_hooks';
const { applyHeapPolicy } = await import(${JSON.stringify(heapModule)});
const applied = process.env.APPLY === '1' ? applyHeapPolicy() : null;
let full = 0;
new PerformanceObserver((list) => { for (const e of list.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) full++; }).observe({ entryTypes: ['gc'] });
const held = [];
for (let i = 0; i < 400; i++) {
  held.push(Array.from({ length: 2000 }, (_, k) => ({ text: 'x'.repeat(200) + i + ':' + k, k })));
  if (held.length > 20) held.shift();
  await new Promise((r) => setImmediate(r));
}
await new Promise((r) => setTimeout(r, 50));
// This process's own peak (VmHWM, kept per address space): getrusage's maxRSS survives exec,
// so a child of a large test process reported the parent's RSS at the fork (347 MB both ways).
const { readFileSync } = await import('node:fs');
const peakMb = Number(/VmHWM:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
process.stdout.write(JSON.stringify({ applied, full, peakMb }));
`;

describe('heap policy (src/adapters/heap.ts)', function () {
  this.timeout(60_000);
  let dir: string;
  let script: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-heap-'));
    script = path.join(dir, 'child.mjs');
    writeFileSync(script, CHILD(pathToFileURL(path.resolve('src/adapters/heap.ts')).href));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  const run = (apply: boolean, nodeArgs: string[] = []) =>
    JSON.parse(execFileSync(process.execPath, [...nodeArgs, '--import', 'tsx', script], { env: { ...process.env, APPLY: apply ? '1' : '0' }, encoding: 'utf8' })) as {
      applied: number | null;
      full: number;
      peakMb: number;
    };

  it('applied at run time, the old generation is collected sooner: more full collections and a lower peak for the same allocations', () => {
    const plain = run(false);
    const policy = run(true);
    assert.equal(policy.applied, HEAP_GROWING_PERCENT);
    // At least twice as many (measured: 12-14 against 4-5), so a run without the policy cannot
    // pass on one collection more or less.
    assert.ok(policy.full >= 2 * plain.full, `full collections: ${policy.full} with the policy, ${plain.full} without`);
    assert.ok(policy.peakMb < plain.peakMb, `peak RSS: ${policy.peakMb} MB with the policy, ${plain.peakMb} MB without`);
  });

  it("leaves an operator's own --heap-growing-percent alone", () => {
    assert.equal(applyHeapPolicy(['--heap-growing-percent=80']), null);
    assert.equal(applyHeapPolicy(['--heap_growing_percent', '80']), null);
    const theirs = run(true, ['--heap-growing-percent=300']);
    assert.equal(theirs.applied, null);
    const policy = run(true);
    assert.ok(2 * theirs.full <= policy.full, `full collections: ${theirs.full} with the operator's 300%, ${policy.full} with ours`);
  });
});
