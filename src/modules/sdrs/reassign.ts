// Moving prospect threads from one SDR to another (an SDR leaves or goes on leave): admin-only
// (`POST /v1/sdr-profiles/:sdrId/reassign-threads`, `mailgate sdr reassign-threads`).
// docs/sdr-desk.md "Reassigning threads"; decisions in docs/decisions.md (2026-11-30).
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import { sql } from '../../db/sql.ts';
import { transaction } from '../../db/transaction.ts';
import { lockThreadsOfSdr, moveThreads, repliesOfThreads, threadsOfRepliesHeldBy, threadsOfSdr } from './thread-repository.ts';
import { advisoryXactLock } from '../../db/admin.ts';
import { moveTasksOfThreads } from './followup-repository.ts';
import type { SdrRow, SdrMailboxRow } from './rows.ts';

/**
 * What the drafts module does when threads move (wired in services.ts, so the desk depends on
 * no other module). `lock` runs first: the threads' open drafts are locked in id order before
 * the threads are, a send's lock order (a draft's send and a manual reply lock the thread's open
 * drafts, then the thread). `moved` runs after the threads moved: the open drafts, written in
 * the old SDR's voice and signed with their name, are discarded; every draft of the threads
 * becomes the new SDR's (the old SDR gets 404 on them). Returns the discarded drafts' ids.
 */
export interface ReassignReactions {
  lock(tx: EntityManager, threadIds: string[]): Promise<unknown>;
  moved(tx: EntityManager, threadIds: string[], toSdrId: string): Promise<Array<{ id: string; thread_id: string }>>;
}

export interface ReassignInput {
  toSdrId: string;
  threadIds?: string[];
}

/** An SDR of the workspace (locked `for share`: it cannot be deactivated or deleted until the move commits). */
async function sdrForShare(em: EntityManager, workspaceId: string, sdrId: string) {
  const [row] = await sql<Pick<SdrRow, 'id' | 'name' | 'active'> & { health_state: SdrMailboxRow['health_state'] | null }>(
    em,
    `select s.id, s.name, s.active, m.health_state from sdrs s left join sdr_mailboxes m on m.sdr_id = s.id
      where s.id = ? and s.workspace_id = ? for share of s`,
    [sdrId, workspaceId],
  );
  return row;
}

export class ReassignService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    private readonly reactions?: ReassignReactions,
  ) {}

  /**
   * Moves the SDR's threads (`threadIds`, any status; omitted: every open thread) to `toSdrId`,
   * an active SDR of the same workspace whose mailbox can send. One transaction: a refusal
   * writes nothing.
   */
  async reassign(workspaceId: string, fromSdrId: string, input: ReassignInput) {
    return transaction(this.em, async (tx) => {
      const from = await sdrForShare(tx, workspaceId, fromSdrId);
      if (!from) throw ApiError.notFound('sdr', `SDR ${fromSdrId} not found`);
      if (input.toSdrId === fromSdrId) {
        throw new ApiError(422, 'validation_failed', `toSdrId: the threads are already ${from.name}'s; name another SDR`, {
          errors: [{ field: 'toSdrId', value: input.toSdrId, message: 'is the SDR the threads are moved from' }],
        });
      }
      const to = await sdrForShare(tx, workspaceId, input.toSdrId);
      if (!to) {
        throw new ApiError(422, 'validation_failed', `toSdrId: ${input.toSdrId} is not an SDR of this workspace`, {
          errors: [{ field: 'toSdrId', value: input.toSdrId, message: 'is not an SDR of this workspace' }],
        });
      }
      if (!to.active) throw new ApiError(409, 'sdr_inactive', `${to.name} (${to.id}) is deactivated: activate them first, or move the threads to an active SDR`);
      // The new SDR answers the threads from their own mailbox: one that cannot send (none, or
      // a refused login) would leave the prospects without an answer again.
      if (to.health_state !== 'active' && to.health_state !== 'rate_limited') {
        throw new ApiError(
          409,
          'mail_not_connected',
          `${to.name}'s mailbox is ${to.health_state === null ? 'not connected' : to.health_state}: connect it (or reconnect it) first, so that ${to.name} can answer the threads`,
        );
      }
      const wanted = input.threadIds ? [...new Set(input.threadIds)] : null;
      const candidates = await threadsOfSdr(tx, workspaceId, fromSdrId, wanted);
      if (wanted) this.refuseNotHeld(input.threadIds!, new Set(candidates), from.name);
      // The replies' assignment locks first (sdrs/assign.ts takes one before it looks for the
      // SDR's thread of the reply and opens one; an operator's reclassification takes it too), in
      // reply order: an assignment of the same reply to the target in progress commits first and
      // the check below sees its thread (409 reply_already_assigned), or it comes after and finds
      // the moved thread as the target's. Until 2026-11-30 the check read past an uncommitted
      // assignment, and the target ended with two threads of one reply.
      for (const replyId of await repliesOfThreads(tx, candidates)) await advisoryXactLock(tx, `assign:${replyId}`);
      // Drafts first, then the threads: a send's lock order. A send in progress holds them and
      // finishes first; one that starts later finds its draft discarded or its thread moved.
      await this.reactions?.lock(tx, candidates);
      const locked = await lockThreadsOfSdr(tx, workspaceId, fromSdrId, candidates, !wanted);
      // Moved meanwhile by a concurrent reassignment (the lock waited for it).
      if (wanted) this.refuseNotHeld(input.threadIds!, new Set(locked.map((t) => t.id)), from.name);
      const ids = locked.map((t) => t.id);
      const replies = [...new Set(locked.map((t) => t.reply_id).filter((r): r is string => r !== null))];
      const clash = await threadsOfRepliesHeldBy(tx, to.id, replies);
      if (clash.length) {
        const mine = locked.filter((t) => clash.some((c) => c.reply_id === t.reply_id)).map((t) => t.id);
        throw new ApiError(
          409,
          'reply_already_assigned',
          `${to.name} already has a thread of the same reply (${clash.map((c) => c.id).join(', ')}): leave ${mine.join(', ')} out, or move it to another SDR`,
          { threadIds: mine },
        );
      }
      const now = this.deps.clock.now();
      if (ids.length === 0) return { data: { fromSdrId, toSdrId: to.id, threadIds: [], discardedDraftIds: [], followupIds: [] } };
      const discarded = (await this.reactions?.moved(tx, ids, to.id)) ?? [];
      const byThread = new Map<string, number>();
      for (const d of discarded) byThread.set(d.thread_id, (byThread.get(d.thread_id) ?? 0) + 1);
      await moveThreads(tx, { workspaceId, fromSdrId, toSdrId: to.id, threadIds: ids, discardedByThread: byThread }, now);
      const pendingFollowups = await moveTasksOfThreads(tx, ids, to.id);
      return {
        data: { fromSdrId, toSdrId: to.id, threadIds: ids, discardedDraftIds: discarded.map((d) => d.id).sort(), followupIds: pendingFollowups },
      };
    });
  }

  /** 422 validation_failed naming each listed thread the SDR does not hold (missing, another SDR's, another workspace's alike). */
  private refuseNotHeld(listed: string[], held: Set<string>, fromName: string) {
    const errors = listed.flatMap((id, index) => (held.has(id) ? [] : [{ index, field: 'threadIds', value: id, message: `is not a thread of ${fromName}` }]));
    if (errors.length) throw new ApiError(422, 'validation_failed', `threadIds: ${errors.map((e) => e.value).join(', ')} ${errors.length === 1 ? 'is not a thread' : 'are not threads'} of ${fromName}; nothing was moved`, { errors });
  }
}
