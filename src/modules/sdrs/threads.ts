// Prospect threads as the SDR desk sees them: the inbox, one thread with its messages, status
// changes through the state machine, snoozing. Every query is scoped to (workspace, SDR): a
// thread of another SDR or workspace answers 404 thread_not_found, exactly as a missing one.
import { IsolationLevel, type EntityManager } from '@mikro-orm/postgresql';
import {
  inboxPage,
  latestHandoff,
  priorityBatch,
  priorityInputs,
  scopedThread,
  setPriorities,
  setOpeningAnswerAutomatic,
  setPriority,
  setSnooze,
  setStatusIf,
  threadDrafts,
  threadMessages,
  type ThreadRow,
  type ThreadScope,
  type InboxQuery,
  inboxStatement,
} from './thread-repository.ts';
import { ApiError } from '../../shared/errors.ts';
import { isoOrNull, toDate, toIso } from '../../shared/time.ts';
import type { Deps } from '../../deps.ts';
import type { Clock } from '../../adapters/clock.ts';
import { allowedTransitions, canTransition, isOpenStatus, type ThreadStatus } from './threads-state.ts';
import { skipTasksOfThread } from './followup-repository.ts';
import { priorityScore, type ThreadCategory } from './priority.ts';
import { transaction } from '../../db/transaction.ts';


/** Recency is 20 * 0.5^(days): under 0.2 after ~6.6 days; a thread is refreshed for a day more. */
export const PRIORITY_WINDOW_DAYS = 8;
/** Scores are rounded to 0.01; smaller moves are not worth a row write. */
export const PRIORITY_EPSILON = 0.05;


export function threadView(r: ThreadRow) {
  return {
    id: r.id,
    contactEmail: r.contact_email,
    contactName: r.contact_name,
    subject: r.subject,
    status: r.status,
    category: r.category,
    priorityScore: Number(r.priority_score),
    lastMessageAt: toIso(r.last_message_at),
    createdAt: toIso(r.created_at),
    snoozedUntil: isoOrNull(r.snoozed_until),
  };
}




export { inboxStatement };
export type { ThreadScope, InboxQuery };

/**
 * Recomputes the stored priority_score of a thread from its category, the classification
 * of the reply it came from, lastMessageAt and its overdue pending follow-ups, as of now. A
 * function of the caller's EntityManager (its transaction): the follow-up hooks run it inside
 * the desk's transactions (followups.ts).
 */
export async function recomputeThreadPriority(em: EntityManager, clock: Clock, threadId: string): Promise<number> {
  const now = clock.now();
  const r = await priorityInputs(em, threadId, now);
  if (!r) throw ApiError.notFound('thread', `thread ${threadId} not found`);
  const score = priorityScore({ category: r.category, classification: r.classification, lastMessageAt: toDate(r.last_message_at), overdueFollowups: r.overdue, now });
  await setPriority(em, threadId, score);
  return score;
}

/**
 * A reply handed to SDRs was classified again by an operator (wired in services.ts as the
 * inbound module's ReplyReactions), in the change's transaction: each of its threads opens with
 * an automatic message exactly when the reply is now an out-of-office (a desk send answers the
 * last message a person wrote), and its priority is computed from the new classification.
 * Nothing else of the thread moves: its status is the SDR's, and the handoff's snapshot is
 * what the SDR was handed at the time.
 */
export async function threadsOnReclassified(em: EntityManager, clock: Clock, replyId: string, classification: string): Promise<void> {
  for (const threadId of await setOpeningAnswerAutomatic(em, replyId, classification === 'out_of_office')) await recomputeThreadPriority(em, clock, threadId);
}

export class ThreadService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async inbox(scope: ThreadScope, q: InboxQuery) {
    const st = inboxStatement(scope, q, this.deps.clock.now());
    const rows = await inboxPage(this.em, st);
    const total = rows.length > 0 ? rows[0].total : 0;
    const threads = rows.filter((r) => r.id !== null).map(threadView);
    return { threads, total, hasMore: q.offset + threads.length < total };
  }

  private async row(em: EntityManager, scope: ThreadScope, id: string): Promise<ThreadRow & { reply_id: string | null }> {
    const row = await scopedThread(em, scope, id);
    if (!row) throw ApiError.notFound('thread', `thread ${id} not found`);
    return row;
  }

  /**
   * The thread with its messages (oldest first), its handoff snapshot (latest) and drafts, read
   * in one REPEATABLE READ snapshot: an answer committing between the reads cannot show its
   * message next to the status from before it.
   */
  async get(scope: ThreadScope, id: string) {
    return transaction(this.em, (tx) => this.read(tx, scope, id), { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true });
  }

  private async read(tx: EntityManager, scope: ThreadScope, id: string) {
    const row = await this.row(tx, scope, id);
    const messages = await threadMessages(tx, id);
    const handoff = await latestHandoff(tx, scope.workspaceId, id);
    const drafts = await threadDrafts(tx, scope.workspaceId, id);
    return {
      ...threadView(row),
      messages: messages.map((m) => ({
        id: m.id,
        direction: m.direction,
        messageIdHeader: m.message_id_header,
        fromEmail: m.from_email,
        toEmails: m.to_emails,
        ccEmails: m.cc_emails,
        subject: m.subject,
        bodyText: m.body_text,
        bodyHtml: m.body_html,
        at: toIso(m.at),
      })),
      handoff: handoff
        ? {
            id: handoff.id,
            replyId: handoff.reply_id,
            toEmail: handoff.to_email,
            ccEmails: handoff.cc_emails,
            subject: handoff.subject,
            note: handoff.note,
            category: handoff.category,
            seniority: handoff.seniority,
            employeeCount: handoff.employee_count,
            snapshot: handoff.snapshot,
            createdAt: toIso(handoff.created_at),
          }
        : null,
      drafts: drafts.map((d) => ({
        id: d.id,
        state: d.state,
        subject: d.subject,
        bodyText: d.body_text,
        bodyHtml: d.body_html,
        supersededBy: d.superseded_by,
        createdAt: toIso(d.created_at),
        updatedAt: toIso(d.updated_at),
      })),
    };
  }

  /** recomputeThreadPriority on this unit of work. */
  async recomputePriority(threadId: string): Promise<number> {
    return recomputeThreadPriority(this.em, this.deps.clock, threadId);
  }

  /**
   * The priority job: recency decays with time, so stored scores are refreshed for every thread
   * whose score can still move, that is one with a message in the last PRIORITY_WINDOW_DAYS (a
   * day past the point where recency is under 0.2) or a pending follow-up, in batches by id.
   * Only rows whose score changed by PRIORITY_EPSILON or more are written. Returns how many were.
   */
  async refreshPriorities(batch = 1000): Promise<number> {
    const now = this.deps.clock.now();
    const since = new Date(now.getTime() - PRIORITY_WINDOW_DAYS * 86_400_000);
    let after = '';
    let written = 0;
    for (;;) {
      const rows = await priorityBatch(this.em, now, after, since, batch);
      if (rows.length === 0) break;
      const changed: { id: string; score: number }[] = [];
      for (const r of rows) {
        const score = priorityScore({ category: r.category, classification: r.classification, lastMessageAt: toDate(r.last_message_at), overdueFollowups: r.overdue, now });
        if (Math.abs(score - Number(r.priority_score)) >= PRIORITY_EPSILON) changed.push({ id: r.id, score });
      }
      if (changed.length > 0) {
        await setPriorities(this.em, changed);
        written += changed.length;
      }
      after = rows[rows.length - 1].id;
      if (rows.length < batch) break;
    }
    return written;
  }

  /** PATCH status: validated against the state machine; 400 invalid_transition lists the allowed ones. */
  async setStatus(scope: ThreadScope, id: string, to: ThreadStatus): Promise<ReturnType<typeof threadView>> {
    const row = await this.row(this.em, scope, id);
    if (!canTransition(row.status, to)) {
      throw new ApiError(400, 'invalid_transition', `a thread in status ${row.status} cannot move to ${to}`, { allowedTransitions: allowedTransitions(row.status) });
    }
    // Compare-and-set on the status read, so a concurrent change cannot be overwritten blindly.
    // Closing an open thread (a meeting booked, lost, archived) ends its reminder with it: the
    // pending follow-up becomes `skipped`, the SDR's decision not to follow up (docs/sdr-desk.md).
    const updated = await transaction(this.em, async (tx) => {
      const now = this.deps.clock.now();
      if (!(await setStatusIf(tx, id, row.status, to, now))) return false;
      if (isOpenStatus(row.status) && !isOpenStatus(to)) await skipTasksOfThread(tx, id, now);
      await recomputeThreadPriority(tx, this.deps.clock, id);
      return true;
    });
    if (!updated) return this.setStatus(scope, id, to);
    return threadView(await this.row(this.em, scope, id));
  }

  async snooze(scope: ThreadScope, id: string, until: Date) {
    const now = this.deps.clock.now();
    if (!(until.getTime() > now.getTime())) throw ApiError.invalid(`until: must be in the future (now is ${now.toISOString()})`, { errors: [{ field: 'until', value: until.toISOString(), message: 'must be in the future' }] });
    await this.row(this.em, scope, id);
    await setSnooze(this.em, id, until, now);
    await this.recomputePriority(id);
    return threadView(await this.row(this.em, scope, id));
  }

  async unsnooze(scope: ThreadScope, id: string) {
    await this.row(this.em, scope, id);
    await setSnooze(this.em, id, null, this.deps.clock.now());
    await this.recomputePriority(id);
    return threadView(await this.row(this.em, scope, id));
  }
}
