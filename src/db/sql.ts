import type { EntityManager } from '@mikro-orm/postgresql';
import type { Knex } from '@mikro-orm/knex';

// The one way to run hand-written SQL on the ORM's connections (repositories' set-based and hot
// statements). The other ways to reach PostgreSQL each have a reason of their own:
// - db/statements.ts `PreparedStatements`: the sending hot path's small pools, whose sessions
//   carry planner settings (index paths only) and keep named statements planned per connection;
// - a dedicated pg.Client where a connection must not be shared: LISTEN (db/listener.ts), the
//   worker heartbeat (workers/registry.ts: never queued behind the work), the migration advisory
//   lock (db/orm.ts), the database probe at start (db/database.ts), the CLI's `list` commands
//   (cli/: they load no ORM, to start fast).

/** A pg connection as knex's client hands it out. */
interface PgConnection {
  query(q: { text: string; values: unknown[]; name?: string }): Promise<{ rows: unknown[] }>;
}

/** `?` placeholders (our convention) to PostgreSQL's `$1`, `$2`, ... */
export function nativePlaceholders(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/**
 * Hand-written SQL with native bind parameters ($1.. — arrays go to PostgreSQL as arrays, for
 * unnest()), on the EntityManager's current transaction if it has one, else on a connection of
 * the ORM's pool. Placeholders are written `?` (no `?` may appear otherwise: no jsonb `?`
 * operators, no `?` in literals; a text whose `?`s and values differ in number is refused).
 *
 * The connection comes from knex's client (`acquireConnection`/`releaseConnection`, part of
 * knex's typed Client API): the pool's client outside a transaction, the transaction's client
 * inside one (knex hands that one out as the transaction's own connection and releases
 * nothing). The statement then goes straight to pg, without knex's raw query path: 0.2-0.4 ms
 * less per statement here (docs/benchmarks.md, SDR inbox, session 5). test/db/sql.test.ts
 * checks both: the session, the bindings, the errors, and that a statement in a transaction
 * is part of it.
 *
 * `name` makes it a named prepared statement, parsed once per connection; only for fixed texts,
 * never for texts built per call. PostgreSQL plans it for its values for the first five runs,
 * then keeps its generic plan only when that is estimated no dearer (plan_cache_mode auto): the
 * API key lookup, and the claim's statements (messages/claim.ts), whose planning cost more than
 * their execution (docs/decisions.md, "The claim's statements are prepared").
 */
export async function sql<T = Record<string, unknown>>(em: EntityManager, text: string, params: unknown[] = [], opts: { name?: string } = {}): Promise<T[]> {
  const native = checkedNative(text, params);
  const trx = em.getTransactionContext<Knex.Transaction>();
  // A finished transaction's connection is back in the pool (someone else's, maybe): refuse, as
  // knex's own query path does.
  if (trx?.isCompleted()) throw new Error(`the transaction has already completed: ${text}`);
  const client = (trx ?? em.getKnex()).client as Knex.Client;
  const conn = (await client.acquireConnection()) as PgConnection;
  try {
    const res = await conn.query({ text: native, values: params, ...(opts.name ? { name: opts.name } : {}) });
    return res.rows as T[];
  } catch (err) {
    // The statement (not its values) for the logs.
    if (err instanceof Error) Object.assign(err, { sql: text });
    throw err;
  } finally {
    await client.releaseConnection(conn);
  }
}

/**
 * The statement in PostgreSQL's placeholders, refusing before anything is sent: one value per
 * `?` (a stray `?`, e.g. a jsonb operator, would shift every placeholder after it), and no
 * `undefined`, at the top level or inside an array (pg would quietly bind it as NULL).
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

/**
 * The SQLSTATE of a PostgreSQL error, as the driver or the ORM reports it (`code`, or the
 * wrapped error's); null for anything else. Every SQLSTATE has five characters with a digit,
 * so socket codes such as EPIPE are not taken for one.
 */
export function sqlState(err: unknown): string | null {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && /\d/.test(code) ? code : null;
}

/** Socket errors of a connection to PostgreSQL that could not be made or was cut. */
const SOCKET_FAILURES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * PostgreSQL cannot be reached or is not taking work now: no connection (refused, cut, timed
 * out, no free one in the pool in time), the server shutting down or starting up (57P01-57P03),
 * too many connections (53300), any connection exception (class 08). The API answers these 503
 * (http/errors.ts): nothing is wrong with the request.
 */
export function databaseUnreachable(err: unknown): boolean {
  const state = sqlState(err);
  if (state) return state.startsWith('08') || state === '57P01' || state === '57P02' || state === '57P03' || state === '53300';
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  if (typeof code === 'string' && SOCKET_FAILURES.has(code)) return true;
  if (e?.name === 'KnexTimeoutError') return true;
  // node-postgres's own words: a connection ended or cut under a query (also `due to connection
  // timeout`: a pool's connect that took too long), and a query handed to a client whose
  // connection is already gone (a pool can hand out an idle client in the moment an outage cuts
  // it). Those were taken for a failure of ours: a message's guard failing so was left claimed
  // for its lease instead of given back, and the API answered 500 instead of 503.
  return typeof e?.message === 'string' && /^(Connection terminated( unexpectedly| due to connection timeout)?|Client (has encountered a connection error|was closed) and is not queryable)$/.test(e.message);
}

/** The planner settings turned off for statements that must find rows by key (onIndexPaths, PreparedStatements' indexPathsOnly). */
export const INDEX_PATHS_ONLY = ['enable_seqscan', 'enable_bitmapscan', 'enable_hashjoin', 'enable_mergejoin'] as const;

/**
 * Runs `work` (statements of the caller's transaction) with the planner on plain index paths
 * only (sequential, bitmap and so GIN scans, hash and merge joins off), then puts the
 * transaction's settings back. For statements that look rows up by key in tables that grow
 * fast from empty, planned from statistics taken while a table was small (a suppression list
 * and a campaign imported a minute ago, before autovacuum analyzed them): reactivateUnsuppressed
 * (messages/queue.ts) matched each suppressed enrollment's address through the list's trigram
 * index (pg_trgm answers `=` too) instead of its primary key, so every lookup rechecked the
 * whole list: 16 s for 5,000 suppressed enrollments against 5,000 suppressions, in a start or an
 * enrollment request. The dispatcher's prepared statements run with the same settings
 * (db/statements.ts). Outside a transaction the settings would last one statement: call it in one.
 */
export async function onIndexPaths<T>(em: EntityManager, work: () => Promise<T>): Promise<T> {
  const names = INDEX_PATHS_ONLY;
  const [before] = await sql<{ settings: string[] }>(
    em,
    `select array[${names.map((n) => `current_setting('${n}')`).join(', ')}] as settings, ${names.map((n) => `set_config('${n}', 'off', true)`).join(', ')}`,
  );
  const result = await work();
  await sql(em, `select ${names.map((n) => `set_config('${n}', ?, true)`).join(', ')}`, before.settings);
  return result;
}
