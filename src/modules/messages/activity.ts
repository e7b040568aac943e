import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { tallyWindow, usedSql } from './tallies.ts';
import { toIso } from '../../shared/time.ts';
import { countedReplyRowSql } from '../inbound/repository.ts';
import { bouncedMessageSql } from './counters.ts';

// Counts over the sent log for the dashboard: a campaign's timeline and each sender account's
// rolling 24-hour sends. Read-only; the timeline also counts the campaign's replies (inbound's
// table) in the same statement, so its buckets come from one snapshot.

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
 * time among the campaign's messages (the same index's campaign prefix; bounces as the `bounced`
 * counter counts them, bouncedMessageSql). Replied leads as the `replied` counter counts them
 * (countedReplyRowSql: a person's answer, not a complaint or a bounce report), each lead once,
 * in the bucket of its first such reply: the replies received in the span
 * (replies_campaign_received_idx) that no earlier counted reply of the lead precedes
 * (replies_lead_idx). Summed over all time, the stats' `replied`.
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
       left join (select date_trunc(?, m.bounced_at, 'UTC') as t, count(*) as bounced
                    from outbound_messages m where m.campaign_id = ? and ${bouncedMessageSql('m')} and m.bounced_at >= ? and m.bounced_at < ? group by 1) x on x.t = b.t
       left join (select date_trunc(?, f.received_at, 'UTC') as t, count(*) as replied
                    from replies f where f.campaign_id = ? and ${countedReplyRowSql('f')} and f.received_at >= ? and f.received_at < ?
                     and not exists (select 1 from replies e where e.campaign_id = f.campaign_id and e.lead_id = f.lead_id and ${countedReplyRowSql('e')}
                                        and (e.received_at, e.id) < (f.received_at, f.id))
                   group by 1) r on r.t = b.t
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

/** Each given sender account's rolling 24-hour sends, counted as the claim counts them (tallies.ts), by account id. */
export async function sentLast24hByAccount(em: EntityManager, accountIds: string[], now: Date): Promise<Map<string, number>> {
  if (accountIds.length === 0) return new Map();
  const w = tallyWindow(now);
  const rows = await sql<{ id: string; sent: string }>(
    em,
    `select a.id, ${usedSql('a.id', 'sender_account_id')} as sent
       from unnest(?::text[]) as a(id)`,
    [w.edgeEnd, w.since, w.edgeEnd, accountIds],
  );
  return new Map(rows.map((r) => [r.id, Number(r.sent)]));
}
