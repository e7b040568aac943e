import pg from 'pg';
import { INDEX_PATHS_ONLY, nativePlaceholders as native } from './sql.ts';

/**
 * A small pg pool for the per-message statements of the sending hot path: each statement is a
 * named prepared statement, parsed and planned once per connection instead of per message.
 * Everything else goes through the ORM's connection (db/sql.ts).
 */
export class PreparedStatements {
  private readonly pool: pg.Pool;
  private readonly texts = new Map<string, string>();

  /**
   * `asyncCommit`: the session runs with synchronous_commit off. Its commits return before the
   * WAL reaches disk; only a crash of PostgreSQL itself can lose the last few of them. Use it
   * only where such a loss is harmless (see the sending guard).
   *
   * `indexPathsOnly`: the session's planner may not scan a table whole (seq scan), build bitmaps
   * or hash and merge joins where anything else is possible. For statements that are index
   * lookups by design on tables that grow fast from empty: there the statistics lag behind
   * (autovacuum analyzes at most once a minute) and a plan made while a table was small, kept
   * as a prepared statement's generic plan, would read the whole table on every run.
   *
   * `genericPlans`: prepared statements run with their generic plan from the first execution
   * (`plan_cache_mode = force_generic_plan`) instead of PostgreSQL choosing per run. For
   * statements whose custom plan is no better (lookups by primary key over arrays of ids) and
   * whose planning costs more than their execution; together with `indexPathsOnly` the plan
   * cannot be a whole-table read made while the table was small.
   */
  constructor(connectionString: string, max: number, opts: { asyncCommit?: boolean; indexPathsOnly?: boolean; genericPlans?: boolean } = {}) {
    const settings = [
      ...(opts.asyncCommit ? ['synchronous_commit=off'] : []),
      ...(opts.genericPlans ? ['plan_cache_mode=force_generic_plan'] : []),
      ...(opts.indexPathsOnly ? INDEX_PATHS_ONLY.map((n) => `${n}=off`) : []),
    ];
    this.pool = new pg.Pool({
      connectionString,
      max,
      idleTimeoutMillis: 30_000,
      ...(settings.length ? { options: settings.map((s) => `-c ${s}`).join(' ') } : {}),
    });
    this.pool.on('error', () => {});
  }

  async run<T = Record<string, unknown>>(name: string, text: string, params: unknown[]): Promise<T[]> {
    const res = await this.pool.query({ name, text: this.native(name, text), values: params });
    return res.rows as T[];
  }

  private native(name: string, text: string): string {
    let t = this.texts.get(name);
    if (t === undefined) this.texts.set(name, (t = native(text)));
    return t;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
