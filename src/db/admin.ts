import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from './sql.ts';

// Statements about the database itself rather than a table's rows: advisory locks, a relation's size.

/** A transaction-scoped advisory lock on a text key: concurrent holders of the same key wait for each other's commit. */
export async function advisoryXactLock(em: EntityManager, key: string): Promise<void> {
  await sql(em, `select pg_advisory_xact_lock(hashtextextended(?, 0))`, [key]);
}

/** A transaction-scoped advisory lock on a fixed number (one-time set-up steps at start). */
export async function advisoryXactLockId(em: EntityManager, id: number): Promise<void> {
  await sql(em, `select pg_advisory_xact_lock(${Math.trunc(id)})`);
}

/** How many heap pages a table has now (retention walks it by page ranges). */
export async function relationPages(em: EntityManager, table: string): Promise<number> {
  const [{ pages }] = await sql<{ pages: string }>(em, `select pg_relation_size(?::regclass) / current_setting('block_size')::int as pages`, [table]);
  return Number(pages);
}
