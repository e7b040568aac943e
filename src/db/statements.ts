import pg from 'pg';

/** `?` placeholders (our convention, as in db/sql.ts) to PostgreSQL's `$1`, `$2`, ... */
function native(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

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
   */
  constructor(connectionString: string, max: number, opts: { asyncCommit?: boolean } = {}) {
    this.pool = new pg.Pool({
      connectionString,
      max,
      idleTimeoutMillis: 30_000,
      ...(opts.asyncCommit ? { options: '-c synchronous_commit=off' } : {}),
    });
    this.pool.on('error', () => {});
  }

  async run<T = Record<string, unknown>>(name: string, text: string, params: unknown[]): Promise<T[]> {
    let t = this.texts.get(name);
    if (t === undefined) this.texts.set(name, (t = native(text)));
    const res = await this.pool.query({ name, text: t, values: params });
    return res.rows as T[];
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
