import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { toIso } from '../../shared/time.ts';

// Read paths the dashboard needs beside the existing repositories (docs/dashboard.md): the
// suppression list, the campaign timeline. Scope first: every function takes the workspace.

/** Escapes LIKE wildcards so a search is a plain substring match. */
export function likeLiteral(s: string): string {
  return s.replace(/[\\%_]/g, (c) => '\\' + c);
}

export async function listSuppressions(em: EntityManager, workspaceId: string, opts: { q?: string; reason?: string; limit: number; offset: number }) {
  const where = ['workspace_id = ?'];
  const params: unknown[] = [workspaceId];
  // email_key is the lower-cased, trimmed address: suppressions_email_trgm_idx answers the substring.
  if (opts.q) {
    where.push(`email_key like ? escape '\\'`);
    params.push(`%${likeLiteral(opts.q.trim().toLowerCase())}%`);
  }
  if (opts.reason) {
    where.push('reason = ?');
    params.push(opts.reason);
  }
  const rows = await sql<{ email: string; reason: string; source: string | null; created_at: Date | string }>(
    em,
    `select email, reason, source, created_at from suppressions where ${where.join(' and ')} order by created_at desc, email_key limit ? offset ?`,
    [...params, opts.limit, opts.offset],
  );
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from suppressions where ${where.join(' and ')}`, params);
  const total = Number(n);
  return {
    data: rows.map((r) => ({ email: r.email, reason: r.reason, source: r.source, createdAt: toIso(r.created_at) })),
    total,
    hasMore: opts.offset + rows.length < total,
  };
}

export const BUCKET_MS = { hour: 3_600_000, day: 86_400_000 } as const;
export type Bucket = keyof typeof BUCKET_MS;

interface TimelineRow {
  t: Date | string;
  sent: string | number;
  delivered: string | number;
  opened: string | number;
  bounced: string | number;
  replied: string | number;
}

/**
 * Counts per UTC hour or day of one campaign, from `from` to `to` (both bucket starts),
 * zero-filled. Sends by sent_at (outbound_campaign_sent_idx), opens and bounces by their own
 * time among the campaign's messages (the same index's campaign prefix), replies by received_at
 * (replies_campaign_received_idx).
 */
export async function campaignTimeline(em: EntityManager, campaignId: string, bucket: Bucket, from: Date, to: Date) {
  const end = new Date(to.getTime() + BUCKET_MS[bucket]);
  const step = bucket === 'hour' ? '1 hour' : '1 day';
  const rows = await sql<TimelineRow>(
    em,
    `select b.t, coalesce(s.sent, 0) as sent, coalesce(s.delivered, 0) as delivered, coalesce(o.opened, 0) as opened,
            coalesce(x.bounced, 0) as bounced, coalesce(r.replied, 0) as replied
       from generate_series(?::timestamptz, ?::timestamptz, ?::interval) as b(t)
       left join (select date_trunc(?, sent_at, 'UTC') as t, count(*) as sent, count(*) filter (where state = 'sent') as delivered
                    from outbound_messages where campaign_id = ? and kind = 'campaign' and sent_at >= ? and sent_at < ? group by 1) s on s.t = b.t
       left join (select date_trunc(?, opened_at, 'UTC') as t, count(*) as opened
                    from outbound_messages where campaign_id = ? and kind = 'campaign' and opened_at >= ? and opened_at < ? group by 1) o on o.t = b.t
       left join (select date_trunc(?, bounced_at, 'UTC') as t, count(*) as bounced
                    from outbound_messages where campaign_id = ? and kind = 'campaign' and bounced_at >= ? and bounced_at < ? group by 1) x on x.t = b.t
       left join (select date_trunc(?, received_at, 'UTC') as t, count(*) as replied
                    from replies where campaign_id = ? and classification in ('interested', 'not_interested', 'unsubscribe')
                     and received_at >= ? and received_at < ? group by 1) r on r.t = b.t
      order by b.t`,
    [from, to, step, ...[0, 1, 2, 3].flatMap(() => [bucket, campaignId, from, end])],
  );
  return rows.map((r) => ({
    t: toIso(r.t),
    sent: Number(r.sent),
    delivered: Number(r.delivered),
    opened: Number(r.opened),
    bounced: Number(r.bounced),
    replied: Number(r.replied),
  }));
}

export async function campaignExists(em: EntityManager, workspaceId: string, campaignId: string): Promise<boolean> {
  return (await sql(em, 'select 1 from campaigns where workspace_id = ? and id = ?', [workspaceId, campaignId])).length > 0;
}

/**
 * Each sender account's rolling 24-hour sends (outbound_sender_sent_idx) and its pools
 * (pool_members), for the dashboard's sender list.
 */
export async function senderUsage(em: EntityManager, workspaceId: string, now: Date): Promise<Map<string, { sentLast24h: number; poolIds: string[] }>> {
  const rows = await sql<{ id: string; sent: string; pools: string[] }>(
    em,
    `select a.id,
            (select count(*) from outbound_messages m
              where m.sender_account_id = a.id and m.sent_at is not null and m.sent_at > ?::timestamptz - interval '24 hours') as sent,
            coalesce((select array_agg(pm.pool_id order by pm.added_at, pm.pool_id) from pool_members pm where pm.sender_account_id = a.id), '{}') as pools
       from sender_accounts a
      where a.workspace_id = ?`,
    [now, workspaceId],
  );
  return new Map(rows.map((r) => [r.id, { sentLast24h: Number(r.sent), poolIds: r.pools }]));
}
