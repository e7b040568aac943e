import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { PreparedStatements } from '../../db/statements.ts';
import { messageSentJsonb } from '../events/catalogue.ts';
import { owedWebhooksSql } from '../events/outbox.ts';
import { bumpCounters } from './counters.ts';
import { endEnrollments, lockEnrollment } from './enrollments.ts';
import { GUARD_PASSES } from './send.ts';
import { tallyInsert } from './tallies.ts';

// The transitions of a message after its claim, each one statement or one short sequence in
// the caller's transaction, counters and enrollments moved with it: requeue (and its variants),
// markSent (the group-committed hot path), bounce, fail, cancel, markOpened.

/**
 * The one "back to the queue" reset: a message that was `sending` leaves its claim, its pool
 * and account and its SMTP start (its Message-ID is written only with an outcome, so it is null
 * here; cleared anyway for the retry paths that wrote it before). workers/registry.ts's reclaim
 * uses it too.
 */
export const REQUEUED = `state = 'queued', claimed_by = null, lease_until = null, pool_id = null, sender_account_id = null,
            smtp_started_at = null, message_id_header = null`;

/** Back to the queue, untouched (a pause, an account that cannot send, a shutdown). */
export async function requeue(em: EntityManager, id: string, workerId: string, now: Date, dueAt?: Date): Promise<void> {
  await sql(
    em,
    `update outbound_messages set ${REQUEUED}, updated_at = ?, due_at = coalesce(?, due_at)
      where id = ? and state = 'sending' and claimed_by is not distinct from ?`,
    [now, dueAt ?? null, id, workerId],
  );
}

/**
 * A batch this worker claimed and then could not start (its load or its preparation failed):
 * none of it reached SMTP, so all of it goes back to the queue at once. Returns how many.
 */
export async function requeueClaimed(em: EntityManager, ids: string[], workerId: string, now: Date): Promise<number> {
  const rows = await sql(
    em,
    `update outbound_messages set ${REQUEUED}, updated_at = ?
      where id = any(?::text[]) and state = 'sending' and claimed_by is not distinct from ?
      returning id`,
    [now, ids, workerId],
  );
  return rows.length;
}

/**
 * Messages claimed by a worker that died (lease expired) go back to the queue. Those whose SMTP
 * transaction had started (or had ended with its outcome not yet committed) may have been sent:
 * they can repeat (documented). The lease of a live worker's messages is renewed until their
 * outcome is recorded, so only a dead (or stalled) worker's claims expire.
 */
export async function requeueExpired(em: EntityManager, now: Date): Promise<{ released: number }> {
  // outbound_lease_idx
  const rows = await sql(
    em,
    `update outbound_messages m set ${REQUEUED}, updated_at = ?
       from (select id from outbound_messages where state = 'sending' and lease_until < ? for update skip locked) o
      where m.id = o.id
      returning m.id`,
    [now, now],
  );
  return { released: rows.length };
}

/** An SMTP answer of 4xx: another attempt later, or false when the attempts are used up (a soft bounce then). */
export async function requeueForRetry(em: EntityManager, id: string, workerId: string, response: string, now: Date, retryDelaysMs: number[]): Promise<'retry' | 'exhausted' | 'lost'> {
  const [row] = await sql<{ attempts: number }>(
    em,
    `update outbound_messages set attempts = attempts + 1, last_error = ?, smtp_response = ?, updated_at = ?
      where id = ? and state = 'sending' and claimed_by is not distinct from ? returning attempts`,
    [response, response, now, id, workerId],
  );
  if (!row) return 'lost';
  if (row.attempts > retryDelaysMs.length) return 'exhausted';
  await sql(
    em,
    `update outbound_messages set ${REQUEUED}, due_at = ?
      where id = ?`,
    [new Date(now.getTime() + retryDelaysMs[row.attempts - 1]), id],
  );
  return 'retry';
}

/**
 * The account failed, not the message: back to the queue as it was, for another account of
 * the pool; no attempt is counted against the lead.
 */
export async function requeueAfterAccountFailure(em: EntityManager, id: string, workerId: string, response: string, now: Date): Promise<void> {
  await sql(
    em,
    `update outbound_messages set ${REQUEUED}, last_error = ?, updated_at = ?
      where id = ? and state = 'sending' and claimed_by is not distinct from ?`,
    [response, now, id, workerId],
  );
}

/** message.sent's payload over the columns of the accepted statement's `m` (events/catalogue.ts). */
export const MESSAGE_SENT_DATA = messageSentJsonb({
  campaignId: 'campaign_id',
  leadId: 'lead_id',
  email: 'to_email',
  sequenceStep: 'step_index',
  messageId: 'id',
  messageIdHeader: 'message_id_header',
  sentAt: 'sent',
});

/** One accepted message of a group commit (markSent). */
export interface AcceptedOutcome {
  id: string;
  /** When the server accepted it (`sent_at`, the event's time). */
  at: Date;
  response: string;
  messageIdHeader: string;
  subject: string;
  inReplyTo: string | null;
  references: string | null;
  /** Ids for the next step's message and the message.sent event (adapters/ids.ts). */
  nextId: string;
  eventId: string;
}

/**
 * markSent's statement (exported for the test of its plan). Parameters: the nine arrays of the
 * batch (id, sent, response, mid, subject, in_reply_to, refs, next_id, event_id), the worker's
 * id, the guards' ids, the worker's id again.
 */
export const ACCEPTED_SQL = `with t as (
     select * from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])
       as t(id, sent, response, mid, subject, in_reply_to, refs, next_id, event_id)
   ), mine as (
     -- by primary key (see markSent): locked, then tested on the row as locked
     select x.id from t cross join lateral (
       select id, state, claimed_by from outbound_messages where id = t.id offset 0 for update) x
      where x.state = 'sending' and x.claimed_by is not distinct from ?
   ), m as (
     update outbound_messages o set state = 'sent', sent_at = t.sent::timestamptz, smtp_response = t.response, lease_until = null,
            updated_at = t.sent::timestamptz, message_id_header = t.mid, subject = t.subject, in_reply_to = t.in_reply_to,
            references_header = t.refs
       from t join mine on mine.id = t.id
      where o.id = t.id
      returning o.id, o.workspace_id, o.campaign_id, o.enrollment_id, o.lead_id, o.step_index, o.to_email, o.message_id_header,
                o.sender_account_id, o.pool_id, o.claimed_by, t.sent, t.next_id, t.event_id
   ), tally as (
     ${tallyInsert('select sent::timestamptz as sent_at, claimed_by as writer, workspace_id, pool_id, sender_account_id from m')}
   ), nxt as (
     select m.*, s.step_index as next_step, s.delay_hours
       from m join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index + 1
   ), e as (
     update enrollments en set last_event = 'sent', last_event_at = m.sent::timestamptz, updated_at = m.sent::timestamptz,
            sender_account_id = coalesce(m.sender_account_id, en.sender_account_id),
            status = case when en.status = 'active' and not exists (select 1 from nxt where nxt.enrollment_id = en.id) then 'completed' else en.status end
       from m where en.id = m.enrollment_id
      returning en.id, en.status
   ), ins as (
     -- The next step only for an enrollment still active as updated: the update waits for a
     -- transaction ending it (a reply, an unsubscribe) and returns the status that one wrote.
     -- Read from this statement's snapshot instead, a reply committed meanwhile cancelled the
     -- lead's waiting messages without this one, and it was scheduled for an ended enrollment.
     insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
     select next_id, workspace_id, campaign_id, enrollment_id, lead_id, next_step,
            case when delay_hours > 0 then 'scheduled' else 'queued' end,
            sent::timestamptz + delay_hours * interval '1 hour', to_email, sent::timestamptz, sent::timestamptz
       from nxt
      where nxt.enrollment_id in (select e.id from e where e.status = 'active')
     on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing
     returning campaign_id, state
   ), k as (
     select m.campaign_id, count(*) as n,
            (select count(*) from ins where ins.campaign_id = m.campaign_id and ins.state = 'queued') as q,
            (select count(*) from ins where ins.campaign_id = m.campaign_id and ins.state = 'scheduled') as s
       from m group by m.campaign_id
   ), c as (
     update campaign_counters cc set sent = sent + k.n, delivered = delivered + k.n, queued = queued - k.n + k.q, scheduled = scheduled + k.s
       from k where cc.campaign_id = k.campaign_id
      returning 1
   ), ev as (
     insert into events (id, workspace_id, type, data, created_at, webhook_ids)
     select event_id, workspace_id, 'message.sent',
            ${MESSAGE_SENT_DATA},
            sent::timestamptz, owed.ids
       from m cross join lateral (select ${owedWebhooksSql('m.workspace_id', "'message.sent'")} as ids) owed
      where cardinality(owed.ids) > 0
      returning 1
   ), g as (
     -- by primary key, one lookup per id, as in mine (see markSent)
     select m.id from unnest(?::text[]) as gid(id)
       cross join lateral (select * from outbound_messages m where m.id = gid.id offset 0) m
      where ${GUARD_PASSES}
   )
   select 'sent' as k, id from m
   union all
   select 'go', id from g`;

/**
 * Accepted outcomes as one statement (its own transaction): each message is sent with the
 * server's reply and its rendered headers, its account becomes the enrollment's (sticky: the
 * lead's follow-ups go through it), the next step is scheduled (or the enrollment completes),
 * counters move once per campaign, the pool's and account's sent tallies once per bucket
 * (tallies.ts: the writer's rows are the worker's), and message.sent goes to the outbox for
 * each (when a webhook of the workspace subscribes to it: events/outbox.ts recordEvent says why).
 * Data-modifying CTEs all see one snapshot and commit together. Returns the ids recorded
 * (a message no longer ours is not).
 *
 * The same statement answers the guards asked meanwhile (`guardIds`, messages/send.ts
 * GUARD_PASSES): which of those messages may end their data. It reads in the statement's
 * snapshot, like a statement of its own; riding on the outcome write costs no round trip of its
 * own (on these machines a round trip's system calls cost more than the guard's execution).
 * With no outcome in the batch it is the guard alone (it writes nothing, so nothing to commit).
 *
 * Every row is found by its primary key, one lookup per id, and the state it must be in is
 * tested on the row found, outside the lookup (`offset 0` keeps the test from being pushed into
 * it; the enrollment's and campaign's status are compared from scalar subqueries by id). A
 * lookup that carries `state = 'sending'` (or `status = 'active'`) matches the predicate of
 * the partial indexes over those states (outbound_claimed_by_idx, outbound_sending_*_idx,
 * enrollments_active_campaign_idx), and the planner read one whole, filtering on the id: every
 * message claimed by any worker plus the dead entries of those sent since the last vacuum,
 * for each statement, or every active enrollment, whenever the statistics made the index look
 * small (a table analyzed before a campaign queued its messages). The guards read that way
 * (`m.id = any(...)` with the conditions) were a full scan of outbound_claimed_by_idx in every
 * statement, guards or not (~280 entries, 0.1 ms), a quarter of PostgreSQL's CPU per message
 * in bench:send (docs/benchmarks.md, issue 20, session 13). `mine` locks each row and then tests
 * it as locked (FOR UPDATE waits for a concurrent writer and returns the row's latest version);
 * the update then matches on the id alone.
 */
export async function markSent(
  stmts: PreparedStatements,
  batch: AcceptedOutcome[],
  workerId: string,
  guardIds: string[] = [],
): Promise<{ sent: Set<string>; go: Set<string> }> {
    const rows = await stmts.run<{ k: 'sent' | 'go'; id: string }>(
      'sending.accepted',
      ACCEPTED_SQL,
      [
        batch.map((p) => p.id),
        batch.map((p) => p.at.toISOString()),
        batch.map((p) => p.response),
        batch.map((p) => p.messageIdHeader),
        batch.map((p) => p.subject),
        batch.map((p) => p.inReplyTo),
        batch.map((p) => p.references),
        batch.map((p) => p.nextId),
        batch.map((p) => p.eventId),
        workerId,
        guardIds,
        workerId,
      ],
    );
  const sent = new Set<string>();
  const go = new Set<string>();
  for (const r of rows) (r.k === 'sent' ? sent : go).add(r.id);
  return { sent, go };
}

/** Locks a message for the rest of the caller's transaction (before its enrollment: the workers' order). */
export async function lockMessage(em: EntityManager, id: string): Promise<void> {
  await sql(em, `select 1 from outbound_messages where id = ? for update`, [id]);
}

/**
 * The writer of answered copies' outcomes (`claimed_by`, and their tallies' writer rows), and of
 * the copies a stopped worker's journal names (recordJournaledCopy).
 */
export const ANSWERED_COPY = 'answered-copy';

/**
 * A copy of a message went out, but its outcome was never recorded (its worker was killed
 * after the server accepted it: the message is back in the queue, or claimed again for
 * another attempt), and an answer, a bounce report or a complaint names it by its Message-ID
 * (messages/message-id.ts): it was sent. It is recorded as markSent records an accepted
 * message (counters, the enrollment, its next step, message.sent), at `copy.at` (when the
 * answer arrived: the copy went out before), with the header the answer named; a claim
 * another worker holds is taken from it, so that attempt's guard, if not answered yet, refuses
 * it before the end of its data and the lead gets no second copy (one whose guard passed
 * before this commits still goes out; its outcome is then not recorded). Without this the
 * answer's effects cancelled the message (a reply, an unsubscribe) or postponed the copy itself
 * for a second send (an out-of-office), and the campaign never counted it sent. The caller holds the enrollment
 * (the order of the writers that end it). False when it is no longer waiting (queued or
 * scheduled) or being sent: its outcome was recorded meanwhile, or it was cancelled or failed.
 */
export async function recordAnsweredCopy(em: EntityManager, copy: AcceptedOutcome, now: Date, sentBy: string | null = null): Promise<boolean> {
  // `sentBy`, the account that sent the copy when the caller knows it, is the message's (and so
  // the enrollment's sticky account, and the account and pool its tallies count it for) in place
  // of the claim's: a queued message has none, a re-send's claim may be another account's.
  const [taken] = await sql<{ campaign_id: string; was: string }>(
    em,
    `update outbound_messages o set state = 'sending', claimed_by = ?, lease_until = null, updated_at = ?,
            sender_account_id = coalesce(?::text, o.sender_account_id),
            pool_id = case when ?::text is null then o.pool_id
                           else coalesce(o.pool_id, (select c.sender_pool_id from campaigns c where c.id = o.campaign_id)) end
       from (select id, state as was from outbound_messages where id = ? for update) p
      where o.id = p.id and p.was in ('queued', 'scheduled', 'sending')
      returning o.campaign_id, p.was`,
    [ANSWERED_COPY, now, sentBy, sentBy, copy.id],
  );
  if (!taken) return false;
  // Counted as queued from here (a copy postponed by an out-of-office was scheduled), as the
  // outcome below expects: it moves it from queued to sent.
  if (taken.was === 'scheduled') await bumpCounters(em, taken.campaign_id, { scheduled: -1, queued: 1 });
  const rows = await sql<{ k: string; id: string }>(em, ACCEPTED_SQL, [
    [copy.id],
    [copy.at.toISOString()],
    [copy.response],
    [copy.messageIdHeader],
    [copy.subject],
    [copy.inReplyTo],
    [copy.references],
    [copy.nextId],
    [copy.eventId],
    ANSWERED_COPY,
    [],
    ANSWERED_COPY,
  ]);
  return rows.some((r) => r.k === 'sent');
}

/**
 * recordAnsweredCopy for a copy known by its id alone: an accepted message whose worker could
 * not write its outcome before it stopped (the database unreachable until its shutdown's
 * deadline) and wrote it to its journal instead (sending/unrecorded.ts). The locks are taken in
 * the writers' order, as the inbound path's (inbound/service.ts recordCopy): a message being
 * sent (again) before its enrollment, a waiting one after it. Returns whether it was recorded,
 * and the state and claim the message had (a `sent` one claimed by another worker went out
 * again).
 */
export async function recordJournaledCopy(
  em: EntityManager,
  copy: AcceptedOutcome,
  sentBy: string,
  now: Date,
): Promise<{ recorded: boolean; state: string | null; claimedBy: string | null }> {
  const [m] = await sql<{ state: string; claimed_by: string | null; enrollment_id: string }>(
    em,
    `select state, claimed_by, enrollment_id from outbound_messages where id = ?`,
    [copy.id],
  );
  if (!m) return { recorded: false, state: null, claimedBy: null };
  if (m.state === 'sending') await lockMessage(em, copy.id);
  await lockEnrollment(em, m.enrollment_id);
  return { recorded: await recordAnsweredCopy(em, copy, now, sentBy), state: m.state, claimedBy: m.claimed_by };
}

/** The message facts a bounce or failure needs. */
export interface MessageOfEnrollment {
  id: string;
  campaignId: string;
  enrollmentId: string;
}

/**
 * What a bounce writes besides its message, enrollment and counters (a hard bounce's
 * suppression), run after the enrollment is locked and before the enrollment ends and the
 * counters move: every writer that suppresses an address (an unsubscribe by reply, by link or by
 * an operator's correction, a complaint) holds the lead's enrollment, inserts the suppression,
 * and then moves the counters. Suppressed after the counters, a bounce whose enrollment had ended
 * already (it does not wait for it then) held the campaign's counters and waited for an
 * unsubscribe's uncommitted suppression of the same address while that waited for the
 * counters: a deadlock (2026-11-30, docs/decisions.md).
 */
export type BeforeEnding = (em: EntityManager) => Promise<unknown>;

/**
 * Permanently rejected by the SMTP server (or out of retries): `bounced` with the rendered
 * headers, counted as sent and bounced, the enrollment `bounced`. False when the message is no
 * longer this worker's. `beforeEnding`: the hard bounce's suppression (see BeforeEnding); the
 * caller records message.bounced.
 */
export async function bounce(
  em: EntityManager,
  m: MessageOfEnrollment & { messageIdHeader: string; subject: string; inReplyTo: string | null; references: string | null },
  type: 'hard' | 'soft',
  reason: string,
  workerId: string,
  now: Date,
  beforeEnding?: BeforeEnding,
): Promise<boolean> {
  // Counted as sent, so tallied as sent (tallies.ts), in the same statement; its own writer rows
  // per worker, apart from the outcome statements'.
  const done = await sql(
    em,
    `with b as (
       update outbound_messages set state = 'bounced', sent_at = ?, bounce_type = ?, bounce_reason = ?, bounced_at = ?, smtp_response = ?,
              lease_until = null, updated_at = ?, message_id_header = ?, subject = ?, in_reply_to = ?, references_header = ?
        where id = ? and state = 'sending' and claimed_by is not distinct from ?
        returning id, sent_at, workspace_id, pool_id, sender_account_id
     ), tally as (
       ${tallyInsert(`select sent_at, 'bounce:' || ?::text as writer, workspace_id, pool_id, sender_account_id from b`)}
     )
     select id from b`,
    [now, type, reason, now, reason, now, m.messageIdHeader, m.subject, m.inReplyTo, m.references, m.id, workerId, workerId],
  );
  if (!done.length) return false;
  // The message, then its enrollment (the workers' order), then the suppression; the
  // enrollment's waiting messages before the counters, as everywhere (promoteDue holds messages
  // while it waits for the counters): the other order could deadlock with it.
  await lockEnrollment(em, m.enrollmentId);
  if (beforeEnding) await beforeEnding(em);
  await endEnrollments(em, [m.enrollmentId], 'bounced', `bounced_${type}`, now);
  await bumpCounters(em, m.campaignId, { queued: -1, sent: 1, bounced: 1 });
  return true;
}

/**
 * A delivery-status report for a message the server had accepted: it bounces after all
 * (delivered -1, bounced +1) and its enrollment ends. False when it was not `sent` (already
 * bounced, say). `beforeEnding`: the hard bounce's suppression (see BeforeEnding); the caller
 * records the event.
 */
export async function bounceDelivered(em: EntityManager, m: MessageOfEnrollment, type: string, reason: string, bouncedAt: Date, now: Date, beforeEnding?: BeforeEnding): Promise<boolean> {
  // The enrollment, then the message (markOpened's order; the message is sent, so no worker
  // holds it), then the suppression, the enrollment's waiting messages and the counters.
  await lockEnrollment(em, m.enrollmentId);
  const [updated] = await sql<{ was: string }>(
    em,
    `update outbound_messages o set state = 'bounced', bounce_type = ?, bounce_reason = ?, bounced_at = ?, updated_at = ?
       from (select id, state as was from outbound_messages where id = ? for update) p
      where o.id = p.id and p.was = 'sent'
      returning p.was`,
    [type, reason, bouncedAt, now, m.id],
  );
  if (!updated) return false;
  if (beforeEnding) await beforeEnding(em);
  // Enrollment and messages before the counters (see bounce above).
  await endEnrollments(em, [m.enrollmentId], 'bounced', `bounced_${type}`, now);
  await bumpCounters(em, m.campaignId, { delivered: -1, bounced: 1 });
  return true;
}

/**
 * Failed for a reason of its own (rendering or composing it threw): `failed` with the reason,
 * out of `queued`, the enrollment ends `completed` with last event `failed`.
 */
export async function fail(em: EntityManager, m: MessageOfEnrollment, reason: string, workerId: string, now: Date): Promise<boolean> {
  const done = await sql(
    em,
    `update outbound_messages set state = 'failed', last_error = ?, lease_until = null, updated_at = ?
      where id = ? and state = 'sending' and claimed_by is not distinct from ? returning id`,
    [reason.slice(0, 1000), now, m.id, workerId],
  );
  if (!done.length) return false;
  await endEnrollments(em, [m.enrollmentId], 'completed', 'failed', now);
  await bumpCounters(em, m.campaignId, { queued: -1 });
  return true;
}

/** A queued message whose enrollment ended meanwhile is cancelled; its counter follows. */
export async function cancel(em: EntityManager, id: string, campaignId: string, reason: string, now: Date): Promise<boolean> {
  const rows = await sql(em, `update outbound_messages set state = 'cancelled', cancel_reason = ?, updated_at = ? where id = ? and state = 'queued' returning id`, [
    reason,
    now,
    id,
  ]);
  if (rows.length !== 1) return false;
  await bumpCounters(em, campaignId, { queued: -1 });
  return true;
}

/**
 * The first open of a sent message (counted once); null when it was not the first, or not sent.
 * In the lock order of the other writers (lockEnrollment): the enrollment, then the message,
 * then the counters. The pixel bumped the counters before it touched the enrollment, and
 * deadlocked with a reply of the same lead (enrollment, then counters).
 */
export async function markOpened(em: EntityManager, id: string, now: Date): Promise<{ campaign_id: string; enrollment_id: string } | null> {
  const [unopened] = await sql<{ enrollment_id: string }>(em, `select enrollment_id from outbound_messages where id = ? and opened_at is null and sent_at is not null`, [id]);
  if (!unopened) return null;
  await lockEnrollment(em, unopened.enrollment_id);
  const [m] = await sql<{ campaign_id: string; enrollment_id: string }>(
    em,
    `update outbound_messages set opened_at = ?, updated_at = ? where id = ? and opened_at is null and sent_at is not null
     returning campaign_id, enrollment_id`,
    [now, now, id],
  );
  if (!m) return null;
  await sql(em, `update enrollments set last_event = 'opened', last_event_at = ?, updated_at = ? where id = ?`, [now, now, m.enrollment_id]);
  await bumpCounters(em, m.campaign_id, { opened: 1 });
  return m;
}

/** The message a tracking or unsubscribe link names, if it exists. */
export async function linkTarget(em: EntityManager, id: string): Promise<{ workspace_id: string; lead_id: string; to_email: string } | undefined> {
  const [m] = await sql<{ workspace_id: string; lead_id: string; to_email: string }>(
    em,
    `select workspace_id, lead_id, to_email from outbound_messages where id = ?`,
    [id],
  );
  return m;
}
