import type { EntityManager } from '@mikro-orm/postgresql';

/** The part of knex's client we use outside a transaction: its pool of pg connections. */
interface PooledClient {
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(conn: PgConnection): Promise<unknown>;
}
interface PgConnection {
  query(q: { text: string; values: unknown[]; name?: string }): Promise<{ rows: unknown[] }>;
}

/** `?` placeholders (our convention) to PostgreSQL's `$1`, `$2`, ... */
export function nativePlaceholders(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/**
 * Hand-written SQL for set-based paths, run with native bind parameters ($1.. — arrays go to
 * PostgreSQL as arrays, for unnest()) inside the EntityManager's current transaction, if any.
 * Placeholders are written `?` (no `?` may appear otherwise: no jsonb `?` operators, no `?` in
 * literals; the direct path below refuses a text whose `?`s and values differ in number).
 *
 * Outside a transaction the statement goes straight to a pg connection of the ORM's pool,
 * without knex's raw query path: 0.2-0.4 ms less per statement here (docs/benchmarks.md, SDR
 * inbox, session 5).
 * `name` makes it a named prepared statement, parsed and planned once per connection; only for
 * fixed texts whose plan does not depend on the values (the API key lookup), never for texts
 * built per call.
 */
export async function sql<T = Record<string, unknown>>(em: EntityManager, text: string, params: unknown[] = [], opts: { name?: string } = {}): Promise<T[]> {
  const trx = em.getTransactionContext();
  if (trx) {
    const q = em.getKnex().raw(text, params as never[]).transacting(trx);
    return ((await q) as { rows: T[] }).rows;
  }
  const native = checkedNative(text, params);
  const client = em.getKnex().client as unknown as PooledClient;
  const conn = await client.acquireConnection();
  try {
    const res = await conn.query({ text: native, values: params, ...(opts.name ? { name: opts.name } : {}) });
    return res.rows as T[];
  } catch (err) {
    // The statement (not its values) for the logs, as knex's message carried it.
    if (err instanceof Error) Object.assign(err, { sql: text });
    throw err;
  } finally {
    await client.releaseConnection(conn);
  }
}

/**
 * The statement in PostgreSQL's placeholders, refusing what knex refused before binding, so
 * both paths of sql() refuse the same mistakes: one value per `?` (a stray `?`, e.g. a jsonb
 * operator, would shift every placeholder after it), and no `undefined`, at the top level or
 * inside an array (pg would quietly bind it as NULL).
 */
function checkedNative(text: string, params: unknown[]): string {
  let marks = 0;
  const native = text.replace(/\?/g, () => `$${++marks}`);
  if (marks !== params.length) throw new Error(`${marks} placeholders but ${params.length} values for: ${text}`);
  params.forEach((p, i) => {
    if (p === undefined || (Array.isArray(p) && p.includes(undefined))) throw new Error(`undefined binding at position ${i + 1} of: ${text}`);
  });
  return native;
}
