import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { bumpCounters } from './counters.ts';

// Enrollment transitions: ending enrollments (which cancels their pending messages), noting an
// event on one, postponing its waiting step.

export type EndStatus = 'completed' | 'replied' | 'bounced' | 'unsubscribed' | 'suppressed' | 'removed';

/**
 * Which statuses each ending may replace (contract §7: unsubscribe overrides completed). An
 * operator's removal ends what may still send (an active enrollment, or one suppressed at
 * enrollment, which taking the address off the list would make active again); what the lead's
 * mail does afterwards (a reply, a bounce, an unsubscribe) replaces it as it replaces completed.
 */
const REPLACES: Record<EndStatus, string[]> = {
  completed: ['active'],
  replied: ['active', 'completed', 'removed'],
  bounced: ['active', 'completed', 'removed'],
  suppressed: ['active'],
  unsubscribed: ['active', 'completed', 'replied', 'removed'],
  removed: ['active', 'suppressed'],
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
  // outbound_enrollment_step_key: only campaign messages have an enrollment (0017)
  const cancelled = await sql<{ campaign_id: string; old_state: string }>(
    em,
    `update outbound_messages m set state = 'cancelled', cancel_reason = ?, updated_at = ?
       from (select id, state as old_state from outbound_messages
              where enrollment_id = any(?::text[]) and kind = 'campaign' and state in ('queued', 'scheduled') for update) o
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

/**
 * A campaign's sequence now has `stepCount` steps (changed while not running): the enrollments
 * whose next message (queued or scheduled) is of a step that no longer exists end as
 * completed, their message cancelled and the counters with it, in the caller's transaction.
 * (The dispatcher ends one the same way when it meets such a message; doing it here keeps the
 * campaign's stats and its leads' next send true from the moment the steps change.) Returns
 * how many ended.
 */
export async function completeBeyondLastStep(em: EntityManager, campaignId: string, stepCount: number, now: Date): Promise<number> {
  // enrollments_active_campaign_idx for the campaign's active enrollments, then
  // outbound_enrollment_step_key per enrollment: the cost follows the campaign, not the table.
  // The messages are locked in enrollment order (endEnrollments' order).
  const rows = await sql<{ enrollment_id: string }>(
    em,
    `select m.enrollment_id from enrollments e
       join outbound_messages m on m.enrollment_id = e.id and m.kind = 'campaign' and m.step_index >= ?
      where e.campaign_id = ? and e.status = 'active' and m.state in ('queued', 'scheduled')
      order by m.enrollment_id for update of m`,
    [stepCount, campaignId],
  );
  const ended = await endEnrollments(em, [...new Set(rows.map((r) => r.enrollment_id))], 'completed', 'completed', now);
  return ended.length;
}

/**
 * A campaign's steps changed their `delayHours` (while not running): each waiting follow-up
 * (scheduled, or queued and not attempted yet) of a changed step is due its new delay after the
 * previous step was sent (contract §4), in the caller's transaction, and never before the
 * time an out-of-office answer postponed it to (`not_before`). A queued one whose new time is
 * ahead becomes scheduled again (the counters with it); a scheduled one whose new time has
 * passed is promoted by the next round, as any. `delays[i]` is step i's delay before and after.
 * Call lockWaitingMessages first. Returns how many moved.
 */
export async function rescheduleFollowUps(em: EntityManager, campaignId: string, delays: Array<{ before: number; after: number }>, now: Date): Promise<number> {
  const changed = delays.map((d, i) => ({ ...d, i })).filter((d) => d.i > 0 && d.before !== d.after);
  if (!changed.length) return 0;
  // enrollments_active_campaign_idx for the campaign's active enrollments, then
  // outbound_enrollment_step_key for each waiting step and the one before it (the rows are
  // already locked by lockWaitingMessages; the lock here only re-reads them).
  const moved = await sql<{ old_state: 'queued' | 'scheduled'; state: 'queued' | 'scheduled' }>(
    em,
    `with d as (
       select * from unnest(?::int[], ?::float8[]) as d(step_index, after_h)
     ), f as (
       select m.id, m.state, greatest(p.sent_at + d.after_h * interval '1 hour', m.not_before) as due_at
         from enrollments e
         join outbound_messages m on m.enrollment_id = e.id and m.kind = 'campaign'
         join d on d.step_index = m.step_index
         join outbound_messages p on p.enrollment_id = e.id and p.kind = 'campaign' and p.step_index = m.step_index - 1
        where e.campaign_id = ? and e.status = 'active' and p.sent_at is not null
          and (m.state = 'scheduled' or (m.state = 'queued' and m.attempts = 0))
        order by m.enrollment_id for update of m
     )
     update outbound_messages o
        set due_at = f.due_at, state = case when f.due_at > ? then 'scheduled' else f.state end, updated_at = ?
       from f
      where o.id = f.id and o.due_at is distinct from f.due_at
     returning f.state as old_state, o.state`,
    [changed.map((d) => d.i), changed.map((d) => d.after), campaignId, now, now],
  );
  const rescheduled = moved.filter((m) => m.old_state === 'queued' && m.state === 'scheduled').length;
  if (rescheduled) await bumpCounters(em, campaignId, { queued: -rescheduled, scheduled: rescheduled });
  return moved.length;
}

/**
 * Locks the campaign's active enrollments that have a waiting message (queued, scheduled), and
 * those messages, in enrollment order, each enrollment before its message: the order of every
 * other writer (a reply, a bounce, an unsubscribe: the enrollment, its messages, then the
 * counters). A change of the campaign's steps takes them all first, before it moves any
 * counter: promoteDue holds the messages it promotes while it waits for the counters, so a
 * change that moved a counter and then waited for one of those messages would deadlock with
 * it, and one that ended an enrollment after locking its message would deadlock with a reply.
 */
export async function lockWaitingMessages(em: EntityManager, campaignId: string): Promise<void> {
  // enrollments_active_campaign_idx, then outbound_enrollment_step_key per enrollment
  await sql(
    em,
    `select m.id from enrollments e
       join outbound_messages m on m.enrollment_id = e.id and m.kind = 'campaign'
      where e.campaign_id = ? and e.status = 'active' and m.state in ('queued', 'scheduled')
      order by m.enrollment_id, m.step_index for no key update of e, m`,
    [campaignId],
  );
}

/** The id of the lead's enrollment in the campaign (enrollments_campaign_lead_key), or undefined. */
export async function enrollmentInCampaign(em: EntityManager, campaignId: string, leadId: string): Promise<string | undefined> {
  const [e] = await sql<{ id: string }>(em, `select id from enrollments where campaign_id = ? and lead_id = ?`, [campaignId, leadId]);
  return e?.id;
}

/** Every enrollment of a lead, locked in id order (ending them all: unsubscribe, complaint). */
export async function enrollmentsOfLead(em: EntityManager, leadId: string): Promise<string[]> {
  // enrollments_lead_idx
  const enrollments = await sql<{ id: string }>(em, `select id from enrollments where lead_id = ? order by id for update`, [leadId]);
  return enrollments.map((e) => e.id);
}

/**
 * Locks one enrollment (as an update of it does) for the rest of the caller's transaction:
 * taken first by work that reads what happened to the lead in the campaign and then writes by
 * it (the first human reply counts once in `replied`), so two such transactions for the same
 * lead run one after the other. The enrollment first, then its messages, then the counters.
 */
export async function lockEnrollment(em: EntityManager, enrollmentId: string): Promise<void> {
  await sql(em, `select 1 from enrollments where id = ? for no key update`, [enrollmentId]);
}

/** lockEnrollment that also answers the enrollment's status (undefined: no such enrollment). */
export async function lockEnrollmentStatus(em: EntityManager, enrollmentId: string): Promise<string | undefined> {
  const [e] = await sql<{ status: string }>(em, `select status from enrollments where id = ? for no key update`, [enrollmentId]);
  return e?.status;
}

/** The lead's last event on an enrollment that goes on (an open, an out-of-office). */
export async function noteEnrollmentEvent(em: EntityManager, enrollmentId: string, event: 'opened' | 'out_of_office', now: Date): Promise<void> {
  await sql(em, `update enrollments set last_event = ?, last_event_at = ?, updated_at = ? where id = ?`, [event, now, now, enrollmentId]);
}

export interface Postponed {
  messageId: string;
  from: Date;
  to: Date;
}

/**
 * Moves the enrollment's waiting step (queued, or scheduled earlier than `notBefore`) to
 * `notBefore`. A step already scheduled later stays where it is, and one a worker has claimed
 * (`sending`) goes out: its SMTP transaction may have begun.
 */
export async function postponeNextStep(em: EntityManager, enrollmentId: string, notBefore: Date, now: Date): Promise<Postponed | null> {
  // outbound_enrollment_step_key
  const [m] = await sql<{ id: string; campaign_id: string; state: 'queued' | 'scheduled'; due_at: Date | string }>(
    em,
    `select id, campaign_id, state, due_at from outbound_messages
      where enrollment_id = ? and kind = 'campaign' and state in ('queued', 'scheduled') order by step_index limit 1 for update`,
    [enrollmentId],
  );
  if (!m) return null;
  if (new Date(m.due_at) >= notBefore) {
    // Already later: it stays, but the lead's absence is its floor if its delay is shortened.
    await sql(em, `update outbound_messages set not_before = greatest(not_before, ?::timestamptz), updated_at = ? where id = ?`, [notBefore, now, m.id]);
    return null;
  }
  // Scheduled (not queued) even when the new time has passed by the time promoteDue runs: the
  // promotion moves it and its counters like any follow-up.
  // not_before: a later change of the step's delay keeps this floor (rescheduleFollowUps).
  await sql(em, `update outbound_messages set state = 'scheduled', due_at = ?, not_before = ?, updated_at = ? where id = ?`, [notBefore, notBefore, now, m.id]);
  if (m.state === 'queued') await bumpCounters(em, m.campaign_id, { queued: -1, scheduled: 1 });
  return { messageId: m.id, from: new Date(m.due_at), to: notBefore };
}
