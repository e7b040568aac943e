import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { withDatabase } from '../support/global.ts';
import { openOrm, type MikroORM } from '../../src/db/orm.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, databaseUnreachable } from '../../src/db/sql.ts';
import net from 'node:net';
import { toIso } from '../../src/shared/time.ts';

/**
 * db/sql.ts: outside a transaction a statement goes straight to a pg connection of the ORM's
 * pool; inside one, through knex on the transaction's connection. Both must see the same
 * session and refuse the same binding mistakes.
 */
describe('sql(): the direct path and the transaction path', () => {
  let orm: MikroORM;
  let admin: pg.Client;
  const name = `mgt_${process.pid}_sql_${randomBytes(3).toString('hex')}`;

  before(async () => {
    admin = new pg.Client({ connectionString: process.env.MAILGATE_TEST_ADMIN_URL });
    await admin.connect();
    await admin.query(`create database ${name}`);
    // A server or database in another time zone: the ORM's sessions must still be UTC.
    await admin.query(`alter database ${name} set timezone = 'America/New_York'`);
    orm = await openOrm(withDatabase(process.env.MAILGATE_TEST_ADMIN_URL!, name), 3);
  });
  after(async () => {
    await orm.close(true);
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  it('every session runs in UTC, so timestamps come back as the UTC text toIso rewrites', async () => {
    const direct = await sql<{ tz: string; t: string }>(orm.em.fork(), `select current_setting('TimeZone') as tz, timestamptz '2026-04-01 04:00:00.5-04' as t`);
    assert.deepEqual(direct, [{ tz: 'UTC', t: '2026-04-01 08:00:00.5+00' }]);
    assert.equal(toIso(direct[0].t), '2026-04-01T08:00:00.500Z');
    const inTx = await orm.em.fork().transactional((tx) => sql<{ tz: string }>(tx, `select current_setting('TimeZone') as tz`));
    assert.deepEqual(inTx, [{ tz: 'UTC' }]);
  });

  it('binds arrays, dates and nulls natively, and a named statement runs again on the same connections', async () => {
    for (let i = 0; i < 8; i++) {
      const [row] = await sql<{ n: number; d: string; z: null }>(
        orm.em.fork(),
        `select cardinality(?::text[]) as n, ?::timestamptz as d, ?::text as z`,
        [['a', 'b', String(i)], new Date('2026-04-01T08:00:00.123Z'), null],
        { name: 'mailgate_test_sql_v1' },
      );
      assert.deepEqual(row, { n: 3, d: '2026-04-01 08:00:00.123+00', z: null });
    }
  });

  it('refuses a text whose ? marks and values differ in number, and undefined values, before sending anything', async () => {
    const em = orm.em.fork();
    await assert.rejects(sql(em, `select ?::int as a, ?::int as b`, [1]), /2 placeholders but 1 values/);
    await assert.rejects(sql(em, `select '{"a":1}'::jsonb ? 'a' as has, ?::int as b`, [1]), /2 placeholders but 1 values/);
    await assert.rejects(sql(em, `select ?::int as a`, [undefined]), /undefined binding at position 1/);
    await assert.rejects(sql(em, `select cardinality(?::text[]) as n`, [['a', undefined]]), /undefined binding at position 1/);
    // The transaction path (knex) refuses undefined too.
    await assert.rejects(orm.em.fork().transactional((tx) => sql(tx, `select ?::int as a`, [undefined])), /[Uu]ndefined binding/);
  });

  it('inside a transaction a statement runs on its connection: it sees the uncommitted write, a rollback undoes it, and a finished transaction refuses', async () => {
    await sql(orm.em.fork(), `create table sql_tx_probe (n int)`);
    let kept: { tx: EntityManager } | undefined;
    await assert.rejects(
      orm.em.fork().transactional(async (tx) => {
        await sql(tx, `insert into sql_tx_probe values (?)`, [1]);
        assert.deepEqual(await sql(tx, `select n from sql_tx_probe`), [{ n: 1 }]);
        // Another connection does not see it yet.
        assert.deepEqual(await sql(orm.em.fork(), `select n from sql_tx_probe`), []);
        kept = { tx };
        throw new Error('roll back');
      }),
      /roll back/,
    );
    assert.deepEqual(await sql(orm.em.fork(), `select n from sql_tx_probe`), []);
    await assert.rejects(sql(kept!.tx, `select 1 as one`), /already completed/);
    await sql(orm.em.fork(), `drop table sql_tx_probe`);
  });

  it("a failing statement keeps PostgreSQL's error code and carries its text (not its values)", async () => {
    await assert.rejects(sql(orm.em.fork(), `select 1 / ?::int as x`, [0]), (err: Error & { code?: string; sql?: string }) => {
      assert.equal(err.code, '22012');
      assert.equal(err.sql, `select 1 / ?::int as x`);
      return true;
    });
    // The pool is still usable afterwards.
    assert.deepEqual(await sql(orm.em.fork(), `select 1 as one`), [{ one: 1 }]);
  });

  it("node-postgres's words for a connection that is gone are the database unreachable: a client cut or closed under a query, a pool's connect timing out", async () => {
    const url = withDatabase(process.env.MAILGATE_TEST_ADMIN_URL!, name);
    // Cut by the server: the next query on that client is refused without reaching it.
    const cut = new pg.Client({ connectionString: url });
    await cut.connect();
    const gone = new Promise((r) => cut.on('error', r));
    const { rows: [{ pid }] } = await cut.query<{ pid: number }>('select pg_backend_pid() as pid');
    await admin.query('select pg_terminate_backend($1)', [pid]);
    assert.ok(databaseUnreachable(await gone), 'the cut itself');
    const afterCut = await cut.query('select 1').then(() => null, (e: unknown) => e);
    assert.match(String(afterCut), /not queryable/);
    assert.ok(databaseUnreachable(afterCut), String(afterCut));
    // Closed: as a pool's client ended under a query.
    const closed = new pg.Client({ connectionString: url });
    await closed.connect();
    await closed.end();
    const afterEnd = await closed.query('select 1').then(() => null, (e: unknown) => e);
    assert.match(String(afterEnd), /not queryable/);
    assert.ok(databaseUnreachable(afterEnd), String(afterEnd));
    // A server that takes the connection and never answers: the pool's connect times out.
    const mute = net.createServer(() => {});
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
    const pool = new pg.Pool({ host: '127.0.0.1', port: (mute.address() as net.AddressInfo).port, user: 'x', database: 'x', connectionTimeoutMillis: 200 });
    try {
      const timedOut = await pool.query('select 1').then(() => null, (e: unknown) => e);
      assert.match(String(timedOut), /connection timeout/);
      assert.ok(databaseUnreachable(timedOut), String(timedOut));
    } finally {
      await pool.end();
      mute.close();
    }
    // A statement of ours that fails is not.
    assert.equal(databaseUnreachable(new Error('Client has no idea')), false);
  });
});
