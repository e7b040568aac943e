import assert from 'node:assert/strict';
import pg from 'pg';
import { createTestDatabase } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { freezingProxy } from '../support/freezing-proxy.ts';
import { WorkerRegistry } from '../../src/modules/workers/registry.ts';
import { systemClock } from '../../src/adapters/clock.ts';
import { createLogger } from '../../src/adapters/logger.ts';
import { migrate, openOrm } from '../../src/db/orm.ts';

// Found by a review (2026-11-29): the heartbeat's queries had no time limit, so a connection
// frozen under it hung the beat for as long as TCP took to give up (minutes); the others took
// this live worker for dead and handed its work away while it kept sending.
describe('the worker heartbeat on a frozen connection', function () {
  this.timeout(60_000);
  let database: { url: string; drop(): Promise<void> };
  let db: pg.Client;
  before(async () => {
    database = await createTestDatabase();
    const orm = await openOrm(database.url, 1);
    await migrate(orm, database.url);
    await orm.close(true);
    db = new pg.Client({ connectionString: database.url });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await database.drop();
  });

  it('gives up on it within a third of the dead-after time and beats on a new connection', async () => {
    const target = new URL(database.url);
    const proxy = await freezingProxy(target);
    const url = new URL(database.url);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const registry = new WorkerRegistry(url.toString(), systemClock, createLogger('silent'), { role: 'worker', heartbeatMs: 200, deadAfterMs: 3_000 });
    try {
      await registry.start();
      const beatAfter = async (t: Date) => (await db.query(`select 1 from workers where id = $1 and heartbeat_at > $2`, [registry.id, t])).rows.length > 0;
      await waitFor('a first beat', () => beatAfter(new Date(0)));
      const { rows: [{ now: frozenAt }] } = await db.query('select now()');
      proxy.freeze();
      // Before the dead-after time (3 s) has passed since the freeze: the others never see it dead.
      await waitFor('a beat on a new connection', () => beatAfter(frozenAt), 2_900);
    } finally {
      await registry.stop();
      await proxy.close();
    }
  });
});
