import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { bumpCounters } from '../campaigns/repository.ts';

export type EndStatus = 'completed' | 'replied' | 'bounced' | 'unsubscribed' | 'suppressed';

/** Which statuses each ending may replace (contract §7: unsubscribe overrides completed). */
const REPLACES: Record<EndStatus, string[]> = {
  completed: ['active'],
  replied: ['active', 'completed'],
  bounced: ['active', 'completed'],
  suppressed: ['active'],
  unsubscribed: ['active', 'completed', 'replied'],
};

/**
 * Ends enrollments: sets their status, cancels their pending (queued or scheduled) messages and
 * adjusts the campaign counters, all in the caller's transaction. A message already being sent
 * finishes; its outcome schedules nothing further because the enrollment is no longer active.
 * Returns the enrollments that changed.
 */
export async function endEnrollments(em: EntityManager, enrollmentIds: string[], status: EndStatus, event: string, now: Date) {
  if (!enrollmentIds.length) return [];
  const ended = await sql<{ id: string; campaign_id: string }>(
    em,
    `update enrollments set status = ?, last_event = ?, last_event_at = ?, updated_at = ?
      where id = any(?::text[]) and status = any(?::text[])
      returning id, campaign_id`,
    [status, event, now, now, enrollmentIds, REPLACES[status]],
  );
  if (!ended.length) return ended;
  // outbound_pending_enrollment_idx
  const cancelled = await sql<{ campaign_id: string; old_state: string }>(
    em,
    `update outbound_messages m set state = 'cancelled', cancel_reason = ?, updated_at = ?
       from (select id, state as old_state from outbound_messages
              where enrollment_id = any(?::text[]) and state in ('queued', 'scheduled') for update) o
      where m.id = o.id
      returning m.campaign_id, o.old_state`,
    [status, now, ended.map((e) => e.id)],
  );
  const byCampaign = new Map<string, { queued: number; scheduled: number; unsubscribed: number }>();
  const slot = (id: string) => byCampaign.get(id) ?? byCampaign.set(id, { queued: 0, scheduled: 0, unsubscribed: 0 }).get(id)!;
  for (const c of cancelled) slot(c.campaign_id)[c.old_state === 'queued' ? 'queued' : 'scheduled']--;
  if (status === 'unsubscribed') for (const e of ended) slot(e.campaign_id).unsubscribed++;
  for (const [campaignId, delta] of [...byCampaign.entries()].sort(([a], [b]) => a.localeCompare(b))) await bumpCounters(em, campaignId, delta);
  return ended;
}
