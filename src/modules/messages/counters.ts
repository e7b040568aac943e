import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';

// campaign_counters: the stats of a campaign, kept in the transactions that change what they
// count (the message and enrollment transitions of this module). Owned here; the campaign's
// row is created with the campaign (createCounters).

export type CounterName = 'enrolled' | 'queued' | 'scheduled' | 'sent' | 'delivered' | 'bounced' | 'replied' | 'opened' | 'unsubscribed' | 'complained';

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
  /** Accounts of the campaign's pool that may send now (senders/health.ts). */
  senders_available: number;
}

export async function readCounters(em: EntityManager, workspaceId: string, campaignId: string, now: Date): Promise<Counters | null> {
  // Primary-key reads on campaigns and campaign_counters: constant time at any campaign size.
  const rows = await sql<Counters>(
    em,
    `select k.enrolled, k.queued, k.scheduled, k.sent, k.delivered, k.bounced, k.replied, k.opened, k.unsubscribed, k.complained,
            c.sender_pool_id,
            (select count(*)::int from pool_members pm join sender_accounts a on a.id = pm.sender_account_id
              where pm.pool_id = c.sender_pool_id and a.status = 'active' and a.health <> 'auth_failed'
                and (a.health_retry_at is null or a.health_retry_at <= ?)) as senders_available
       from campaigns c join campaign_counters k on k.campaign_id = c.id
      where c.id = ? and c.workspace_id = ?`,
    [now, campaignId, workspaceId],
  );
  return rows[0] ?? null;
}
