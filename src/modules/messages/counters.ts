import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { tallyWindow, usedSql } from './tallies.ts';
import type { Schedule } from '../campaigns/entities.ts';
import { pendingFirstStepsSql } from './queue.ts';

// campaign_counters: the stats of a campaign, kept in the transactions that change what they
// count (the message and enrollment transitions of this module). Owned here; the campaign's
// row is created with the campaign (createCounters).

export type CounterName = 'enrolled' | 'queued' | 'scheduled' | 'sent' | 'delivered' | 'bounced' | 'replied' | 'opened' | 'unsubscribed' | 'complained';

/**
 * A boolean SQL expression on one row of `outbound_messages` (alias `m`): a message the
 * `bounced` counter counts (contract §4: hard + soft bounces, messages). The transitions that
 * set this state bump the counter by one (transitions.ts: bounce, bounceDelivered); the leads
 * list's `bounced` filter (queue.ts) and the time chart's `bounced` (activity.ts) read it.
 */
export function bouncedMessageSql(m: string): string {
  return `${m}.kind = 'campaign' and ${m}.state = 'bounced'`;
}

export async function createCounters(em: EntityManager, campaignId: string): Promise<void> {
  await sql(em, 'insert into campaign_counters (campaign_id) values (?)', [campaignId]);
}

/** Adds to the campaign's counters (one row, locked for the rest of the transaction). */
export async function bumpCounters(em: EntityManager, campaignId: string, delta: Partial<Record<CounterName, number>>): Promise<void> {
  const entries = Object.entries(delta).filter(([, v]) => v);
  if (!entries.length) return;
  await sql(em, `update campaign_counters set ${entries.map(([k]) => `${k} = ${k} + ?`).join(', ')} where campaign_id = ?`, [
    ...entries.map(([, v]) => v),
    campaignId,
  ]);
}

export interface Counters {
  enrolled: number;
  queued: number;
  scheduled: number;
  sent: number;
  delivered: number;
  bounced: number;
  replied: number;
  opened: number;
  unsubscribed: number;
  complained: number;
  sender_pool_id: string | null;
  /** The campaign's sending window (null: any time). */
  schedule: Schedule | null;
  /** The pool's daily capacity minus what it sent in the last 24 hours (null: no pool). */
  pool_remaining: number | null;
  /** Accounts of the campaign's pool that may send now (senders/health.ts). */
  senders_available: number;
  /** Of those, the accounts below their own daily limit in the last 24 hours. */
  senders_with_room: number;
}

export async function readCounters(em: EntityManager, workspaceId: string, campaignId: string, now: Date): Promise<Counters | null> {
  // Primary-key reads on campaigns, campaign_counters and sender_pools; the pool's members
  // (pool_members primary key) with their usage counted as the claim counts it (tallies.ts):
  // constant time at any campaign size, but for first steps a large start left to the workers
  // (queue.ts, first_step_backlog): queued from the start's commit, counted over the backlog's
  // range until its last chunk is written (seconds).
  const w = tallyWindow(now);
  const rows = await sql<Counters>(
    em,
    `select k.enrolled, (k.queued + ${pendingFirstStepsSql('c.id')})::int as queued, k.scheduled, k.sent, k.delivered, k.bounced, k.replied, k.opened, k.unsubscribed, k.complained,
            c.sender_pool_id, c.schedule,
            case when p.id is null then null else (p.daily_capacity - ${usedSql('p.id', 'pool_id')})::int end as pool_remaining,
            s.available as senders_available, s.with_room as senders_with_room
       from campaigns c join campaign_counters k on k.campaign_id = c.id
       left join sender_pools p on p.id = c.sender_pool_id
       cross join lateral (
         select count(*)::int as available,
                (count(*) filter (where a.daily_limit is null or ${usedSql('a.id', 'sender_account_id')} < a.daily_limit))::int as with_room
           from pool_members pm join sender_accounts a on a.id = pm.sender_account_id
          where pm.pool_id = c.sender_pool_id and a.status = 'active' and a.health <> 'auth_failed'
            and (a.health_retry_at is null or a.health_retry_at <= ?)) s
      where c.id = ? and c.workspace_id = ?`,
    [w.edgeEnd, w.since, w.edgeEnd, w.edgeEnd, w.since, w.edgeEnd, now, campaignId, workspaceId],
  );
  return rows[0] ?? null;
}
