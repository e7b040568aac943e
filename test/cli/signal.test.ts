import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';

const run = promisify(execFile);

// Ctrl-C during a command that started the embedded PostgreSQL (found by a review,
// 2026-11-29): the server runs detached, and the command ended without stopping it, so it ran
// on with no owner. The command now closes what it opened, then exits 130.
describe('mailgate CLI: Ctrl-C while a command holds the embedded PostgreSQL', function () {
  this.timeout(120_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-cli-signal-'));
  chmodSync(dir, 0o755);
  const dataDir = path.join(dir, 'data');
  const connected: net.Socket[] = [];
  let reached: () => void;
  const probeReached = new Promise<void>((r) => (reached = r));
  const silent = net.createServer((s) => {
    connected.push(s);
    reached();
  });
  const env = { ...process.env, DATABASE_URL: '', MAILGATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  before(() => new Promise<void>((r) => silent.listen(0, '127.0.0.1', r)));
  after(async () => {
    for (const s of connected) s.destroy();
    await new Promise((r) => silent.close(r));
    await EmbeddedDatabase.stopRunning(dataDir);
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops the cluster it started and exits 130', async () => {
    const cli = (...argv: string[]) => run('node', ['bin/mailgate.js', ...argv], { env });
    await cli('workspace', 'create', '--name', 'w', '--json');
    const port = (silent.address() as net.AddressInfo).port;
    const added = JSON.parse((await cli('sender', 'add', '--workspace', 'w', '--email', 'a@x.example', '--name', 'A', '--smtp', `smtp://a:b@127.0.0.1:${port}`, '--json')).stdout);
    assert.equal(EmbeddedDatabase.runningUrl(dataDir), undefined, 'each command stopped the cluster it started');
    // `sender test` waits for an SMTP greeting that never comes, holding the cluster it started.
    const proc = spawn('node', ['bin/mailgate.js', 'sender', 'test', added.id], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    proc.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    await probeReached;
    assert.ok(EmbeddedDatabase.runningUrl(dataDir), 'the command started the cluster');
    proc.kill('SIGINT');
    assert.equal(await exited, 130, err);
    assert.equal(EmbeddedDatabase.runningUrl(dataDir), undefined, 'the cluster was stopped with the command');
  });
});
