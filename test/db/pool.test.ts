import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Knex } from '@mikro-orm/knex';
import { withDatabase } from '../support/global.ts';
import { waitFor } from '../support/wait.ts';
import { MikroORM } from '@mikro-orm/postgresql';
import { ormOptions } from '../../src/db/orm.ts';
import { sql } from '../../src/db/sql.ts';

/**
 * db/orm.ts: the ORM's pool keeps two connections open through a quiet spell (a new one made
 * the first request after a lull slow: docs/benchmarks.md, "Session 52"), with TCP keepalives
 * so that a kept connection does not go stale unseen. The pool's idle timeout (30 s) is
 * shortened here; the rest is the daemon's configuration.
 */
describe('the ORM pool through a quiet spell', () => {
  let admin: pg.Client;
  const name = `mgt_${process.pid}_pool_${randomBytes(3).toString('hex')}`;
  let url: string;

  before(async () => {
    admin = new pg.Client({ connectionString: process.env.MAILGATE_TEST_ADMIN_URL });
    await admin.connect();
    await admin.query(`create database ${name}`);
    url = withDatabase(process.env.MAILGATE_TEST_ADMIN_URL!, name);
  });
  after(async () => {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  /** The daemon's options with a pool that closes idle connections after 100 ms (30 s in the daemon). */
  async function open(min?: number): Promise<MikroORM> {
    const options = ormOptions(url, 10);
    return MikroORM.init({ ...options, pool: { ...options.pool, ...(min === undefined ? {} : { min }), idleTimeoutMillis: 100, reapIntervalMillis: 20 } });
  }
  const backend = async (orm: MikroORM) => (await sql<{ pid: number }>(orm.em.fork(), 'select pg_backend_pid() as pid'))[0].pid;
  /** Backends connected to this test's database, as the server counts them. */
  const connected = async () => (await admin.query<{ n: number }>('select count(*)::int as n from pg_stat_activity where datname = $1', [name])).rows[0].n;
  /** Four statements at once: four connections. */
  const busy = (orm: MikroORM) => Promise.all([1, 2, 3, 4].map(() => sql(orm.em.fork(), 'select pg_sleep(0.05)')));

  it('keeps two connections, the last used among them, once the others have been idle past the timeout', async () => {
    const orm = await open();
    try {
      await busy(orm);
      assert.equal(await connected(), 4);
      const warm = await backend(orm);
      await sleep(400);
      // A closed connection's backend leaves pg_stat_activity a moment later.
      await waitFor('the pool down to two connections', async () => (await connected()) === 2);
      assert.equal(await connected(), 2);
      assert.equal(await backend(orm), warm, 'the statement after the lull ran on the connection used last');
    } finally {
      await orm.close(true);
    }
  });

  it('(the same pool with no minimum closes them all, and the next statement has a new backend)', async () => {
    const orm = await open(0);
    try {
      await busy(orm);
      const warm = await backend(orm);
      await sleep(400);
      await waitFor('the pool down to no connection', async () => (await connected()) === 0);
      assert.equal(await connected(), 0);
      assert.notEqual(await backend(orm), warm);
    } finally {
      await orm.close(true);
    }
  });

  it('turns TCP keepalives on for its connections, after a minute idle', async () => {
    const orm = await open();
    try {
      const client = orm.em.getKnex().client as Knex.Client;
      const conn = (await client.acquireConnection()) as { connectionParameters: { keepalives: number; keepalives_idle: number } };
      try {
        assert.equal(conn.connectionParameters.keepalives, 1);
        assert.equal(conn.connectionParameters.keepalives_idle, 60);
      } finally {
        await client.releaseConnection(conn);
      }
    } finally {
      await orm.close(true);
    }
  });
});
