import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { SDR_ACTIVE, type ThreadScope } from './thread-repository.ts';
import type { FollowupRuleRow, FollowupStatus, FollowupTaskRow, ProspectThreadRow } from './rows.ts';

// Follow-up rules and tasks (followup_rules, followup_tasks): the one place that writes them.
// The thread status changes that go with them are thread-repository.ts's.

export type { FollowupStatus, FollowupRuleRow };

/** A task as the API shows it (TASK_COLUMNS of the task `f` and its thread `t`). */
export type TaskRow = Pick<FollowupTaskRow, 'id' | 'thread_id' | 'sdr_id' | 'rule_id' | 'attempt' | 'status' | 'due_at' | 'created_at'> &
  Pick<ProspectThreadRow, 'contact_email' | 'contact_name' | 'subject'>;

export const TASK_COLUMNS = 'f.id, f.thread_id, f.sdr_id, f.rule_id, f.attempt, f.status, f.due_at, f.created_at, t.contact_email, t.contact_name, t.subject';

/**
 * awaiting_reply threads without a pending task, of an active SDR, in a workspace with rules,
 * with the time their next task counts from (the later of the last message and the last task
 * closed). One text for the scheduler's claim and for one thread's (an early out-of-office,
 * followups.ts). A deactivated SDR's threads get no task until the SDR is activated again
 * (SDR_ACTIVE; docs/sdr-desk.md).
 */
const WITHOUT_TASK = `select t.id, t.workspace_id, t.sdr_id, t.category,
            greatest(t.last_message_at, (select max(f.completed_at) from followup_tasks f where f.thread_id = t.id)) as base
       from prospect_threads t
      where t.status = 'awaiting_reply'
        and ${SDR_ACTIVE}
        and exists (select 1 from followup_rules r where r.workspace_id = t.workspace_id)
        and not exists (select 1 from followup_tasks f where f.thread_id = t.id and f.status = 'pending')`;
type ThreadWithoutTask = Pick<ProspectThreadRow, 'id' | 'workspace_id' | 'sdr_id' | 'category'> & { base: string | Date };

/** Claims up to `limit` such threads (id > after), skipping those another round holds. */
export async function claimThreadsWithoutTask(em: EntityManager, after: string, limit: number) {
  return sql<ThreadWithoutTask>(em, `${WITHOUT_TASK} and t.id > ? order by t.id limit ? for update of t skip locked`, [after, limit]);
}

/** The thread, locked, when it is such a thread (the caller holds it already: no skipping). */
export async function threadWithoutTask(em: EntityManager, threadId: string) {
  return sql<ThreadWithoutTask>(em, `${WITHOUT_TASK} and t.id = ? for update of t`, [threadId]);
}

export async function rulesOf(em: EntityManager, workspaceIds: string[]): Promise<FollowupRuleRow[]> {
  return sql<FollowupRuleRow>(em, 'select * from followup_rules where workspace_id = any(?::text[]) order by created_at asc, id asc', [workspaceIds]);
}

/** Tasks made so far per (thread, rule). */
export async function attemptsByRule(em: EntityManager, threadIds: string[]) {
  return sql<{ thread_id: string; rule_id: string; n: number }>(
    em,
    `select thread_id, rule_id, count(*)::int as n from followup_tasks
      where thread_id = any(?::text[]) and rule_id is not null group by thread_id, rule_id`,
    [threadIds],
  );
}

/** New pending tasks; a thread that has one meanwhile gets none. Returns how many were made. */
export async function insertTasks(em: EntityManager, rows: Array<{ id: string; ws: string; thread: string; sdr: string; rule: string; attempt: number; due: Date }>, now: Date): Promise<number> {
  // A fresh statement snapshot: re-checks "no pending task" against anything committed meanwhile.
  const inserted = await sql<{ id: string }>(
    em,
    `insert into followup_tasks (id, workspace_id, thread_id, sdr_id, rule_id, attempt, status, due_at, created_at)
     select x.id, x.ws, x.thread, x.sdr, x.rule, x.attempt, 'pending', x.due, ?
       from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::int[], ?::timestamptz[]) as x(id, ws, thread, sdr, rule, attempt, due)
      where not exists (select 1 from followup_tasks f where f.thread_id = x.thread and f.status = 'pending')
     returning id`,
    [
      now,
      rows.map((r) => r.id),
      rows.map((r) => r.ws),
      rows.map((r) => r.thread),
      rows.map((r) => r.sdr),
      rows.map((r) => r.rule),
      rows.map((r) => r.attempt),
      rows.map((r) => r.due),
    ],
  );
  return inserted.length;
}

export async function completeTasksOfThread(em: EntityManager, threadId: string, now: Date) {
  return sql<{ id: string }>(em, `update followup_tasks set status = 'done', completed_at = ? where thread_id = ? and status = 'pending' returning id`, [
    now,
    threadId,
  ]);
}

/** An out-of-office's return: the pending task(s) are due no earlier than `dueAt` (never brought forward). */
export async function moveTasksOfThread(em: EntityManager, threadId: string, dueAt: Date, businessDueAt: Date) {
  // A task of a business-days rule takes `businessDueAt` (never on a weekend); a task whose rule
  // was removed, `dueAt`.
  return sql<{ id: string }>(
    em,
    `update followup_tasks t
        set due_at = greatest(t.due_at, case when exists (select 1 from followup_rules r where r.id = t.rule_id and r.business_days) then ?::timestamptz else ?::timestamptz end)
      where t.thread_id = ? and t.status = 'pending'
      returning t.id`,
    [businessDueAt, dueAt, threadId],
  );
}

export async function cancelTasksOfThread(em: EntityManager, threadId: string, now: Date) {
  return sql<{ id: string }>(em, `update followup_tasks set status = 'cancelled', completed_at = ? where thread_id = ? and status = 'pending' returning id`, [
    now,
    threadId,
  ]);
}

/** A closed thread's pending tasks become `skipped` (completedAt now). */
export async function skipTasksOfThread(em: EntityManager, threadId: string, now: Date) {
  return sql<{ id: string }>(em, `update followup_tasks set status = 'skipped', completed_at = ? where thread_id = ? and status = 'pending' returning id`, [
    now,
    threadId,
  ]);
}

/** The SDR's pending tasks, due first; `dueBy` null: upcoming ones too. */
export async function pendingTasks(em: EntityManager, scope: ThreadScope, limit: number, dueBy: Date | null): Promise<TaskRow[]> {
  const params: unknown[] = [scope.workspaceId, scope.sdrId];
  let due = '';
  if (dueBy) {
    due = 'and f.due_at <= ?';
    params.push(dueBy);
  }
  return sql<TaskRow>(
    em,
    `select ${TASK_COLUMNS} from followup_tasks f join prospect_threads t on t.id = f.thread_id
      where f.workspace_id = ? and f.sdr_id = ? and f.status = 'pending' ${due} order by f.due_at asc, f.id asc limit ?`,
    [...params, limit],
  );
}

/** Ends a pending task of the SDR; undefined when there is none pending with that id. */
export async function closeTask(em: EntityManager, scope: ThreadScope, id: string, to: 'done' | 'skipped', now: Date): Promise<TaskRow | undefined> {
  const [row] = await sql<TaskRow>(
    em,
    `update followup_tasks f set status = ?, completed_at = ? from prospect_threads t
      where f.id = ? and f.workspace_id = ? and f.sdr_id = ? and f.status = 'pending' and t.id = f.thread_id returning ${TASK_COLUMNS}`,
    [to, now, id, scope.workspaceId, scope.sdrId],
  );
  return row;
}

export async function taskStatus(em: EntityManager, scope: ThreadScope, id: string): Promise<{ status: string } | undefined> {
  const [existing] = await sql<Pick<FollowupTaskRow, 'status'>>(em, 'select status from followup_tasks where id = ? and workspace_id = ? and sdr_id = ?', [
    id,
    scope.workspaceId,
    scope.sdrId,
  ]);
  return existing;
}

export async function insertRule(
  em: EntityManager,
  r: { id: string; workspaceId: string; name: string; afterMs: number; businessDays: boolean; categories: string[] | null; maxAttempts: number },
  now: Date,
): Promise<FollowupRuleRow> {
  const [row] = await sql<FollowupRuleRow>(
    em,
    `insert into followup_rules (id, workspace_id, name, after_ms, business_days, categories, max_attempts, created_at)
     values (?, ?, ?, ?, ?, ?::text[], ?, ?) returning *`,
    [r.id, r.workspaceId, r.name, r.afterMs, r.businessDays, r.categories, r.maxAttempts, now],
  );
  return row;
}

export async function rulesOfWorkspace(em: EntityManager, workspaceId: string): Promise<FollowupRuleRow[]> {
  return sql<FollowupRuleRow>(em, 'select * from followup_rules where workspace_id = ? order by created_at asc, id asc', [workspaceId]);
}

export async function deleteRule(em: EntityManager, id: string): Promise<boolean> {
  const rows = await sql<{ id: string }>(em, 'delete from followup_rules where id = ? returning id', [id]);
  return rows.length > 0;
}

/**
 * Every task of these threads (moved to another SDR, sdrs/reassign.ts) becomes that SDR's; a
 * pending one keeps its due time. Returns the pending ones' ids, sorted.
 */
export async function moveTasksOfThreads(em: EntityManager, threadIds: string[], toSdrId: string): Promise<string[]> {
  const tasks = await sql<{ id: string; status: string }>(em, `update followup_tasks set sdr_id = ? where thread_id = any(?::text[]) returning id, status`, [toSdrId, threadIds]);
  return tasks.filter((t) => t.status === 'pending').map((t) => t.id).sort();
}
