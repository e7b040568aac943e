import pg from 'pg';

/** Polls `fn` every 100 ms until it returns something truthy, or fails after `ms`. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Waits until another session of the database waits for a lock (a row lock, an advisory lock),
 * its statement's text containing `like` when given: a request under test has reached the lock
 * a test holds, so what the test does next happens while it waits. (A fixed sleep instead lets
 * a slow request arrive after the test went on: the test then passes without testing the order
 * it names.) On a connection of its own: inside a transaction pg_stat_activity keeps the first
 * snapshot it read, so a test's connection holding the lock would never see the wait.
 */
export async function waitForLockWait(databaseUrl: string, what: string, like?: string): Promise<void> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await waitFor(what, async () => {
      const { rows } = await db.query(
        `select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and ($1::text is null or query like '%' || $1 || '%')`,
        [like ?? null],
      );
      return rows.length > 0;
    });
  } finally {
    await db.end();
  }
}
