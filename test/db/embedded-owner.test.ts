import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/adapters/logger.ts';
import { openDatabase } from '../../src/db/database.ts';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { sql } from '../../src/db/sql.ts';

// The embedded cluster is stopped by the last mailgate process to leave it (found by a review,
// 2026-11-29): a CLI command that had started it stopped it on exit under a daemon that had
// attached meanwhile, and a daemon that attached to a CLI's cluster never stopped it.
describe('the embedded PostgreSQL: the last process to leave stops it', function () {
  this.timeout(120_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-embedded-owner-'));
  chmodSync(dir, 0o755);
  after(async () => {
    await EmbeddedDatabase.stopRunning(path.join(dir, 'data'));
    rmSync(dir, { recursive: true, force: true });
  });

  it('the starter leaves first: the cluster stays for the one attached, which stops it when it leaves', async () => {
    const config = loadConfig({ MAILGATE_DATA_DIR: path.join(dir, 'data'), DATABASE_URL: '', LOG_LEVEL: 'silent' });
    const log = createLogger('silent');
    const starter = await openDatabase(config, log, { poolMax: 1 });
    assert.ok(starter.embedded, 'this one started the cluster');
    const attached = await openDatabase(config, log, { poolMax: 1 });
    assert.equal(attached.embedded, undefined, 'this one attached to it');
    await starter.close();
    assert.ok(EmbeddedDatabase.runningUrl(config.dataDir), 'still running for the attached process');
    const fresh = await openDatabase(config, log, { poolMax: 1, migrate: false });
    assert.deepEqual(await sql(fresh.orm.em.fork(), 'select 1 as one'), [{ one: 1 }]);
    await fresh.close();
    assert.ok(EmbeddedDatabase.runningUrl(config.dataDir), 'the attached process is still there');
    await attached.close();
    assert.equal(EmbeddedDatabase.runningUrl(config.dataDir), undefined, 'the last one out stopped it');
  });
});
