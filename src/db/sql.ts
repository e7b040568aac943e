import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Hand-written SQL for set-based paths, run with native bind parameters ($1.. — arrays go to
 * PostgreSQL as arrays, for unnest()) inside the EntityManager's current transaction, if any.
 * Placeholders are written `?`.
 */
export async function sql<T = Record<string, unknown>>(em: EntityManager, text: string, params: unknown[] = []): Promise<T[]> {
  const q = em.getKnex().raw(text, params as never[]);
  const trx = em.getTransactionContext();
  if (trx) q.transacting(trx);
  const res = (await q) as { rows: T[] };
  return res.rows;
}
