import assert from 'node:assert/strict';
import type pg from 'pg';

/**
 * prospect_thread_counts (migration 0003, kept by triggers) must equal a count of the threads,
 * row for row, with no row left at 0. Fails listing every (sdr, status, category, workspace)
 * whose counter drifted.
 */
export async function assertThreadCountsExact(db: pg.Client | pg.Pool): Promise<void> {
  const { rows } = await db.query(
    `select sdr_id, status, category, workspace_id, c.n as counted, t.n as actual
       from prospect_thread_counts c
       full join (select sdr_id, status, category, workspace_id, count(*)::int as n from prospect_threads group by 1, 2, 3, 4) t
      using (sdr_id, status, category, workspace_id)
      where c.n is distinct from t.n`,
  );
  assert.deepEqual(rows, [], 'prospect_thread_counts drifted from the threads');
}
