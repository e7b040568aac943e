import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';

// The pools' and accounts' sent tallies (sent_tallies, migration 0020): how many messages each
// pool and each account sent, per five-minute bucket of sent_at. They exist so that a claim's
// rolling 24-hour count (claim.ts lockAccounts, accountSlots) costs the same whatever the day's
// volume: counting one index entry per message sent in the window took 12 ms per claim with
// 100,000 messages in it (docs/benchmarks.md, issue 20, session 18).
//
// Exact by construction: a tally moves in the statement that gives a message its sent_at
// (markSent, bounce, recordForward), so a snapshot that sees a message sent sees it tallied, and
// the bucket is computed from the sent_at written. A window's count is then the tallies of the
// buckets wholly inside it plus an index count of the messages in the one bucket it cuts
// (usedSql). Each writer adds to its own rows (`writer`: the worker for its outcome statements,
// `bounce:` and the worker for its bounces, the message for a forward), so two workers sending
// for one pool never wait for each other's row. Rows older than the window are pruned
// (pruneTallies, the `tallies.prune` job). Messages are deleted only with their workspace, and
// its tallies go with them (deletion.ts).

/** The bucket width; bucketOf says the same to PostgreSQL. */
export const TALLY_BUCKET_MS = 5 * 60_000;
/**
 * Bucket of a timestamptz expression: epoch-aligned, as tallyWindow computes it in JS. Not
 * date_bin, which PostgreSQL 13 (the oldest the README supports) lacks.
 */
const bucketOf = (expr: string) => `to_timestamp(floor(extract(epoch from ${expr}) / ${TALLY_BUCKET_MS / 1000}) * ${TALLY_BUCKET_MS / 1000})`;

/**
 * An insert into sent_tallies from `source`, a select with the columns sent_at (timestamptz),
 * writer, workspace_id, pool_id and sender_account_id (either may be null): one tally per pool
 * and one per account, per bucket. Grouped first, so no row is touched twice (ON CONFLICT DO
 * UPDATE refuses that).
 */
export function tallyInsert(source: string): string {
  return `insert into sent_tallies (owner_id, bucket, writer, workspace_id, n)
     select o.owner_id, ${bucketOf('s.sent_at')}, s.writer, min(s.workspace_id), count(*)::int
       from (${source}) s cross join lateral (values (s.pool_id), (s.sender_account_id)) as o(owner_id)
      where o.owner_id is not null
      group by 1, 2, 3
     on conflict (owner_id, bucket, writer) do update set n = sent_tallies.n + excluded.n`;
}

/** The window a claim at `now` counts: sent_at after `since` (24 hours before), and the end of the bucket `since` cuts. */
export function tallyWindow(now: Date): { since: Date; edgeEnd: Date } {
  const since = now.getTime() - 86_400_000;
  return { since: new Date(since), edgeEnd: new Date(Math.floor(since / TALLY_BUCKET_MS) * TALLY_BUCKET_MS + TALLY_BUCKET_MS) };
}

/**
 * The count of messages sent in a window by the owner `owner` (an SQL expression: a pool's or
 * an account's id), whose messages carry it in `column` (pool_id or sender_account_id). Its
 * parameters, in this order (after `owner`'s own, if it is one, each time): edgeEnd, since,
 * edgeEnd (tallyWindow). The tallies' primary key and outbound_pool_sent_idx /
 * outbound_sender_sent_idx answer it.
 */
export function usedSql(owner: string, column: 'pool_id' | 'sender_account_id'): string {
  return `(coalesce((select sum(t.n) from sent_tallies t where t.owner_id = ${owner} and t.bucket >= ?), 0)
          + (select count(*) from outbound_messages um where um.${column} = ${owner} and um.sent_at > ? and um.sent_at < ?))`;
}

/**
 * Tallies for messages that were given their sent_at without them: the migration that created
 * the table (for the messages already sent then) and benchmarks that write a day's history
 * directly. Only messages sent after `since`, an SQL expression (a `?` by default); run where
 * nothing sends (it adds, it does not replace).
 */
export function backfillTalliesSql(since = '?::timestamptz'): string {
  return tallyInsert(
    `select sent_at, 'backfill' as writer, workspace_id, pool_id, sender_account_id from outbound_messages
      where sent_at is not null and sent_at > ${since} and (pool_id is not null or sender_account_id is not null)`,
  );
}

/** Deletes the tallies of buckets that ended before `before` (no window reaches them). */
export async function pruneTallies(em: EntityManager, before: Date): Promise<number> {
  const rows = await sql<{ n: string }>(
    em,
    `with d as (delete from sent_tallies where bucket < ? returning 1) select count(*) as n from d`,
    [new Date(before.getTime() - TALLY_BUCKET_MS)],
  );
  return Number(rows[0].n);
}

/** Deletes a workspace's tallies (deletion.ts, with its messages). */
export async function deleteWorkspaceTallies(em: EntityManager, workspaceId: string): Promise<void> {
  await sql(em, 'delete from sent_tallies where workspace_id = ?', [workspaceId]);
}
