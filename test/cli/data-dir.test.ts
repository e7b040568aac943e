import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCliCaptured } from '../support/cli.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';

// MAILGATE_DATA_DIR defaults to ./data of the working directory. A list command run from another
// directory created a new, empty embedded PostgreSQL there (initdb, migrations) and answered
// `{"data":[]}`, as if the daemon's database were empty, and `key create --workspace default`
// made one and then said "workspace default not found" (found by a review, 2026-11-29). Now
// every command refuses, naming the directory, but `workspace create` (a fresh install may start
// with it), which creates the database and says on stderr that it did.
describe('mailgate CLI: a data dir with no database', function () {
  this.timeout(120_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-cli-datadir-'));
  chmodSync(dir, 0o755);
  const dataDir = path.join(dir, 'data');
  const env = { DATABASE_URL: '', MAILGATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  after(async () => {
    await EmbeddedDatabase.stopRunning(dataDir);
    rmSync(dir, { recursive: true, force: true });
  });

  it('a list, or a command that needs an existing workspace or id, refuses in one line naming the directory, and creates nothing', async () => {
    for (const argv of [['workspace', 'list', '--json'], ['sender', 'list'], ['key', 'create', '--workspace', 'default', '--role', 'admin', '--json'], ['sender', 'pause', 'snd_x']]) {
      const r = await runCliCaptured(env, argv);
      assert.equal(r.code, 1, r.err);
      assert.equal(r.out, '');
      assert.equal(r.err.trim().split('\n').length, 1, r.err);
      assert.match(r.err, new RegExp(`^error: no mailgate database in ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/pg .*MAILGATE_DATA_DIR`));
      assert.equal(existsSync(path.join(dataDir, 'pg')), false, argv.join(' '));
    }
  });

  it('workspace create creates the database and says so on stderr; then the others work', async () => {
    const r = await runCliCaptured(env, ['workspace', 'create', '--name', 'w', '--json']);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.json.name, 'w');
    assert.match(r.err, new RegExp(`^warning: created a new, empty mailgate database in ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/pg`));
    const list = await runCliCaptured(env, ['workspace', 'list', '--json']);
    assert.equal(list.code, 0, list.err);
    assert.deepEqual(list.json.data.map((w: { name: string }) => w.name), ['w']);
    assert.equal(list.err, '');
  });
});
