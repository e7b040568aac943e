import type { EntityManager } from '@mikro-orm/postgresql';
import type { Deps } from '../../deps.ts';
import { ApiError } from '../../shared/errors.ts';
import { transaction } from '../../db/transaction.ts';
import { advisoryXactLock } from '../../db/admin.ts';
import { isSuppressed, suppress } from '../suppression/repository.ts';
import { bumpCounters } from '../messages/counters.ts';
import { endEnrollments, enrollmentInCampaign, lockEnrollmentStatus } from '../messages/enrollments.ts';
import { OPERATOR_CLASSIFICATIONS, REPLY_CLASSIFICATIONS } from './classification.ts';
import { HUMAN_CLASSIFICATIONS, countsInReplied, hasCountedReply, lockReplyForReclassification, setClassification, workspaceOfReply, type ReplyListRow } from './repository.ts';

// An operator's correction of a reply's classification (PATCH /v1/replies/:replyId, the
// dashboard's Replies page, `mailgate reply update`; docs/decisions.md "Correcting a reply's
// classification"). The change has the effects ingestion would have had, had the classifier
// decided so, as far as they are safe to take back: see reclassify() below.


/** Classifications that count in `replied` and end the lead's sequence (contract §4, §5). */
const HUMAN = new Set(HUMAN_CLASSIFICATIONS);

/**
 * What a change does beyond the inbound module's tables, in its transaction: the SDR desk's
 * threads of a handed-off reply (sdrs/threads.ts threadsOnReclassified, wired in services.ts, so
 * inbound does not depend on sdrs).
 */
export interface ReplyReactions {
  reclassified(tx: EntityManager, replyId: string, classification: string): Promise<void>;
}

export interface ReclassifyEffects {
  /** False: the reply was classified so already; nothing was written. */
  changed: boolean;
  /** The classification before this request. */
  from: string;
  /** How the campaign's `replied` moved (-1, 0 or 1). */
  replied: number;
  /** The lead's sequence in the campaign was running and this change ended it (its waiting steps cancelled). */
  sequenceStopped: boolean;
  /** The lead's enrollment status in the campaign after the change (null: the enrollment is gone). */
  leadStatus: string | null;
  /** This change put the address on the workspace's suppression list. */
  suppressed: boolean;
  /** The address is on the suppression list after the change (whatever put it there). */
  addressSuppressed: boolean;
  /** What the operator should know, each a sentence (the suppression kept, a sequence not restarted). */
  notes: string[];
}

export interface ReclassifyResult {
  reply: ReplyListRow;
  effects: ReclassifyEffects;
}

export class ReplyClassificationService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    private readonly reactions: ReplyReactions,
  ) {}

  /** The workspace of a reply named by id alone (the CLI); 404 reply_not_found. */
  async workspaceOf(replyId: string): Promise<string> {
    const ws = await workspaceOfReply(this.em, replyId);
    if (!ws) throw ApiError.notFound('reply', `reply ${replyId} not found`);
    return ws;
  }

  /**
   * Classifies a reply as the operator says. Checks, in order: the value (422), the reply
   * (404, another workspace's too), the same classification again (a no-op, 200), a reply that
   * is a mail system's notice or a change into one (409 `reply_not_reclassifiable`).
   *
   * The effects, in one transaction with the change (lock order: the reply's assignment lock,
   * the reply, the desk's threads of the reply, then as ingestion takes them: the lead's
   * enrollment, the suppression, the enrollment's messages, the counters last):
   * - `replied` moves by what countedReplySql says before and after, the definition the stats
   *   and the leads' `?replied=` filter share;
   * - into `unsubscribe`: the address is suppressed (`reply_unsubscribe`, this reply its source)
   *   and the lead's enrollment in the campaign ends `unsubscribed`, as an ingested one does;
   * - into `interested` or `not_interested`: the enrollment ends `replied` (its waiting steps
   *   cancelled), as an ingested reply does; an enrollment already ended stays as it is;
   * - out of `unsubscribe`: the suppression stays (the operator takes the address off the list);
   * - out of a person's answer into `out_of_office`: the stopped sequence is not started again.
   * No webhook event: `reply.received` is sent once per reply, and the spec's list has no other.
   */
  async reclassify(workspaceId: string, replyId: string, classification: string, by: string): Promise<ReclassifyResult> {
    if (!(REPLY_CLASSIFICATIONS as readonly string[]).includes(classification))
      throw new ApiError(422, 'validation_failed', `classification: ${JSON.stringify(classification)} is not one of ${REPLY_CLASSIFICATIONS.join(', ')}`, {
        errors: [{ field: 'classification', value: classification, message: `is not one of ${REPLY_CLASSIFICATIONS.join(', ')}` }],
      });
    const result = await transaction(this.em, async (tx) => {
      // The assignment's lock first: an assignment holds it from its read of the reply to the
      // thread it opens (whose first message and priority follow the classification), and it
      // takes the thread's row before the reply's.
      await advisoryXactLock(tx, `assign:${replyId}`);
      const row = await lockReplyForReclassification(tx, workspaceId, replyId);
      if (!row) throw ApiError.notFound('reply', `reply ${replyId} not found`);
      const from = row.classification;
      const lead = async (enrollmentId: string | undefined) => (enrollmentId ? ((await lockEnrollmentStatus(tx, enrollmentId)) ?? null) : null);
      if (from === classification) {
        const enrollmentId = row.enrollment_id ?? (await enrollmentInCampaign(tx, row.campaign_id, row.lead_id));
        const addressSuppressed = await isSuppressed(tx, workspaceId, row.email);
        return {
          reply: row,
          effects: { changed: false, from, replied: 0, sequenceStopped: false, leadStatus: await lead(enrollmentId), suppressed: false, addressSuppressed, notes: [`The reply is classified ${from} already: nothing changed.`] },
        };
      }
      const refused = notReclassifiable(row, classification);
      if (refused) throw new ApiError(409, 'reply_not_reclassifiable', `reply ${replyId} ${refused}; nothing was changed`);

      const now = this.deps.clock.now();
      const reply = await setClassification(tx, workspaceId, replyId, classification, by, now);
      // The desk's threads of the reply (their priority reads the class just written) before the
      // lead's enrollment, the suppression and the counters: a desk send holds its thread's lock
      // through its SMTP transaction, and waiting for it while holding those held the campaign's
      // outcome writes (markSent needs the counters row) for as long as the SDR's server took.
      // No writer holds an enrollment, a suppression or a counter and then waits for a thread.
      await this.reactions.reclassified(tx, replyId, classification);
      const enrollmentId = row.enrollment_id ?? (await enrollmentInCampaign(tx, row.campaign_id, row.lead_id));
      // The enrollment before the check of the lead's other replies, as ingestion locks it: a
      // reply of the lead ingested meanwhile waits, so `replied` moves once.
      const statusBefore = await lead(enrollmentId);
      const othersCounted = await hasCountedReply(tx, row.campaign_id, row.lead_id, replyId);
      const countedBefore = othersCounted || countsInReplied(from, row.decided_by);
      const countedAfter = othersCounted || countsInReplied(classification, row.decided_by);
      let suppressed = false;
      if (classification === 'unsubscribe') {
        suppressed = (await suppress(tx, workspaceId, [row.email], 'reply_unsubscribe', replyId, now)) > 0;
        if (enrollmentId) await endEnrollments(tx, [enrollmentId], 'unsubscribed', 'unsubscribed', now);
      } else if (HUMAN.has(classification) && enrollmentId) {
        await endEnrollments(tx, [enrollmentId], 'replied', 'replied', now);
      }
      const replied = countedAfter === countedBefore ? 0 : countedAfter ? 1 : -1;
      // The counters last (inbound/service.ts reply(): promoteDue holds messages while it waits for them).
      if (replied) await bumpCounters(tx, row.campaign_id, { replied });
      const leadStatus = enrollmentId ? await lead(enrollmentId) : null;
      const addressSuppressed = suppressed || (await isSuppressed(tx, workspaceId, row.email));
      const notes: string[] = [];
      if (from === 'unsubscribe' && addressSuppressed)
        notes.push(
          `${row.email} stays on the suppression list: taking it off is a separate step (the dashboard's Suppression page, or mailgate suppression remove), if this lead may be mailed again.`,
        );
      if (classification === 'out_of_office' && statusBefore !== null && statusBefore !== 'active')
        notes.push(`The lead's sequence in the campaign stays ended (${leadStatus}): a corrected classification does not start a stopped sequence again.`);
      return {
        reply,
        effects: { changed: true, from, replied, sequenceStopped: statusBefore === 'active' && leadStatus !== 'active', leadStatus, suppressed, addressSuppressed, notes },
      };
    });
    if (result.effects.changed) {
      this.deps.metrics.repliesReclassified.inc({ from: result.effects.from, to: classification });
      if (classification === 'unsubscribe') this.deps.metrics.unsubscribes.inc({ source: 'reclassified' });
      this.deps.log.info({ replyId, workspaceId, from: result.effects.from, to: classification, by, replied: result.effects.replied, sequenceStopped: result.effects.sequenceStopped, suppressed: result.effects.suppressed }, 'reply classification changed by an operator');
    }
    return result;
  }
}

/**
 * Why a reply's classification cannot become `to`, or null when it can. A bounce and a
 * feedback-loop complaint (listed as `unsubscribe`, decided by `arf:`) are a mail system's
 * notices about our message, with their own effects (a bounced message, a `complained` count, a
 * complaint's suppression) that no other class has; and no person's answer is a bounce.
 */
function notReclassifiable(reply: Pick<ReplyListRow, 'classification' | 'decided_by'>, to: string): string | null {
  if (reply.classification === 'bounce') return "is a bounce (a mail system's delivery report, not a person's answer): its classification cannot be changed";
  if (reply.decided_by.startsWith('arf:')) return "is a feedback-loop complaint (a mailbox provider's report, not a person's answer): its classification cannot be changed";
  if (to === 'bounce') return `cannot become a bounce: a bounce is a mail system's delivery report, recognized from the report itself; choose one of ${OPERATOR_CLASSIFICATIONS.join(', ')}`;
  return null;
}
