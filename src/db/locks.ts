import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from './sql.ts';

/** A transaction-scoped advisory lock on a text key: concurrent holders of the same key wait for each other's commit. */
export async function advisoryXactLock(em: EntityManager, key: string): Promise<void> {
  await sql(em, `select pg_advisory_xact_lock(hashtextextended(?, 0))`, [key]);
}

/** A transaction-scoped advisory lock on a fixed number (one-time set-up steps at start). */
export async function advisoryXactLockId(em: EntityManager, id: number): Promise<void> {
  await sql(em, `select pg_advisory_xact_lock(${Math.trunc(id)})`);
}
