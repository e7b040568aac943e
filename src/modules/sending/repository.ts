import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { Schedule } from '../campaigns/entities.ts';
import type { PreparedStatements } from '../../db/statements.ts';

const DAY_MS = 86_400_000;

export interface RunningCampaign {
  id: string;
  workspace_id: string;
  sender_pool_id: string | null;
  schedule: Schedule | null;
}

export async function runningCampaigns(em: EntityManager): Promise<RunningCampaign[]> {
  // campaigns_running_idx
  return sql<RunningCampaign>(em, `select id, workspace_id, sender_pool_id, schedule from campaigns where status = 'running' order by id`);
}

/** Follow-ups whose time has come move from `scheduled` to `queued` (counters follow). */
export async function promoteDue(em: EntityManager, now: Date, limit = 5000): Promise<Array<{ campaign_id: string; n: string }>> {
  // outbound_scheduled_idx
  return sql(
    em,
    `with p as (
       update outbound_messages set state = 'queued', updated_at = ?
        where id in (select id from outbound_messages where state = 'scheduled' and due_at <= ?
                      order by due_at limit ? for update skip locked)
        returning campaign_id)
     select campaign_id, count(*) as n from p group by campaign_id order by campaign_id`,
    [now, now, limit],
  );
}

/**
 * Messages claimed by a worker that died (lease expired) go back to the queue. Those whose SMTP
 * transaction had started (or had ended with its outcome not yet committed) may have been sent:
 * they can repeat (documented). The lease of a live worker's messages is renewed until their
 * outcome is recorded, so only a dead (or stalled) worker's claims expire.
 */
export async function releaseExpired(em: EntityManager, now: Date): Promise<{ released: number }> {
  // outbound_lease_idx
  const rows = await sql(
    em,
    `update outbound_messages m set state = 'queued', claimed_by = null, lease_until = null, pool_id = null,
            sender_account_id = null, smtp_started_at = null, updated_at = ?
       from (select id from outbound_messages where state = 'sending' and lease_until < ? for update skip locked) o
      where m.id = o.id
      returning m.id`,
    [now, now],
  );
  return { released: rows.length };
}

export interface PoolCapacity {
  dailyCapacity: number;
  used: number;
  inFlight: number;
}

/**
 * The claim's statements are index lookups and ordered index scans by design, on tables that
 * grow fast from empty (a campaign's queue is written in one go when it starts): plans made from
 * statistics taken while a table was small read it whole (the claim's update hash-joined a
 * sequential scan of outbound_messages, ~10 ms per claim of 100 at 10,000 messages). For the
 * claim transaction only, the planner uses index paths where there are any (as the dispatcher's
 * prepared statements do, see PreparedStatements' indexPathsOnly; bitmap scans stay allowed:
 * the pool's rolling count reads fewer heap pages with one).
 */
export async function claimPlans(em: EntityManager): Promise<void> {
  await sql(
    em,
    `select set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
            set_config('enable_mergejoin', 'off', true)`,
  );
}

/**
 * Locks the pool row (serializing capacity decisions for it) and reads its usage. FOR NO KEY
 * UPDATE, like the accounts below: it excludes other claims of the pool but not the key-share
 * locks of foreign-key checks (a claim's pool_id, an outcome's sticky account), which FOR
 * UPDATE made wait for the whole claim transaction.
 */
export async function lockPool(em: EntityManager, poolId: string, now: Date): Promise<PoolCapacity | null> {
  const [pool] = await sql<{ daily_capacity: number }>(em, `select daily_capacity from sender_pools where id = ? for no key update`, [poolId]);
  if (!pool) return null;
  // outbound_pool_sent_idx and outbound_sending_pool_idx
  const [usage] = await sql<{ used: string; in_flight: string }>(
    em,
    `select (select count(*) from outbound_messages where pool_id = ? and sent_at is not null and sent_at > ?) as used,
            (select count(*) from outbound_messages where pool_id = ? and state = 'sending') as in_flight`,
    [poolId, new Date(now.getTime() - DAY_MS), poolId],
  );
  return { dailyCapacity: pool.daily_capacity, used: Number(usage.used), inFlight: Number(usage.in_flight) };
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
 * The pool's accounts that may send (active, not failing authentication, not in a back-off
 * after an unreachable server or throttling: senders/health.ts), locked in id order so
 * an account shared by two pools is never over its own limit, with their rolling usage (counted
 * only for an account with a daily limit: without one nothing reads it).
 */
export async function lockAccounts(em: EntityManager, poolId: string, now: Date): Promise<AccountSlot[]> {
  // pool_members primary key; outbound_sender_sent_idx and outbound_sending_sender_idx
  return sql<AccountSlot>(
    em,
    `select a.id, a.daily_limit, a.min_interval_ms, a.last_sent_at,
            case when a.daily_limit is null then 0
                 else (select count(*) from outbound_messages m where m.sender_account_id = a.id and m.sent_at is not null and m.sent_at > ?) end as used,
            (select count(*) from outbound_messages m where m.sender_account_id = a.id and m.state = 'sending') as in_flight
       from pool_members pm join sender_accounts a on a.id = pm.sender_account_id
      where pm.pool_id = ? and a.status = 'active' and a.health <> 'auth_failed'
        and (a.health_retry_at is null or a.health_retry_at <= ?)
      order by a.id
      for no key update of a`,
    [new Date(now.getTime() - DAY_MS), poolId, now],
  );
}

export interface Candidate {
  id: string;
  enrollment_id: string;
  sticky: string | null;
}

/** Due queued messages of the given campaigns, oldest first, locked; others' locks skipped. */
export async function dueMessages(em: EntityManager, campaignIds: string[], now: Date, limit: number): Promise<Candidate[]> {
  // outbound_claim_order_idx (campaign_id, due_at, id) where state = 'queued', one ordered scan
  // per campaign stopped at the limit (`campaign_id = any(...)` would read and sort the queue).
  return sql<Candidate>(
    em,
    `select x.id, x.enrollment_id, e.sender_account_id as sticky
       from unnest(?::text[]) as c(id)
       cross join lateral (
         select m.id, m.enrollment_id, m.due_at from outbound_messages m
          where m.campaign_id = c.id and m.state = 'queued' and m.due_at <= ?
          order by m.due_at, m.id
          limit ?
          for update skip locked) x
       join enrollments e on e.id = x.enrollment_id
      order by x.due_at, x.id
      limit ?`,
    [campaignIds, now, limit, limit],
  );
}

export async function markClaimed(
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
  );
  // The account that sends a lead's message becomes the enrollment's (sticky) account when the
  // outcome is recorded (outcomes.ts), not here: a claim that is not sent changes nothing.
  const accounts = [...new Set(claims.map((c) => c.accountId))];
  await sql(em, `update sender_accounts set last_sent_at = ? where id = any(?::text[])`, [now, accounts]);
}

/** The columns that place an outbound message in its campaign, enrollment and sequence. */
export interface OutboundRef {
  id: string;
  workspace_id: string;
  campaign_id: string;
  enrollment_id: string;
  lead_id: string;
  step_index: number;
  to_email: string;
}

/** A lead's personalization columns as hand-written SQL returns them. */
export interface LeadColumns {
  email: string;
  first_name: string | null;
  last_name: string | null;
  company: string | null;
  job_title: string | null;
  custom: Record<string, unknown>;
}

export interface PreparedRow extends OutboundRef, LeadColumns {
  sender_account_id: string;
  track_opens: boolean;
  step_subject: string | null;
  step_body: string | null;
  from_email: string;
  from_name: string;
  smtp_url_enc: string;
  previous: Array<{ mid: string; subject: string }>;
}

/**
 * Everything needed to render and send the claimed messages, in one statement (primary-key
 * lookups: `stmts` plans with index paths only, see PreparedStatements).
 */
export async function loadForSending(stmts: PreparedStatements, ids: string[]): Promise<PreparedRow[]> {
  return stmts.run<PreparedRow>(
    'sending.load',
    `select m.id, m.workspace_id, m.campaign_id, m.enrollment_id, m.lead_id, m.step_index, m.to_email, m.sender_account_id,
            c.track_opens, s.subject as step_subject, s.body_html as step_body,
            l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom,
            a.email as from_email, a.name as from_name, a.smtp_url_enc,
            coalesce((select json_agg(json_build_object('mid', p.message_id_header, 'subject', p.subject) order by p.step_index)
                        from outbound_messages p
                       where p.enrollment_id = m.enrollment_id and p.kind = 'campaign' and p.step_index < m.step_index
                         and p.message_id_header is not null and p.sent_at is not null), '[]'::json) as previous
       from outbound_messages m
       join campaigns c on c.id = m.campaign_id
       join leads l on l.id = m.lead_id
       join sender_accounts a on a.id = m.sender_account_id
       left join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index
      where m.id = any(?::text[])`,
    [ids],
  );
}

/**
 * The guard in front of every SMTP transaction (the moment of sending): the message is still
 * ours, its campaign is running, its enrollment active, its address not suppressed. One
 * read-only statement (no row version, no WAL, no commit to wait for): what the guard wrote
 * before (the rendered headers, the lease) moved to the outcome and to the lease renewal.
 * Returns false when it must not send.
 */
export async function guard(stmts: PreparedStatements, id: string, workerId: string): Promise<boolean> {
  const rows = await stmts.run(
    'sending.guard',
    `select 1 as go from outbound_messages m
      where m.id = ? and m.state = 'sending' and m.claimed_by = ?
        and exists (select 1 from campaigns c where c.id = m.campaign_id and c.status = 'running')
        and exists (select 1 from enrollments e where e.id = m.enrollment_id and e.status = 'active')
        and not exists (select 1 from suppressions s where s.workspace_id = m.workspace_id and s.email_key = lower(m.to_email))`,
    [id, workerId],
  );
  return rows.length === 1;
}

/** Extends the lease of the messages this worker still holds (claimed, not yet recorded). */
export async function renewLeases(stmts: PreparedStatements, ids: string[], workerId: string, leaseUntil: Date): Promise<number> {
  // outbound_messages primary key
  const rows = await stmts.run(
    'sending.renew',
    `update outbound_messages set lease_until = ? where id = any(?::text[]) and state = 'sending' and claimed_by = ? returning id`,
    [leaseUntil, ids, workerId],
  );
  return rows.length;
}

export interface GuardState {
  state: string;
  claimed_by: string | null;
  campaign_status: string;
  enrollment_status: string;
  suppressed: boolean;
}

export async function guardState(em: EntityManager, id: string): Promise<GuardState | undefined> {
  const [row] = await sql<GuardState>(
    em,
    `select m.state, m.claimed_by, c.status as campaign_status, e.status as enrollment_status,
            exists (select 1 from suppressions s where s.workspace_id = m.workspace_id and s.email_key = lower(m.to_email)) as suppressed
       from outbound_messages m join campaigns c on c.id = m.campaign_id join enrollments e on e.id = m.enrollment_id
      where m.id = ?`,
    [id],
  );
  return row;
}

/** Back to the queue, untouched (a pause, an account that cannot send, a shutdown). */
export async function release(em: EntityManager, id: string, workerId: string, now: Date, dueAt?: Date): Promise<void> {
  await sql(
    em,
    `update outbound_messages set state = 'queued', claimed_by = null, lease_until = null, pool_id = null, sender_account_id = null,
            smtp_started_at = null, updated_at = ?, due_at = coalesce(?, due_at)
      where id = ? and state = 'sending' and claimed_by = ?`,
    [now, dueAt ?? null, id, workerId],
  );
}

export async function cancelQueued(em: EntityManager, id: string, reason: string, now: Date): Promise<boolean> {
  const rows = await sql(em, `update outbound_messages set state = 'cancelled', cancel_reason = ?, updated_at = ? where id = ? and state = 'queued' returning id`, [
    reason,
    now,
    id,
  ]);
  return rows.length === 1;
}
