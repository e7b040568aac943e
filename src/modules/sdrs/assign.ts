import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { OutgoingMail } from '../../adapters/smtp.ts';
import type { ParsedMail } from '../../adapters/mailparse.ts';
import { ApiError } from '../../shared/errors.ts';
import { isoOrNull } from '../../shared/time.ts';
import type { Deps } from '../../deps.ts';
import { escapeHtml, renderText, renderSubject, type LeadValues } from '../sending/render.ts';
import { checkIcp } from './icp.ts';
import { priorityScore } from './priority.ts';

export interface AssignInput {
  sdrId: string;
  to?: string;
  cc?: string[];
  subject?: string;
  note?: string;
  category?: 'A' | 'B' | 'C';
  forceForward?: boolean;
  skipIcpCheck?: boolean;
  seniority?: string;
  employeeCount?: string | number;
}

interface ReplyRow {
  id: string;
  workspace_id: string;
  campaign_id: string;
  lead_id: string;
  email: string;
  classification: string;
  decided_by: string;
  thread_snippet: string;
  received_at: Date | string;
  forwarded_at: Date | string | null;
  raw: Buffer | null;
  message_id_header: string | null;
  inbound_subject: string | null;
  sender_account_id: string | null;
}

/**
 * Assigning a reply to an SDR (spec §4, contract §8): the ICP gate, a real forward of the reply
 * from the sender account that received it, a handoff holding a snapshot of the conversation,
 * and a prospect thread in the SDR's inbox. Everything is checked before the forward goes out;
 * what it writes, it writes in one transaction after the forward was accepted.
 */
export class AssignmentService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async assign(workspaceId: string, replyId: string, input: AssignInput) {
    const reply = await this.reply(workspaceId, replyId);
    const [sdr] = await sql<{ id: string; name: string; email: string; active: boolean }>(
      this.em,
      `select id, name, email, active from sdrs where id = ? and workspace_id = ?`,
      [input.sdrId, workspaceId],
    );
    if (!sdr || !sdr.active) throw ApiError.invalid(`sdrId: ${input.sdrId} is not an active SDR of this workspace`);
    // A mail system's notice is no conversation to hand off (contract §5: never a human reply).
    if (reply.classification === 'bounce' || reply.decided_by.startsWith('arf:'))
      throw new ApiError(409, 'reply_not_assignable', `reply ${replyId} is a ${reply.classification === 'bounce' ? 'bounce' : 'feedback-loop complaint'}, not a person's answer`);
    if (!input.skipIcpCheck) await this.icpGate(workspaceId, input);
    if (reply.forwarded_at && !input.forceForward)
      throw new ApiError(409, 'already_forwarded', `reply ${replyId} was already forwarded (${isoOrNull(reply.forwarded_at)}); set forceForward to forward it again`);
    if (!reply.raw || !reply.sender_account_id) throw new ApiError(409, 'reply_not_forwardable', 'this reply has no stored message to forward');

    const [account] = await sql<{ email: string; name: string; smtp_url_enc: string }>(
      this.em,
      `select email, name, smtp_url_enc from sender_accounts where id = ?`,
      [reply.sender_account_id],
    );
    const [lead] = await sql<{ email: string; first_name: string | null; last_name: string | null; company: string | null; job_title: string | null; custom: Record<string, unknown> }>(
      this.em,
      `select email, first_name, last_name, company, job_title, custom from leads where id = ?`,
      [reply.lead_id],
    );
    const original = await this.deps.mailParser.parse(reply.raw);
    const originalSubject = original.subject ?? reply.inbound_subject ?? '';
    const now = this.deps.clock.now();
    const forwardId = newId('msg');
    const domain = account.email.split('@')[1] ?? 'mailgate.local';
    const mail = this.forwardMail(input, { account, sdrEmail: sdr.email, original, originalSubject, raw: reply.raw, messageId: `<${forwardId}.${randomBytes(6).toString('hex')}@${domain}>` });

    const outcome = await this.deps.mailer.send(this.deps.crypto.decrypt(account.smtp_url_enc), mail);
    if (outcome.kind !== 'accepted') throw new ApiError(502, 'forward_failed', `the forward was not accepted by the SMTP server: ${outcome.response}`);

    const snapshot = await this.snapshot(reply, lead, original.text ?? '', originalSubject);
    return this.em.transactional(async (tx) => {
      await sql(
        tx,
        `insert into outbound_messages (id, workspace_id, campaign_id, lead_id, step_index, kind, state, due_at, sender_account_id, to_email,
                                        subject, message_id_header, smtp_response, sent_at, created_at, updated_at)
         values (?, ?, ?, ?, 0, 'forward', 'sent', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [forwardId, workspaceId, reply.campaign_id, reply.lead_id, now, reply.sender_account_id, mail.to, mail.subject, mail.messageId, outcome.response, now, now, now],
      );
      const category = input.category ?? 'B';
      const contactName = [lead.first_name, lead.last_name].filter(Boolean).join(' ');
      const receivedAt = new Date(isoOrNull(reply.received_at)!);
      const [existing] = await sql<{ id: string }>(tx, `select id from prospect_threads where reply_id = ? and sdr_id = ? for update`, [reply.id, sdr.id]);
      const threadId = existing?.id ?? newId('thr');
      const score = priorityScore({ category, classification: reply.classification, lastMessageAt: receivedAt, now, overdueFollowups: 0 });
      if (existing) {
        await sql(tx, `update prospect_threads set category = ?, priority_score = ?, updated_at = ? where id = ?`, [category, score, now, threadId]);
      } else {
        await sql(
          tx,
          `insert into prospect_threads (id, workspace_id, sdr_id, reply_id, lead_id, campaign_id, contact_email, contact_name, subject, status,
                                         category, priority_score, last_message_at, mail_thread_id, created_at, updated_at)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?, 'new', ?, ?, ?, ?, ?, ?)`,
          [threadId, workspaceId, sdr.id, reply.id, reply.lead_id, reply.campaign_id, reply.email, contactName, originalSubject, category, score, receivedAt, reply.message_id_header, now, now],
        );
        await sql(
          tx,
          `insert into thread_messages (id, thread_id, direction, message_id_header, from_email, to_emails, subject, body_text, body_html, at, created_at)
           values (?, ?, 'inbound', ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            newId('tmsg'),
            threadId,
            reply.message_id_header,
            reply.email,
            [account.email],
            originalSubject,
            original.text ?? '',
            typeof original.html === 'string' ? original.html : null,
            receivedAt,
            now,
          ],
        );
      }
      const handoffId = newId('hof');
      await sql(
        tx,
        `insert into handoffs (id, workspace_id, reply_id, thread_id, sdr_id, forwarded_message_id, to_email, cc_emails, subject, note, category,
                               seniority, employee_count, snapshot, created_at)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?)`,
        [
          handoffId,
          workspaceId,
          reply.id,
          threadId,
          sdr.id,
          forwardId,
          mail.to,
          mail.cc ?? [],
          mail.subject,
          input.note ?? null,
          category,
          input.seniority ?? null,
          input.employeeCount === undefined ? null : String(input.employeeCount),
          JSON.stringify(snapshot),
          now,
        ],
      );
      await sql(tx, `update replies set forwarded_at = ? where id = ?`, [now, reply.id]);
      return { data: { handoffId, threadId, messageId: forwardId, mailThreadId: reply.message_id_header ?? '' } };
    });
  }

  private async reply(workspaceId: string, replyId: string): Promise<ReplyRow> {
    const [reply] = await sql<ReplyRow>(
      this.em,
      `select r.id, r.workspace_id, r.campaign_id, r.lead_id, r.email, r.classification, r.decided_by, r.thread_snippet, r.received_at, r.forwarded_at,
              i.raw, i.message_id_header, i.subject as inbound_subject,
              coalesce(w.sender_account_id, o.sender_account_id) as sender_account_id
         from replies r
         left join inbound_messages i on i.id = r.inbound_message_id
         left join mailbox_watches w on w.id = i.watch_id
         left join outbound_messages o on o.id = r.outbound_message_id
        where r.id = ? and r.workspace_id = ?`,
      [replyId, workspaceId],
    );
    if (!reply) throw ApiError.notFound('reply', `reply ${replyId} not found`);
    return reply;
  }

  private async icpGate(workspaceId: string, input: AssignInput): Promise<void> {
    const missing = (['seniority', 'employeeCount'] as const).filter((f) => input[f] === undefined || input[f] === '');
    if (missing.length) throw ApiError.invalid(`${missing.join(' and ')} required unless skipIcpCheck is true`);
    const [criteria] = await sql<{ seniority: string[] | null; employee_counts: string[] | null }>(
      this.em,
      `select seniority, employee_counts from icp_criteria where workspace_id = ?`,
      [workspaceId],
    );
    const verdict = checkIcp({ seniority: criteria?.seniority ?? null, employeeCounts: criteria?.employee_counts ?? null }, { seniority: input.seniority!, employeeCount: input.employeeCount! });
    if (verdict === 'unknown_value') throw ApiError.invalid(`seniority or employeeCount is not a known value (see the ICP values in docs/sdr-desk.md)`);
    if (verdict === 'failed') throw new ApiError(400, 'icp_failed', 'the contact is outside the workspace’s ICP criteria', { icpFailed: true });
  }

  private forwardMail(
    input: AssignInput,
    f: { account: { email: string; name: string }; sdrEmail: string; original: ParsedMail; originalSubject: string; raw: Buffer; messageId: string },
  ): OutgoingMail {
    const from = f.original.from?.text ?? '';
    const date = f.original.date ? f.original.date.toUTCString() : '';
    const to = f.original.to ? (Array.isArray(f.original.to) ? f.original.to.map((a) => a.text).join(', ') : f.original.to.text) : '';
    const body = (f.original.text ?? '').trim();
    const header = ['---------- Forwarded message ---------', `From: ${from}`, `Date: ${date}`, `Subject: ${f.originalSubject}`, `To: ${to}`];
    const quoted = body
      .split(/\r?\n/)
      .map((l) => `> ${l}`)
      .join('\n');
    const text = [...(input.note ? [input.note, ''] : []), ...header, '', quoted, ''].join('\n');
    const html =
      (input.note ? `<p>${escapeHtml(input.note).replace(/\n/g, '<br>')}</p>` : '') +
      `<div>${header.map(escapeHtml).join('<br>')}</div><blockquote style="margin:0 0 0 .8ex;border-left:1px solid #ccc;padding-left:1ex">${escapeHtml(body).replace(/\n/g, '<br>')}</blockquote>`;
    return {
      from: { name: f.account.name, address: f.account.email },
      to: input.to ?? f.sdrEmail,
      cc: input.cc?.length ? input.cc : undefined,
      subject: (input.subject ?? `Fwd: ${f.originalSubject}`).replace(/[\r\n]+/g, ' '),
      text,
      html,
      messageId: f.messageId,
      attachments: [{ filename: 'original.eml', content: f.raw, contentType: 'message/rfc822' }],
    };
  }

  /** Every step sent to the lead (as rendered for them) and the reply, oldest first. */
  private async snapshot(reply: ReplyRow, lead: { email: string; first_name: string | null; last_name: string | null; company: string | null; job_title: string | null; custom: Record<string, unknown> }, replyText: string, replySubject: string) {
    const steps = await sql<{ id: string; step_index: number; subject: string | null; sent_at: Date | string; message_id_header: string | null; step_subject: string | null; body_html: string | null }>(
      this.em,
      `select m.id, m.step_index, m.subject, m.sent_at, m.message_id_header, s.subject as step_subject, s.body_html
         from outbound_messages m left join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index
        where m.campaign_id = ? and m.lead_id = ? and m.kind = 'campaign' and m.sent_at is not null
        order by m.step_index`,
      [reply.campaign_id, reply.lead_id],
    );
    const [campaign] = await sql<{ name: string }>(this.em, `select name from campaigns where id = ?`, [reply.campaign_id]);
    const values: LeadValues = { email: lead.email, firstName: lead.first_name, lastName: lead.last_name, company: lead.company, jobTitle: lead.job_title, custom: lead.custom ?? {} };
    return {
      campaign: { id: reply.campaign_id, name: campaign?.name ?? null },
      lead: { email: lead.email, firstName: lead.first_name, lastName: lead.last_name, company: lead.company, jobTitle: lead.job_title, customFields: lead.custom ?? {} },
      messages: [
        ...steps.map((s) => ({
          direction: 'outbound',
          stepIndex: s.step_index,
          messageId: s.id,
          messageIdHeader: s.message_id_header,
          subject: s.subject ?? (s.step_subject ? renderSubject(s.step_subject, values) : ''),
          bodyText: s.body_html ? renderText(s.body_html, values, { unsubscribeUrl: '' }) : '',
          at: isoOrNull(s.sent_at),
        })),
        { direction: 'inbound', replyId: reply.id, classification: reply.classification, subject: replySubject, bodyText: replyText, at: isoOrNull(reply.received_at) },
      ],
    };
  }
}
