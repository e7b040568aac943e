import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { tallyWindow, usedSql } from './tallies.ts';

// Claiming due messages for a pool (sending/capacity.ts decides, under the pool's row lock).
// The statements lock the pool's and its accounts' rows (FOR NO KEY UPDATE) to serialize
// capacity decisions; they write only outbound_messages.

/**
 * The claim's statements are index lookups and ordered index scans by design, on tables that
 * grow fast from empty (a campaign's queue is written in one go when it starts): plans made from
 * statistics taken while a table was small read it whole (the claim's update hash-joined a
 * sequential scan of outbound_messages, ~10 ms per claim of 100 at 10,000 messages). For the
 * claim transaction only, the planner uses index paths where there are any (as the dispatcher's
 * prepared statements do, see PreparedStatements' indexPathsOnly; bitmap scans stay allowed:
 * the pool's rolling count reads fewer heap pages with one). Set by the claim's first statement
 * (lockPool), a lookup by primary key whatever the settings, so they cost no round trip of
 * their own.
 */
const CLAIM_PLANS = `set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
            set_config('enable_mergejoin', 'off', true)`;

/**
 * The claim's first statement: locks the pool row (serializing capacity decisions for it) and
 * sets the claim's planner settings for the rest of the transaction (CLAIM_PLANS). FOR NO KEY
 * UPDATE, like the accounts below: it excludes other claims of the pool but not the key-share
 * locks of foreign-key checks (a claim's pool_id, an outcome's sticky account), which FOR
 * UPDATE made wait for the whole claim transaction. Null: no such pool.
 */
export async function lockPool(em: EntityManager, poolId: string): Promise<{ dailyCapacity: number } | null> {
  const [pool] = await sql<{ daily_capacity: number }>(
    em,
    `select daily_capacity, ${CLAIM_PLANS} from sender_pools where id = ? for no key update`,
    [poolId],
    { name: 'claim.pool' },
  );
  return pool ? { dailyCapacity: pool.daily_capacity } : null;
}

export interface LockedAccounts {
  /** The pool's messages in its rolling 24 hours, and those being sent now. */
  used: number;
  inFlight: number;
  /** The pool's accounts that may send, locked, in id order. */
  ids: string[];
}

/**
 * After lockPool, in one statement: the pool's usage, and its accounts that may send (active, not
 * failing authentication, not in a back-off after an unreachable server or throttling:
 * senders/health.ts) locked in id order, so an account shared by two pools is never over its
 * own limit. The usage is the pool's sent tallies (tallies.ts) with outbound_pool_sent_idx for
 * the bucket the window cuts, and its messages being sent (outbound_sending_pool_idx), read in
 * this statement's snapshot, taken after the pool's lock was granted: no other claim of the pool
 * can commit meanwhile, and an outcome moves a message from being sent to the tallies in one
 * commit. (Counted before the accounts' locks are granted, it can only count a message given
 * back meanwhile as still being sent: never less than the pool has used.) The accounts' own
 * usage is read by accountSlots, in a statement of its own.
 */
export async function lockAccounts(em: EntityManager, poolId: string, now: Date): Promise<LockedAccounts> {
  const w = tallyWindow(now);
  // pool_members primary key for the accounts
  const rows = await sql<{ used: string; in_flight: string; id: string | null }>(
    em,
    `select u.used, u.in_flight, a.id
       from (select ${usedSql('?::text', 'pool_id')} as used,
                    (select count(*) from outbound_messages where pool_id = ? and state = 'sending') as in_flight) u
       left join (
         select a.id
           from pool_members pm join sender_accounts a on a.id = pm.sender_account_id
          where pm.pool_id = ? and a.status = 'active' and a.health <> 'auth_failed'
            and (a.health_retry_at is null or a.health_retry_at <= ?)
          order by a.id
          for no key update of a) a on true
      order by a.id`,
    [poolId, w.edgeEnd, poolId, w.since, w.edgeEnd, poolId, poolId, now],
    { name: 'claim.lock_accounts' },
  );
  return {
    used: Number(rows[0].used),
    inFlight: Number(rows[0].in_flight),
    ids: rows.flatMap((r) => (r.id === null ? [] : [r.id])),
  };
}

export interface AccountSlot {
  id: string;
  daily_limit: number | null;
  min_interval_ms: number;
  last_sent_at: Date | string | null;
  used: string;
  in_flight: string;
}

/**
 * The locked accounts' (lockAccounts) limits and rolling usage (counted only for an account with
 * a daily limit: without one nothing reads it), in id order.
 *
 * Locked first, counted in a statement of its own: a statement reads one snapshot, taken when it
 * starts, so usage counted by the statement that waited for the lock missed what the claim
 * holding the lock (another pool's, for an account in both) committed meanwhile, and each pool
 * gave the account its whole limit (6 messages for a limit of 3, capacity.test.ts).
 */
export async function accountSlots(em: EntityManager, ids: string[], now: Date): Promise<AccountSlot[]> {
  if (!ids.length) return [];
  // sender_accounts primary key; the account's sent tallies with outbound_sender_sent_idx (as
  // the pool's: tallies.ts); outbound_sending_sender_idx
  const w = tallyWindow(now);
  return sql<AccountSlot>(
    em,
    `select a.id, a.daily_limit, a.min_interval_ms, a.last_sent_at,
            case when a.daily_limit is null then 0
                 else ${usedSql('a.id', 'sender_account_id')} end as used,
            (select count(*) from outbound_messages m where m.sender_account_id = a.id and m.state = 'sending') as in_flight
       from sender_accounts a
      where a.id = any(?::text[])
      order by a.id`,
    [w.edgeEnd, w.since, w.edgeEnd, ids],
    { name: 'claim.accounts' },
  );
}

export interface Candidate {
  id: string;
  enrollment_id: string;
  sticky: string | null;
}

/**
 * Due queued messages of the given campaigns that are running now on the pool `poolId`, oldest
 * first, locked; others' locks skipped. The round's list of campaigns is read when it starts: a
 * campaign paused since is not claimed again (each of its batches went to SMTP only for the guard
 * to drop every connection, for as long as the round lasted), nor one moved to another pool since
 * (its old pool's accounts went on sending it for the rest of the round). Passed over: messages sticky to an account that
 * cannot take one now (`blocked`: at its daily limit or inside its interval; they wait for it,
 * sending/capacity.ts). Filtered in the scan, not after the limit: a head of the queue sticky to
 * a full account would otherwise fill every candidate list, and every other message of the
 * pool, of any campaign, would wait behind it.
 */
export async function dueMessages(
  em: EntityManager,
  poolId: string,
  campaignIds: string[],
  now: Date,
  limit: number,
  blocked: string[] = [],
): Promise<Candidate[]> {
  // outbound_claim_order_idx (campaign_id, due_at, id) where state = 'queued', one ordered scan
  // per campaign stopped at the limit (`campaign_id = any(...)` would read and sort the queue);
  // the enrollment (its sticky account) by its primary key per message scanned; the campaign by
  // its primary key.
  return sql<Candidate>(
    em,
    `select x.id, x.enrollment_id, x.sticky
       from unnest(?::text[]) as c(id)
       join campaigns k on k.id = c.id and k.status = 'running' and k.sender_pool_id = ?
       cross join lateral (
         select m.id, m.enrollment_id, m.due_at, e.sender_account_id as sticky
           from outbound_messages m join enrollments e on e.id = m.enrollment_id
          where m.campaign_id = c.id and m.state = 'queued' and m.due_at <= ?
            and (e.sender_account_id is null or e.sender_account_id <> all(?::text[]))
          order by m.due_at, m.id
          limit ?
          for update of m skip locked) x
      order by x.due_at, x.id
      limit ?`,
    [campaignIds, poolId, now, blocked, limit, limit],
    { name: 'claim.due' },
  );
}

/**
 * The claim itself: the messages become `sending`, owned by this worker under a lease. The
 * accounts' `last_sent_at` is the senders' (senders/repository.ts `noteClaimed`), written by
 * the caller in the same transaction.
 */
export async function claim(
  em: EntityManager,
  claims: Array<{ id: string; enrollmentId: string; accountId: string }>,
  poolId: string,
  workerId: string,
  now: Date,
  leaseUntil: Date,
): Promise<void> {
  await sql(
    em,
    `update outbound_messages m set state = 'sending', pool_id = ?, sender_account_id = t.account_id, claimed_by = ?,
            lease_until = ?, updated_at = ?
       from unnest(?::text[], ?::text[]) as t(id, account_id)
      where m.id = t.id`,
    [poolId, workerId, leaseUntil, now, claims.map((c) => c.id), claims.map((c) => c.accountId)],
    { name: 'claim.claim' },
  );
  // The account that sends a lead's message becomes the enrollment's (sticky) account when the
  // outcome is recorded (markSent), not here: a claim that is not sent changes nothing.
}
