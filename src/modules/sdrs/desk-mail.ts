import type { EntityManager } from '@mikro-orm/postgresql';
import { randomBytes } from 'node:crypto';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import { sendOnce } from '../../adapters/smtp.ts';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../services.ts';
import type { InboundAnalysis } from '../inbound/analyze.ts';
import { escapeHtml, replySubject } from '../sending/render.ts';
import { FollowupService } from './followups.ts';

/** Statuses a prospect's answer or an SDR's send moves (closed ones stay as they are). */
const OPEN = ['new', 'awaiting_reply', 'needs_followup', 'replied'];

/**
 * Mail of the SDR desk through the SDR's own mailbox: manual replies sent in the prospect's
 * thread, and the prospect's answers arriving in the SDR's mailbox joining their thread.
 */
export class DeskMailService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  /** POST /v1/sdr/threads/:id/send-manual. */
  async sendManual(sdrId: string, workspaceId: string, threadId: string, input: { bodyText: string; bodyHtml?: string; cc?: string[] }) {
    const [thread] = await sql<{ id: string; campaign_id: string | null; lead_id: string | null; contact_email: string; subject: string; status: string }>(
      this.em,
      `select id, campaign_id, lead_id, contact_email, subject, status from prospect_threads where id = ? and sdr_id = ? and workspace_id = ?`,
      [threadId, sdrId, workspaceId],
    );
    if (!thread) throw ApiError.notFound('thread', `thread ${threadId} not found`);
    const [box] = await sql<{ email: string; smtp_url_enc: string; health_state: string; name: string }>(
      this.em,
      `select b.email, b.smtp_url_enc, b.health_state, s.name from sdr_mailboxes b join sdrs s on s.id = b.sdr_id where b.sdr_id = ?`,
      [sdrId],
    );
    if (!box || box.health_state !== 'active') throw new ApiError(409, 'mail_not_connected', `the SDR's mailbox is not usable (${box?.health_state ?? 'not connected'})`);
    const history = await sql<{ message_id_header: string | null }>(
      this.em,
      `select message_id_header from thread_messages where thread_id = ? and message_id_header is not null order by at, created_at`,
      [threadId],
    );
    const references = history.map((h) => h.message_id_header!);
    const now = this.deps.clock.now();
    const id = newId('msg');
    const messageIdHeader = `<${id}.${randomBytes(6).toString('hex')}@${box.email.split('@')[1] ?? 'mailgate.local'}>`;
    const subject = replySubject(thread.subject || '');
    const html = input.bodyHtml ?? `<p>${escapeHtml(input.bodyText).replace(/\r?\n/g, '<br>')}</p>`;
    const outcome = await sendOnce(this.deps.crypto.decrypt(box.smtp_url_enc), {
      from: { name: box.name, address: box.email },
      to: thread.contact_email,
      cc: input.cc?.length ? input.cc : undefined,
      subject,
      text: input.bodyText,
      html,
      messageId: messageIdHeader,
      inReplyTo: references[references.length - 1],
      references: references.length ? references : undefined,
    });
    if (outcome.kind !== 'accepted') {
      // The attempt says how the mailbox is: refused login -> needs_reauth; 421/454 -> rate_limited.
      const health = outcome.kind === 'auth_failed' ? 'needs_reauth' : 'code' in outcome && (outcome.code === 421 || outcome.code === 454) ? 'rate_limited' : null;
      if (health)
        await sql(this.em, `update sdr_mailboxes set health_state = ?, last_sync_error = ?, updated_at = ? where sdr_id = ?`, [health, outcome.response, now, sdrId]);
      if (outcome.kind === 'auth_failed') throw new ApiError(409, 'mail_not_connected', `the SDR's mailbox refused the login: ${outcome.response}`);
      throw new ApiError(502, 'send_failed', `the SDR's SMTP server did not accept the message: ${outcome.response}`);
    }
    return this.em.transactional(async (tx) => {
      if (thread.campaign_id && thread.lead_id)
        await sql(
          tx,
          `insert into outbound_messages (id, workspace_id, campaign_id, lead_id, step_index, kind, state, due_at, to_email, subject, message_id_header,
                                          in_reply_to, references_header, smtp_response, sent_at, created_at, updated_at)
           values (?, ?, ?, ?, 0, 'sdr_reply', 'sent', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [id, workspaceId, thread.campaign_id, thread.lead_id, now, thread.contact_email, subject, messageIdHeader, references[references.length - 1] ?? null, references.join(' ') || null, outcome.response, now, now, now],
        );
      await sql(
        tx,
        `insert into thread_messages (id, thread_id, direction, outbound_message_id, message_id_header, from_email, to_emails, cc_emails, subject, body_text, body_html, at, created_at)
         values (?, ?, 'outbound', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [newId('tmsg'), threadId, thread.campaign_id && thread.lead_id ? id : null, messageIdHeader, box.email, [thread.contact_email], input.cc ?? [], subject, input.bodyText, html, now, now],
      );
      const [t] = await sql<{ status: string }>(
        tx,
        `update prospect_threads set status = case when status = any(?::text[]) then 'awaiting_reply' else status end, last_message_at = ?, updated_at = ?
          where id = ? returning status`,
        [OPEN, now, now, threadId],
      );
      await new FollowupService(this.deps, tx).onSend(threadId);
      return { data: { messageId: id, threadId, status: t.status } };
    });
  }

  /**
   * An answer in the SDR's mailbox: the thread whose messages it references (else the SDR's
   * latest thread with that contact) gets it; a human answer makes it `replied` and cancels
   * the pending follow-up, an out-of-office answer with a return date moves the follow-up past it.
   * Returns false when it belongs to no thread of this SDR.
   */
  async prospectAnswer(tx: EntityManager, sdrId: string, a: InboundAnalysis, inboundId: string, receivedAt: Date): Promise<boolean> {
    const chain = [...a.references, ...(a.inReplyTo ? [a.inReplyTo] : [])];
    let [thread] = chain.length
      ? await sql<{ id: string }>(
          tx,
          `select t.id from thread_messages m join prospect_threads t on t.id = m.thread_id
            where t.sdr_id = ? and m.message_id_header = any(?::text[]) order by m.at desc limit 1`,
          [sdrId, chain],
        )
      : [];
    if (!thread && a.from)
      [thread] = await sql<{ id: string }>(tx, `select id from prospect_threads where sdr_id = ? and lower(contact_email) = ? order by last_message_at desc limit 1`, [sdrId, a.from]);
    if (!thread) return false;
    const now = this.deps.clock.now();
    await sql(
      tx,
      `insert into thread_messages (id, thread_id, direction, inbound_message_id, message_id_header, from_email, subject, body_text, at, created_at)
       values (?, ?, 'inbound', ?, ?, ?, ?, ?, ?, ?)`,
      [newId('tmsg'), thread.id, inboundId, a.messageId, a.from ?? '', a.subject, a.strippedText, receivedAt, now],
    );
    const ooo = a.classification === 'out_of_office';
    await sql(
      tx,
      `update prospect_threads set status = case when ? and status = any(?::text[]) then 'replied' else status end, last_message_at = ?, updated_at = ? where id = ?`,
      [!ooo, OPEN, receivedAt, now, thread.id],
    );
    await new FollowupService(this.deps, tx).onProspectAnswer(thread.id, ooo ? a.oooReturnDate : null);
    return true;
  }
}
