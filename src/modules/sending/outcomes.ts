import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { SendOutcome } from '../../adapters/smtp.ts';
import { bumpCounters } from '../campaigns/repository.ts';
import { recordEvent } from '../events/outbox.ts';
import { messageBounced, messageSentJsonb } from '../events/catalogue.ts';
import { SuppressionService } from '../suppression/service.ts';
import type { Deps } from '../../deps.ts';
import type { PreparedStatements } from '../../db/statements.ts';
import { endEnrollments } from './lifecycle.ts';
import { recordSenderFailure, logSenderTransition, type HealthTransition } from '../senders/health.ts';

/** A claimed message as the queue knows it, before it is rendered. */
export interface ClaimedMessage {
  id: string;
  workspaceId: string;
  campaignId: string;
  enrollmentId: string;
  leadId: string;
  stepIndex: number;
  toEmail: string;
  senderAccountId: string;
}

export interface SentMessage extends ClaimedMessage {
  messageIdHeader: string;
  /** The rendered headers, recorded with the outcome. */
  subject: string;
  inReplyTo: string | null;
  references: string | null;
}

interface PendingAccepted {
  m: SentMessage;
  response: string;
  at: Date;
  workerId: string;
  resolve: (recorded: boolean) => void;
  reject: (err: unknown) => void;
}

/** message.sent's payload over the columns of the accepted statement's `m` (events/catalogue.ts). */
const MESSAGE_SENT_DATA = messageSentJsonb({
  campaignId: 'campaign_id',
  leadId: 'lead_id',
  email: 'to_email',
  sequenceStep: 'step_index',
  messageId: 'id',
  messageIdHeader: 'message_id_header',
  sentAt: 'sent',
});

/** A deadlock or serialization failure: the statement can simply run again. */
function retryable(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '40P01' || code === '40001';
}


/**
 * Records what the SMTP server answered: the message's state and the server's reply, the
 * enrollment, the next step, counters and the event, in one transaction. Accepted messages (the
 * hot path) are group-committed: those that finish while a write runs share the next one.
 * Postal's habit: every path ends in a recorded outcome.
 */
export class OutcomeRecorder {
  constructor(
    private readonly deps: Deps,
    private readonly retryDelaysMs: number[],
    private readonly stmts: PreparedStatements,
    private readonly maxBatch = 64,
  ) {}

  private pending: PendingAccepted[] = [];
  private flushing = false;
  /** Outcome statements run so far for accepted messages (a test looks at the batching). */
  acceptedStatements = 0;

  /** `em` makes the EntityManager for the rare paths (the accepted path needs none). */
  async record(em: () => EntityManager, m: SentMessage, outcome: SendOutcome, workerId: string): Promise<'sent' | 'hard_bounce' | 'retry' | 'soft_bounce' | 'account_failed' | 'lost'> {
    const now = this.deps.clock.now();
    if (outcome.kind === 'accepted') return (await this.accepted(m, outcome.response, workerId, now)) ? 'sent' : 'lost';
    let transition: HealthTransition | null = null;
    const recorded = await em().transactional(async (tx) => {
      switch (outcome.kind) {
        case 'rejected':
          return (await this.bounced(tx, m, 'hard', outcome.response, workerId, now)) ? 'hard_bounce' : 'lost';
        case 'temporary': {
          const [row] = await sql<{ attempts: number }>(
            tx,
            `update outbound_messages set attempts = attempts + 1, last_error = ?, smtp_response = ?, updated_at = ?
              where id = ? and state = 'sending' and claimed_by = ? returning attempts`,
            [outcome.response, outcome.response, now, m.id, workerId],
          );
          if (!row) return 'lost';
          if (row.attempts <= this.retryDelaysMs.length) {
            await sql(
              tx,
              `update outbound_messages set state = 'queued', due_at = ?, claimed_by = null, lease_until = null, pool_id = null,
                      sender_account_id = null, smtp_started_at = null, message_id_header = null
                where id = ?`,
              [new Date(now.getTime() + this.retryDelaysMs[row.attempts - 1]), m.id],
            );
            return 'retry';
          }
          return (await this.bounced(tx, m, 'soft', outcome.response, workerId, now)) ? 'soft_bounce' : 'lost';
        }
        case 'auth_failed':
        case 'unreachable':
        case 'rate_limited': {
          // Not the message's failure: the account is unhealthy (backed off, or stopped until
          // cleared) and the message goes back to the queue as it was, for another account of
          // the pool; no attempt is counted against the lead.
          transition = await recordSenderFailure(tx, m.senderAccountId, outcome.kind, outcome.response, now);
          await sql(
            tx,
            `update outbound_messages set state = 'queued', claimed_by = null, lease_until = null, pool_id = null, sender_account_id = null,
                    smtp_started_at = null, message_id_header = null, last_error = ?, updated_at = ?
              where id = ? and state = 'sending' and claimed_by = ?`,
            [outcome.response, now, m.id, workerId],
          );
          return 'account_failed';
        }
      }
    });
    // Logged once committed: a rolled-back change is never logged.
    if (transition) logSenderTransition(this.deps.log, transition);
    return recorded;
  }

  /**
   * A message that failed for a reason of its own (rendering or composing it threw): no SMTP
   * transaction happened, so it is neither sent nor bounced and the address is not suppressed.
   * Like a permanent rejection it is final: the message is `failed` with the reason, it leaves
   * `queued`, and the lead's sequence ends (`completed`, last event `failed`), in one transaction.
   * No event: the webhook catalogue has none for it (the log and the leads view show it).
   */
  async failed(em: () => EntityManager, m: ClaimedMessage, reason: string, workerId: string): Promise<boolean> {
    const now = this.deps.clock.now();
    return em().transactional(async (tx) => {
      const done = await sql(
        tx,
        `update outbound_messages set state = 'failed', last_error = ?, lease_until = null, updated_at = ?
          where id = ? and state = 'sending' and claimed_by = ? returning id`,
        [reason.slice(0, 1000), now, m.id, workerId],
      );
      if (!done.length) return false;
      await bumpCounters(tx, m.campaignId, { queued: -1 });
      await endEnrollments(tx, [m.enrollmentId], 'completed', 'failed', now);
      return true;
    });
  }

  /**
   * The hot path, group-committed: accepted outcomes wait (while a previous write runs) and are
   * written together, one statement and one commit for all that are waiting (at most
   * `maxBatch`). Resolves once this message's outcome is committed.
   */
  private accepted(m: SentMessage, response: string, workerId: string, at: Date): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.pending.push({ m, response, at, workerId, resolve, reject });
      // One write at a time: outcomes that finish meanwhile wait and share the next one (and
      // this worker's writes never queue on each other's campaign counter row).
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.pending.length) {
        const batch = this.pending.splice(0, this.maxBatch);
        try {
          const done = await this.writeRetrying(batch);
          for (const p of batch) p.resolve(done.has(p.m.id));
        } catch (err) {
          if (batch.length === 1) {
            batch[0].reject(err);
            continue;
          }
          // One bad row must not take the others with it: each on its own.
          for (const p of batch) {
            try {
              p.resolve((await this.writeRetrying([p])).has(p.m.id));
            } catch (e) {
              p.reject(e);
            }
          }
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /** Two workers' batches (or a batch and an enrollment ending) can deadlock: run it again. */
  private async writeRetrying(batch: PendingAccepted[]): Promise<Set<string>> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.writeAccepted(batch);
      } catch (err) {
        if (!retryable(err) || attempt >= 4) throw err;
      }
    }
  }

  /**
   * Accepted outcomes as one statement (its own transaction): each message is sent with the
   * server's reply and its rendered headers, its account becomes the enrollment's (sticky: the
   * lead's follow-ups go through it), the next step is scheduled (or the enrollment completes), counters move once per campaign, and message.sent goes to the outbox for each.
   * Data-modifying CTEs all see one snapshot and commit together. Returns the ids recorded
   * (a message no longer ours is not).
   *
   * `mine` finds each message by its primary key (a lateral lookup per id) and locks it while it
   * is still ours; the update then matches on the id alone. With `state = 'sending'` in the
   * update's own condition the planner scanned the whole `state = 'sending'` partial index
   * (outbound_sending_sender_idx: every claimed message of every worker, and the dead entries of
   * those sent since the last vacuum, ~1,100 in the benchmark) and hash-joined it with the batch.
   */
  private async writeAccepted(batch: PendingAccepted[]): Promise<Set<string>> {
    this.acceptedStatements++;
    const workerIds = [...new Set(batch.map((p) => p.workerId))];
    if (workerIds.length > 1) throw new Error('one outcome batch per worker');
    const rows = await this.stmts.run<{ id: string }>(
      'sending.accepted',
      `with t as (
         select * from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])
           as t(id, sent, response, mid, subject, in_reply_to, refs, next_id, event_id)
       ), mine as (
         select x.id from t cross join lateral (
           select id from outbound_messages where id = t.id and state = 'sending' and claimed_by = ? for update) x
       ), m as (
         update outbound_messages o set state = 'sent', sent_at = t.sent::timestamptz, smtp_response = t.response, lease_until = null,
                updated_at = t.sent::timestamptz, message_id_header = t.mid, subject = t.subject, in_reply_to = t.in_reply_to,
                references_header = t.refs
           from t join mine on mine.id = t.id
          where o.id = t.id
          returning o.id, o.workspace_id, o.campaign_id, o.enrollment_id, o.lead_id, o.step_index, o.to_email, o.message_id_header,
                    o.sender_account_id, t.sent, t.next_id, t.event_id
       ), nxt as (
         select m.*, s.step_index as next_step, s.delay_hours
           from m join enrollments en on en.id = m.enrollment_id and en.status = 'active'
           join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index + 1
       ), ins as (
         insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
         select next_id, workspace_id, campaign_id, enrollment_id, lead_id, next_step,
                case when delay_hours > 0 then 'scheduled' else 'queued' end,
                sent::timestamptz + delay_hours * interval '1 hour', to_email, sent::timestamptz, sent::timestamptz
           from nxt
         on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing
         returning campaign_id, state
       ), e as (
         update enrollments en set last_event = 'sent', last_event_at = m.sent::timestamptz, updated_at = m.sent::timestamptz,
                sender_account_id = m.sender_account_id,
                status = case when en.status = 'active' and not exists (select 1 from nxt where nxt.enrollment_id = en.id) then 'completed' else en.status end
           from m where en.id = m.enrollment_id
          returning en.id
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
         insert into events (id, workspace_id, type, data, created_at)
         select event_id, workspace_id, 'message.sent',
                ${MESSAGE_SENT_DATA},
                sent::timestamptz
           from m
          returning 1
       )
       select id from m`,
      [
        batch.map((p) => p.m.id),
        batch.map((p) => p.at.toISOString()),
        batch.map((p) => p.response),
        batch.map((p) => p.m.messageIdHeader),
        batch.map((p) => p.m.subject),
        batch.map((p) => p.m.inReplyTo),
        batch.map((p) => p.m.references),
        batch.map(() => newId('msg')),
        batch.map(() => newId('evt')),
        workerIds[0],
      ],
    );
    return new Set(rows.map((r) => r.id));
  }

  private async bounced(tx: EntityManager, m: SentMessage, type: 'hard' | 'soft', reason: string, workerId: string, now: Date): Promise<boolean> {
    const done = await sql(
      tx,
      `update outbound_messages set state = 'bounced', sent_at = ?, bounce_type = ?, bounce_reason = ?, bounced_at = ?, smtp_response = ?,
              lease_until = null, updated_at = ?, message_id_header = ?, subject = ?, in_reply_to = ?, references_header = ?
        where id = ? and state = 'sending' and claimed_by = ? returning id`,
      [now, type, reason, now, reason, now, m.messageIdHeader, m.subject, m.inReplyTo, m.references, m.id, workerId],
    );
    if (!done.length) return false;
    await bumpCounters(tx, m.campaignId, { queued: -1, sent: 1, bounced: 1 });
    await endEnrollments(tx, [m.enrollmentId], 'bounced', `bounced_${type}`, now);
    if (type === 'hard') await new SuppressionService(this.deps, tx).add(m.workspaceId, [m.toEmail], 'hard_bounce', m.id, tx);
    await recordEvent(tx, m.workspaceId, messageBounced(m, { type, reason, at: now }), now);
    return true;
  }
}
