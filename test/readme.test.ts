// The README's walkthrough, run as written: its ```sh blocks are read from README.md (never copied
// here) and run by bash against a real daemon and a real dev sink, so the README cannot rot.
//
// The conventions (README.md, "A walkthrough on your machine"):
// - every ```sh block between that heading and the next `## ` heading belongs to the walkthrough;
// - `<!-- walkthrough:background ready="TEXT" -->` before a block: a long-running command (a
//   terminal of its own); it is started and the next block waits until its output shows TEXT;
// - `<!-- walkthrough:settings -->` before a block: `NAME=value` lines with the README's defaults;
//   the test does not run it but provides the same names through the environment (ports it
//   bound on 0, its temp data dir), and maps each README value to its own in expected output;
// - every other block runs, in order, in one bash with `set -euo pipefail`, and each line it
//   prints must match its `# -> ` lines, in order and all of them. An expected line that is JSON
//   is compared structurally (the same keys, the same array lengths); `...` inside an expected
//   string or text line matches anything. A background block's `# -> ` lines must each appear in
//   its output by the end, in any order (deliveries and sends race).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase } from './support/harness.ts';
import { waitFor } from './support/wait.ts';
import { DEV_SINK_DEFAULTS } from '../src/cli/dev-sink.ts';

const repo = path.resolve(import.meta.dirname, '..');
const HEADING = '## A walkthrough on your machine';

interface Block {
  kind: 'background' | 'settings' | 'run';
  ready?: string;
  code: string;
  expected: string[];
  /** 1-based line of the opening fence in README.md, for messages. */
  line: number;
}

export function walkthroughBlocks(readme: string): Block[] {
  const lines = readme.split('\n');
  const from = lines.indexOf(HEADING);
  assert.ok(from >= 0, `README.md has no "${HEADING}" section`);
  const blocks: Block[] = [];
  let marker: { kind: Block['kind']; ready?: string } | undefined;
  for (let i = from + 1; i < lines.length && !lines[i].startsWith('## '); i++) {
    const m = /^<!-- walkthrough:(background|settings)(?: ready="([^"]+)")? -->$/.exec(lines[i]);
    if (m) {
      marker = { kind: m[1] as Block['kind'], ready: m[2] };
      continue;
    }
    if (lines[i] !== '```sh') continue;
    const start = i;
    const code: string[] = [];
    for (i++; lines[i] !== '```'; i++) {
      assert.ok(i < lines.length, `README.md:${start + 1}: unclosed code block`);
      code.push(lines[i]);
    }
    const kind = marker?.kind ?? 'run';
    if (kind === 'background') assert.ok(marker?.ready, `README.md:${start + 1}: a background block needs ready="..."`);
    blocks.push({ kind, ready: marker?.ready, code: code.join('\n') + '\n', expected: code.flatMap((l) => /^# -> (.*)$/.exec(l)?.[1] ?? []), line: start + 1 });
    marker = undefined;
  }
  return blocks;
}

/** `...` in a string matches any run of characters; the rest literally. */
function pattern(expected: string): RegExp {
  return new RegExp('^' + expected.split('...').map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$', 's');
}

function sameShape(expected: unknown, actual: unknown, at: string): string | null {
  if (typeof expected === 'string') return typeof actual === 'string' && pattern(expected).test(actual) ? null : `${at}: ${JSON.stringify(actual)} is not ${JSON.stringify(expected)}`;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return `${at}: ${JSON.stringify(actual)} is not an array of ${expected.length}`;
    for (let i = 0; i < expected.length; i++) {
      const d = sameShape(expected[i], actual[i], `${at}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (expected && typeof expected === 'object') {
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return `${at}: ${JSON.stringify(actual)} is not an object`;
    const [ek, ak] = [Object.keys(expected).sort(), Object.keys(actual).sort()];
    if (ek.join() !== ak.join()) return `${at}: keys ${ak.join(',')} are not ${ek.join(',')}`;
    for (const k of ek) {
      const d = sameShape((expected as Record<string, unknown>)[k], (actual as Record<string, unknown>)[k], `${at}.${k}`);
      if (d) return d;
    }
    return null;
  }
  return Object.is(expected, actual) ? null : `${at}: ${JSON.stringify(actual)} is not ${JSON.stringify(expected)}`;
}

/** null when the printed line is what the README shows, else why not. */
export function lineDiffers(expected: string, actual: string): string | null {
  let want: unknown;
  try {
    want = JSON.parse(expected);
  } catch {
    return pattern(expected).test(actual) ? null : `${JSON.stringify(actual)} does not match ${JSON.stringify(expected)}`;
  }
  let got: unknown;
  try {
    got = JSON.parse(actual);
  } catch {
    return `${JSON.stringify(actual)} is not the JSON ${expected}`;
  }
  return sameShape(want, got, '$');
}

interface Background {
  block: Block;
  proc: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function startBackground(block: Block, env: NodeJS.ProcessEnv): Background {
  // Its own process group, so that the stop reaches npm, the shell and node alike.
  const proc = spawn('bash', ['-c', `set -euo pipefail\n${block.code}`], { cwd: repo, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (c) => (out += c));
  proc.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { block, proc, output: () => out, exited };
}

async function stop(bg: Background) {
  if (bg.proc.exitCode !== null || bg.proc.signalCode !== null) return;
  try {
    process.kill(-bg.proc.pid!, 'SIGTERM');
  } catch {
    // Already gone.
  }
  await bg.exited;
}

describe('README walkthrough (its commands, run as written)', function () {
  this.timeout(300_000);

  const readme = readFileSync(path.join(repo, 'README.md'), 'utf8');
  const blocks = walkthroughBlocks(readme);
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let dataDir: string;
  const running: Background[] = [];

  before(async () => {
    db = await createTestDatabase();
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-readme-'));
  });
  after(async () => {
    for (const bg of running.reverse()) await stop(bg);
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('the matcher: JSON compared by shape with ... masks, text by pattern', () => {
    assert.equal(lineDiffers('{"id":"snd_...","n":1}', '{"n":1,"id":"snd_3x9"}'), null);
    assert.match(lineDiffers('{"id":"snd_..."}', '{"id":"pool_1"}')!, /\$\.id/);
    assert.match(lineDiffers('{"id":"snd_..."}', '{"id":"snd_1","extra":true}')!, /keys/);
    assert.match(lineDiffers('[]', '[1]')!, /array/);
    assert.equal(lineDiffers('3.1.0', '3.1.0'), null);
    assert.equal(lineDiffers('webhook  message.sent evt_...  signed yes', 'webhook  message.sent evt_9  signed yes'), null);
    assert.notEqual(lineDiffers('signature verified', 'signature verified twice'), null);
  });

  it('runs every block of the walkthrough against a real daemon and dev sink, each printing what the README shows', async () => {
    assert.ok(blocks.some((b) => b.kind === 'run') && blocks.some((b) => b.kind === 'background'), 'the walkthrough has blocks to run');
    const settingsBlock = blocks.find((b) => b.kind === 'settings');
    assert.ok(settingsBlock, 'the walkthrough has a settings block');
    const readmeSettings: Record<string, string> = Object.fromEntries(
      settingsBlock.code
        .split('\n')
        .filter((l) => l.trim() && !l.startsWith('#'))
        .map((l) => {
          const m = /^([A-Z_]+)=(\S+)/.exec(l);
          assert.ok(m, `README.md:${settingsBlock.line}: not a NAME=value line: ${l}`);
          return [m[1], m[2]];
        }),
    );
    // The README's values are the real defaults: a reader who sets nothing gets them.
    assert.deepEqual(readmeSettings, {
      API: 'http://127.0.0.1:8080',
      SINK_SMTP: `127.0.0.1:${DEV_SINK_DEFAULTS.smtpPort}`,
      SINK_HOOKS: `https://127.0.0.1:${DEV_SINK_DEFAULTS.httpsPort}`,
      SINK_DIR: 'data/dev-sink',
    });

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: db.url,
      MAILGATE_DATA_DIR: dataDir,
      PORT: '0',
      MAILGATE_DEV_SINK_SMTP_PORT: '0',
      MAILGATE_DEV_SINK_HTTPS_PORT: '0',
      LOG_LEVEL: 'info',
    };
    for (const block of blocks.filter((b) => b.kind === 'background')) {
      const bg = startBackground(block, env);
      running.push(bg);
      await Promise.race([
        waitFor(`README.md:${block.line} to print "${block.ready}"`, async () => bg.output().includes(block.ready!), 120_000),
        bg.exited.then((code) => assert.fail(`README.md:${block.line} exited with ${code}:\n${bg.output()}`)),
      ]);
    }
    const all = running.map((bg) => bg.output()).join('\n');
    const sink = /SMTP on 127\.0\.0\.1:(\d+) .* webhooks on https:\/\/127\.0\.0\.1:(\d+)\//.exec(all);
    const daemon = /"port":(\d+)[^\n]*"msg":"mailgate is up"/.exec(all);
    assert.ok(sink && daemon, all);
    const settings: Record<string, string> = {
      API: `http://127.0.0.1:${daemon[1]}`,
      SINK_SMTP: `127.0.0.1:${sink[1]}`,
      SINK_HOOKS: `https://127.0.0.1:${sink[2]}`,
      SINK_DIR: path.join(dataDir, 'dev-sink'),
    };
    // Expected lines show the README's values; the run used these.
    const shown: Record<string, string> = readmeSettings;
    const localize = (line: string) =>
      Object.keys(shown)
        .sort((a, b) => shown[b].length - shown[a].length)
        .reduce((l, k) => l.split(shown[k]).join(settings[k]), line);

    const steps = blocks.filter((b) => b.kind === 'run');
    const script = ['set -euo pipefail', ...steps.flatMap((b, i) => [`echo '@@walkthrough-block ${i}@@'`, b.code.trimEnd()])].join('\n') + '\n';
    const shell = spawn('bash', ['-c', script], { cwd: repo, env: { ...env, ...settings }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    shell.stdout!.on('data', (c) => (stdout += c));
    shell.stderr!.on('data', (c) => (stderr += c));
    const code = await new Promise<number | null>((r) => shell.once('exit', r));
    const printed = new Map<number, string[]>();
    let current = -1;
    for (const l of stdout.split('\n')) {
      const m = /^@@walkthrough-block (\d+)@@$/.exec(l);
      if (m) printed.set((current = Number(m[1])), []);
      else if (l !== '' && current >= 0) printed.get(current)!.push(l);
    }
    assert.equal(code, 0, `README.md:${steps[current]?.line} failed (exit ${code}):\n${stderr.slice(-3000)}`);
    steps.forEach((b, i) => {
      const got = printed.get(i) ?? [];
      const want = b.expected.map(localize);
      const where = `README.md:${b.line}`;
      assert.equal(got.length, want.length, `${where} printed ${got.length} lines, the README shows ${want.length}:\n${got.join('\n')}`);
      want.forEach((w, j) => {
        const d = lineDiffers(w, got[j]);
        assert.equal(d, null, `${where}, line ${j + 1} of its output: ${d}\n-- it printed --\n${got.join('\n')}`);
      });
    });

    for (const bg of running) {
      const want = bg.block.expected.map(localize);
      await waitFor(`README.md:${bg.block.line} to print its lines`, async () => {
        const out = bg.output().split('\n');
        const used = new Set<number>();
        return want.every((w) => {
          const k = out.findIndex((l, idx) => !used.has(idx) && lineDiffers(w, l) === null);
          return k >= 0 && used.add(k);
        });
      }, 10_000).catch(() => assert.fail(`README.md:${bg.block.line} did not print what the README shows:\n${want.join('\n')}\n-- it printed --\n${bg.output()}`));
    }
  });
});
