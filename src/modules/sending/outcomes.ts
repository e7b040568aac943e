import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { SendOutcome } from '../../adapters/smtp.ts';
import { bumpCounters } from '../campaigns/repository.ts';
import { recordEvent } from '../events/outbox.ts';
import { SuppressionService } from '../suppression/service.ts';
import type { Deps } from '../../services.ts';
import type { PreparedStatements } from '../../db/statements.ts';
import { endEnrollments } from './lifecycle.ts';

export interface SentMessage {
  id: string;
  workspaceId: string;
  campaignId: string;
  enrollmentId: string;
  leadId: string;
  stepIndex: number;
  toEmail: string;
  messageIdHeader: string;
  senderAccountId: string;
}


/**
 * Records what the SMTP server answered, in one transaction per message: the message's state
 * and the server's reply, the enrollment, the next step, counters and the event. Postal's
 * habit: every path ends in a recorded outcome.
 */
export class OutcomeRecorder {
  constructor(
    private readonly deps: Deps,
    private readonly retryDelaysMs: number[],
    private readonly stmts: PreparedStatements,
  ) {}

  async record(em: EntityManager, m: SentMessage, outcome: SendOutcome, workerId: string): Promise<'sent' | 'hard_bounce' | 'retry' | 'soft_bounce' | 'auth_failed' | 'lost'> {
    const now = this.deps.clock.now();
    if (outcome.kind === 'accepted') return (await this.accepted(m, outcome.response, workerId, now)) ? 'sent' : 'lost';
    return em.transactional(async (tx) => {
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
        case 'auth_failed': {
          // Not a bounce: the account is unhealthy and the message goes to another account.
          await sql(tx, `update sender_accounts set health = 'auth_failed', health_error = ?, health_checked_at = ?, updated_at = ? where id = ?`, [
            outcome.response,
            now,
            now,
            m.senderAccountId,
          ]);
          await sql(
            tx,
            `update outbound_messages set state = 'queued', claimed_by = null, lease_until = null, pool_id = null, sender_account_id = null,
                    smtp_started_at = null, message_id_header = null, last_error = ?, updated_at = ?
              where id = ? and state = 'sending' and claimed_by = ?`,
            [outcome.response, now, m.id, workerId],
          );
          return 'auth_failed';
        }
      }
    });
  }

  /**
   * The hot path, as one statement (one round trip, its own transaction): the message is sent,
   * the next step is scheduled (or the enrollment completes), counters move, and message.sent
   * goes to the outbox. Data-modifying CTEs all see one snapshot and commit together.
   */
  private async accepted(m: SentMessage, response: string, workerId: string, now: Date): Promise<boolean> {
    const rows = await this.stmts.run<{ done: string }>(
      'sending.accepted',
      `with m as (
         update outbound_messages set state = 'sent', sent_at = ?, smtp_response = ?, lease_until = null, updated_at = ?
          where id = ? and state = 'sending' and claimed_by = ?
          returning id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, to_email, message_id_header
       ), nxt as (
         select m.*, s.step_index as next_step, s.delay_hours
           from m join enrollments en on en.id = m.enrollment_id and en.status = 'active'
           join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index + 1
       ), ins as (
         insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
         select ?, workspace_id, campaign_id, enrollment_id, lead_id, next_step,
                case when delay_hours > 0 then 'scheduled' else 'queued' end,
                ?::timestamptz + delay_hours * interval '1 hour', to_email, ?, ?
           from nxt
         on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing
         returning state
       ), e as (
         update enrollments en set last_event = 'sent', last_event_at = ?, updated_at = ?,
                status = case when en.status = 'active' and not exists (select 1 from nxt) then 'completed' else en.status end
           from m where en.id = m.enrollment_id
          returning en.id
       ), c as (
         update campaign_counters k set sent = sent + 1, delivered = delivered + 1,
                queued = queued - 1 + (select count(*) from ins where state = 'queued'),
                scheduled = scheduled + (select count(*) from ins where state = 'scheduled')
           from m where k.campaign_id = m.campaign_id
          returning 1
       ), ev as (
         insert into events (id, workspace_id, type, data, created_at)
         select ?, workspace_id, 'message.sent',
                jsonb_build_object('campaignId', campaign_id, 'leadId', lead_id, 'email', to_email, 'sequenceStep', step_index,
                                   'messageId', id, 'messageIdHeader', message_id_header, 'sentAt', ?::text),
                ?
           from m
          returning 1
       )
       select (select count(*) from m) + 0 * (select count(*) from e) + 0 * (select count(*) from c) + 0 * (select count(*) from ev) as done`,
      [now, response, now, m.id, workerId, newId('msg'), now, now, now, now, now, newId('evt'), now.toISOString(), now],
    );
    return Number(rows[0].done) === 1;
  }

  private async bounced(tx: EntityManager, m: SentMessage, type: 'hard' | 'soft', reason: string, workerId: string, now: Date): Promise<boolean> {
    const done = await sql(
      tx,
      `update outbound_messages set state = 'bounced', sent_at = ?, bounce_type = ?, bounce_reason = ?, bounced_at = ?, smtp_response = ?,
              lease_until = null, updated_at = ?
        where id = ? and state = 'sending' and claimed_by = ? returning id`,
      [now, type, reason, now, reason, now, m.id, workerId],
    );
    if (!done.length) return false;
    await bumpCounters(tx, m.campaignId, { queued: -1, sent: 1, bounced: 1 });
    await endEnrollments(tx, [m.enrollmentId], 'bounced', `bounced_${type}`, now);
    if (type === 'hard') await new SuppressionService(this.deps, tx).add(m.workspaceId, [m.toEmail], 'hard_bounce', m.id, tx);
    await recordEvent(
      tx,
      m.workspaceId,
      'message.bounced',
      {
        campaignId: m.campaignId,
        leadId: m.leadId,
        email: m.toEmail,
        sequenceStep: m.stepIndex,
        messageId: m.id,
        messageIdHeader: m.messageIdHeader,
        bounceType: type,
        bounceReason: reason,
        bouncedAt: now.toISOString(),
      },
      now,
    );
    return true;
  }
}
