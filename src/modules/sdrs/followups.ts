// Follow-up tasks of prospect threads (contract §8; documented in docs/sdr-desk.md, "Follow-ups").
//
// scheduleDue() (the `followups.schedule` job, every minute) creates the next pending task of
// every awaiting_reply thread whose workspace has a rule for it, and turns awaiting_reply threads
// with a due pending task into needs_followup. The hooks onSend / onProspectAnswer close or move
// the pending task when the SDR sends or the prospect answers. Everything is idempotent and safe
// with several workers: threads are claimed FOR UPDATE SKIP LOCKED and every write re-checks its
// condition in the same statement.
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  attemptsByRule,
  cancelTasksOfThread,
  claimThreadsWithoutTask,
  closeTask,
  completeTasksOfThread,
  insertTasks,
  moveTasksOfThread,
  pendingTasks,
  rulesOf,
  taskStatus,
  threadWithoutTask,
  type FollowupStatus,
  type FollowupRuleRow,
  type TaskRow,
} from './followup-repository.ts';
import { backToAwaitingIfNothingDue, markFollowupsDue, threadOfTaskForUpdate } from './thread-repository.ts';
import { newId } from '../../adapters/ids.ts';
import { ApiError } from '../../shared/errors.ts';
import { toDate, toIso } from '../../shared/time.ts';
import type { Deps } from '../../deps.ts';
import type { Clock } from '../../adapters/clock.ts';
import { recomputeThreadPriority, type ThreadScope } from './threads.ts';
import { transaction } from '../../db/transaction.ts';

export type { FollowupStatus };



export function followupView(r: TaskRow) {
  return {
    id: r.id,
    threadId: r.thread_id,
    sdrId: r.sdr_id,
    status: r.status,
    dueAt: toIso(r.due_at),
    ruleId: r.rule_id,
    attempt: Number(r.attempt),
    createdAt: toIso(r.created_at),
    thread: { contactEmail: r.contact_email, contactName: r.contact_name, subject: r.subject },
  };
}
export type FollowupView = ReturnType<typeof followupView>;

const DAY_MS = 86_400_000;

function startOfNextUtcDay(d: Date): Date {
  return new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS + DAY_MS);
}

function isWeekend(t: number): boolean {
  const dow = new Date(t).getUTCDay();
  return dow === 0 || dow === 6;
}

/**
 * `start + ms`, counting only business time: Saturdays and Sundays (UTC, midnight to midnight)
 * do not count. A start inside a weekend counts from the following Monday 00:00 UTC. The result
 * never falls on a weekend (a duration ending exactly at Saturday 00:00 lands on Monday 00:00).
 * E.g. Friday 12:00 + 2 days = Tuesday 12:00.
 */
export function addBusinessDuration(start: Date, ms: number): Date {
  let t = start.getTime();
  while (isWeekend(t)) t = Math.floor(t / DAY_MS) * DAY_MS + DAY_MS;
  let remaining = ms;
  // Whole business weeks (5 business days) are 7 calendar days from any weekday instant.
  const weeks = Math.floor(remaining / (5 * DAY_MS));
  t += weeks * 7 * DAY_MS;
  remaining -= weeks * 5 * DAY_MS;
  for (;;) {
    const dayEnd = Math.floor(t / DAY_MS) * DAY_MS + DAY_MS;
    if (remaining < dayEnd - t) return new Date(t + remaining);
    remaining -= dayEnd - t;
    t = dayEnd;
    while (isWeekend(t)) t += DAY_MS;
  }
}


const BATCH = 500;

// The hooks of a send and of a prospect's answer run inside the desk's transaction
// (desk-mail.ts): they are functions of that transaction's EntityManager, and
// FollowupService's methods of the same name run them on its own unit of work.

/** The SDR sent from the thread (draft or manual): its pending task(s) are done; the priority is recomputed. */
export async function followupsOnSend(em: EntityManager, clock: Clock, threadId: string): Promise<number> {
  const now = clock.now();
  const rows = await completeTasksOfThread(em, threadId, now);
  // The caller moved the thread's lastMessageAt too: its recency changed either way.
  await recomputeThreadPriority(em, clock, threadId);
  return rows.length;
}

/**
 * The prospect answered. With an out-of-office return date the pending task(s) stay pending,
 * due at the later of their due time and the start of the UTC day after the return date (never
 * brought forward; the Monday after for a business-days rule's task when that day is a Saturday
 * or Sunday); without a date nothing changes; otherwise they are cancelled.
 */
export async function followupsOnAnswer(em: EntityManager, clock: Clock, threadId: string, outOfOffice: { returnDate: Date | null } | null): Promise<number> {
  const now = clock.now();
  let rows: Array<{ id: string }>;
  if (!outOfOffice) {
    // The prospect answered (contract §8): nothing to follow up on.
    rows = await cancelTasksOfThread(em, threadId, now);
  } else if (outOfOffice.returnDate) {
    // Away until a date: the follow-up waits for the return, and a thread it had made
    // needs_followup awaits the reply again meanwhile. An auto-reply comes seconds after the
    // send, mostly before the scheduler's round (every minute) made the task: it is made now,
    // or the return date would move nothing and the follow-up fell due while the prospect was away.
    await createNextTasks(em, await threadWithoutTask(em, threadId), now);
    // A business-days rule's task moves to a business day (a return on Friday: Monday, not Saturday).
    const back = startOfNextUtcDay(outOfOffice.returnDate);
    rows = await moveTasksOfThread(em, threadId, back, addBusinessDuration(back, 0));
    await backToAwaitingIfNothingDue(em, threadId, now);
  } else {
    // An auto-reply without a date is no answer: the follow-up stays as it is (the SDR still has
    // to follow up; cancelled, it used up the rule's attempts and no reminder came again).
    rows = [];
  }
  await recomputeThreadPriority(em, clock, threadId);
  return rows.length;
}

/**
 * The next task of each thread (awaiting_reply, no pending task, locked by the caller): among the
 * rules of its workspace for its category with attempts left, the one due first (the oldest on a
 * tie), due `after` from the thread's base. Returns how many were made.
 */
async function createNextTasks(em: EntityManager, threads: Array<{ id: string; workspace_id: string; sdr_id: string; category: string; base: string | Date }>, now: Date): Promise<number> {
  if (threads.length === 0) return 0;
  const workspaceIds = [...new Set(threads.map((t) => t.workspace_id))];
  const rules = await rulesOf(em, workspaceIds);
  const counts = await attemptsByRule(em, threads.map((t) => t.id));
  const attempts = new Map(counts.map((c) => [`${c.thread_id} ${c.rule_id}`, c.n]));
  const rows: { id: string; ws: string; thread: string; sdr: string; rule: string; attempt: number; due: Date }[] = [];
  for (const t of threads) {
    let best: { rule: FollowupRuleRow; attempt: number; due: Date } | null = null;
    for (const rule of rules) {
      if (rule.workspace_id !== t.workspace_id) continue;
      if (rule.categories && !rule.categories.includes(t.category)) continue;
      const done = attempts.get(`${t.id} ${rule.id}`) ?? 0;
      if (done >= rule.max_attempts) continue;
      const base = toDate(t.base);
      const afterMs = Number(rule.after_ms);
      const due = rule.business_days ? addBusinessDuration(base, afterMs) : new Date(base.getTime() + afterMs);
      // Rules are in creation order, so on equal due times the oldest rule wins.
      if (!best || due.getTime() < best.due.getTime()) best = { rule, attempt: done + 1, due };
    }
    if (best) rows.push({ id: newId('fup'), ws: t.workspace_id, thread: t.id, sdr: t.sdr_id, rule: best.rule.id, attempt: best.attempt, due: best.due });
  }
  // A fresh statement snapshot: re-checks "no pending task" against anything committed meanwhile.
  return rows.length > 0 ? insertTasks(em, rows, now) : 0;
}

export class FollowupService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  /**
   * One round of the scheduler: creates missing pending tasks, then makes awaiting_reply threads
   * with a due pending task needs_followup. Returns how many tasks were created and threads moved.
   */
  async scheduleDue(): Promise<{ created: number; due: number }> {
    let created = 0;
    let after = '';
    for (;;) {
      const r = await transaction(this.em, (em) => this.createBatch(em, after));
      created += r.created;
      if (r.lastId === null) break;
      after = r.lastId;
    }
    const due = await this.markDue();
    return { created, due };
  }

  /** Claims up to BATCH awaiting_reply threads (id > after) without a pending task and creates their next task. */
  private async createBatch(em: EntityManager, after: string): Promise<{ created: number; lastId: string | null }> {
    const threads = await claimThreadsWithoutTask(em, after, BATCH);
    if (threads.length === 0) return { created: 0, lastId: null };
    const created = await createNextTasks(em, threads, this.deps.clock.now());
    return { created, lastId: threads.length < BATCH ? null : threads[threads.length - 1].id };
  }

  /** awaiting_reply threads with a pending task due now become needs_followup (a compare-and-set per row). */
  private async markDue(): Promise<number> {
    return transaction(this.em, async (em) => {
      const now = this.deps.clock.now();
      const moved = await markFollowupsDue(em, now);
      for (const { id } of moved) await recomputeThreadPriority(em, this.deps.clock, id);
      return moved.length;
    });
  }

  /** Hook: followupsOnSend on this unit of work. */
  async onSend(threadId: string): Promise<number> {
    return followupsOnSend(this.em, this.deps.clock, threadId);
  }

  /** Hook: followupsOnAnswer on this unit of work. */
  async onProspectAnswer(threadId: string, outOfOffice: { returnDate: Date | null } | null = null): Promise<number> {
    return followupsOnAnswer(this.em, this.deps.clock, threadId, outOfOffice);
  }

  /** Pending tasks of the SDR, due first; only the due ones unless includeUpcoming. */
  async listDue(scope: ThreadScope, q: { limit: number; includeUpcoming: boolean }): Promise<FollowupView[]> {
    const rows = await pendingTasks(this.em, scope, q.limit, q.includeUpcoming ? null : this.deps.clock.now());
    return rows.map(followupView);
  }

  complete(scope: ThreadScope, id: string): Promise<FollowupView> {
    return this.close(scope, id, 'done');
  }

  skip(scope: ThreadScope, id: string): Promise<FollowupView> {
    return this.close(scope, id, 'skipped');
  }

  /**
   * Ends a pending task by the SDR. When it was the thread's last pending task and the thread is
   * needs_followup, the thread goes back to awaiting_reply (so the next attempt, if any, counts
   * from now).
   */
  private async close(scope: ThreadScope, id: string, to: 'done' | 'skipped'): Promise<FollowupView> {
    return transaction(this.em, async (em) => {
      // The thread first, as markFollowupsDue locks it: a round cannot make it needs_followup
      // on the strength of this task between its close and the status check below.
      await threadOfTaskForUpdate(em, scope, id);
      const now = this.deps.clock.now();
      const row = await closeTask(em, scope, id, to, now);
      if (!row) {
        const existing = await taskStatus(em, scope, id);
        if (!existing) throw ApiError.notFound('followup', `follow-up ${id} not found`);
        throw new ApiError(409, 'followup_not_pending', `follow-up ${id} is ${existing.status}, not pending`);
      }
      await backToAwaitingIfNothingDue(em, row.thread_id, now);
      await recomputeThreadPriority(em, this.deps.clock, row.thread_id);
      return followupView(row);
    });
  }
}
