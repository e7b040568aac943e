import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { SendOutcome } from '../../adapters/smtp.ts';
import { bumpCounters } from '../campaigns/repository.ts';
import { recordEvent } from '../events/outbox.ts';
import { SuppressionService } from '../suppression/service.ts';
import type { Deps } from '../../services.ts';
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

const HOUR_MS = 3_600_000;

/**
 * Records what the SMTP server answered, in one transaction per message: the message's state
 * and the server's reply, the enrollment, the next step, counters and the event. Postal's
 * habit: every path ends in a recorded outcome.
 */
export class OutcomeRecorder {
  constructor(
    private readonly deps: Deps,
    private readonly retryDelaysMs: number[],
  ) {}

  async record(em: EntityManager, m: SentMessage, outcome: SendOutcome, workerId: string): Promise<'sent' | 'hard_bounce' | 'retry' | 'soft_bounce' | 'auth_failed' | 'lost'> {
    const now = this.deps.clock.now();
    return em.transactional(async (tx) => {
      switch (outcome.kind) {
        case 'accepted':
          return (await this.accepted(tx, m, outcome.response, workerId, now)) ? 'sent' : 'lost';
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

  private async accepted(tx: EntityManager, m: SentMessage, response: string, workerId: string, now: Date): Promise<boolean> {
    const done = await sql(
      tx,
      `update outbound_messages set state = 'sent', sent_at = ?, smtp_response = ?, lease_until = null, updated_at = ?
        where id = ? and state = 'sending' and claimed_by = ? returning id`,
      [now, response, now, m.id, workerId],
    );
    if (!done.length) return false;
    const [enrollment] = await sql<{ status: string }>(
      tx,
      `update enrollments set last_event = 'sent', last_event_at = ?, updated_at = ? where id = ? returning status`,
      [now, now, m.enrollmentId],
    );
    let scheduled = 0;
    let queued = 0;
    if (enrollment?.status === 'active') {
      const [next] = await sql<{ step_index: number; delay_hours: number }>(
        tx,
        `select step_index, delay_hours from campaign_steps where campaign_id = ? and step_index = ?`,
        [m.campaignId, m.stepIndex + 1],
      );
      if (next) {
        const due = new Date(now.getTime() + next.delay_hours * HOUR_MS);
        const state = due.getTime() > now.getTime() ? 'scheduled' : 'queued';
        const ins = await sql(
          tx,
          `insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing returning id`,
          [newId('msg'), m.workspaceId, m.campaignId, m.enrollmentId, m.leadId, next.step_index, state, due, m.toEmail, now, now],
        );
        if (ins.length) {
          if (state === 'scheduled') scheduled++;
          else queued++;
        }
      } else {
        await endEnrollments(tx, [m.enrollmentId], 'completed', 'completed', now);
      }
    }
    await bumpCounters(tx, m.campaignId, { queued: queued - 1, scheduled, sent: 1, delivered: 1 });
    await recordEvent(
      tx,
      m.workspaceId,
      'message.sent',
      {
        campaignId: m.campaignId,
        leadId: m.leadId,
        email: m.toEmail,
        sequenceStep: m.stepIndex,
        messageId: m.id,
        messageIdHeader: m.messageIdHeader,
        sentAt: now.toISOString(),
      },
      now,
    );
    return true;
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
