// deploy/mailgate.service checked by systemd itself. `systemd-analyze verify` exits 0 on many
// problems (unknown keys, bad values are warnings), so anything it prints fails the test.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { aptInstall } from './support/apt.ts';

const run = promisify(execFile);
const unit = path.join(process.cwd(), 'deploy', 'mailgate.service');

/** systemd-analyze, installed from Debian's `systemd` package when missing and we are root. */
function systemdAnalyze(): string | null {
  for (const p of ['/usr/bin/systemd-analyze', '/bin/systemd-analyze']) if (existsSync(p)) return p;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) return null;
  aptInstall('/usr/bin/systemd-analyze', ['systemd']);
  return existsSync('/usr/bin/systemd-analyze') ? '/usr/bin/systemd-analyze' : null;
}

async function verify(analyze: string, file: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(analyze, ['verify', file]);
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, output: e.stdout + e.stderr };
  }
}

describe('deploy/mailgate.service', function () {
  this.timeout(120_000);
  let analyze: string | null = null;
  let dir: string;

  before(function () {
    analyze = systemdAnalyze();
    if (!analyze) {
      console.log('      skipped: systemd-analyze is not installed and cannot be (not root or no apt-get)');
      this.skip();
    }
    dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-unit-'));
  });
  after(() => dir && rmSync(dir, { recursive: true, force: true }));

  it('passes systemd-analyze verify without a single warning', async () => {
    const r = await verify(analyze!, unit);
    assert.deepEqual(r, { code: 0, output: '' });
  });

  it('(control) the same check reports a unit with a mistyped key', async () => {
    const broken = path.join(dir, 'mailgate.service');
    writeFileSync(broken, readFileSync(unit, 'utf8').replace('NoNewPrivileges=yes', 'NoNewPrivilege=yes'));
    const r = await verify(analyze!, broken);
    assert.match(r.output, /Unknown key name 'NoNewPrivilege'|Unknown key 'NoNewPrivilege'/);
  });

  it('gives the shutdown the drain time and stops only mailgate itself', () => {
    const text = readFileSync(unit, 'utf8');
    const drain = Number(/MAILGATE_SHUTDOWN_TIMEOUT=(\d+)s/.exec(text)?.[1]);
    const stop = Number(/^TimeoutStopSec=(\d+)s$/m.exec(text)?.[1]);
    assert.ok(drain > 0 && stop >= drain + 10, `TimeoutStopSec ${stop}s must exceed MAILGATE_SHUTDOWN_TIMEOUT ${drain}s with a margin`);
    assert.match(text, /^KillMode=mixed$/m);
    assert.match(text, /^ExecStart=node \/opt\/mailgate\/dist\/cli\/main\.js serve$/m);
  });
});
