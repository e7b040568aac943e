import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../adapters/ids.ts';
import type { OutgoingMail } from '../../adapters/smtp.ts';
import type { ParsedMail } from '../../adapters/mailparse.ts';
import type { AddressObject } from 'mailparser';
import { ApiError } from '../../shared/errors.ts';
import { isoOrNull } from '../../shared/time.ts';
import { storableText } from '../../shared/text.ts';
import type { Deps } from '../../deps.ts';
import { escapeHtml, renderText, renderSubject, type LeadValues } from '../sending/render.ts';
import { checkIcp, EMPLOYEE_COUNT_VALUES, normalizeEmployeeCount, normalizeSeniority, SENIORITY_VALUES } from './icp.ts';
import { icpCriteria, sdrOfWorkspace } from './repository.ts';
import { lockThreadOfReply, openThread, recategorize, recordHandoff } from './thread-repository.ts';
import { markForwarded, replyForHandoff, type ReplyForHandoff } from '../inbound/repository.ts';
import { bodyText } from '../inbound/analyze.ts';
import { accountForSending } from '../senders/repository.ts';
import { campaignName, leadById } from '../campaigns/repository.ts';
import type { LeadColumns } from '../messages/send.ts';
import { recordForward, sentSteps } from '../messages/desk.ts';
import { priorityScore } from './priority.ts';
import { recomputeThreadPriority } from './threads.ts';
import { inDeskSendSlot } from './desk-slots.ts';
import { advisoryXactLock } from '../../db/admin.ts';

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


/**
 * Why a reply cannot be handed to an SDR, or null when it can. A mail system's notice is no
 * conversation to hand off (contract §5: never a human reply); a prospect who asked to be
 * removed was put on the suppression list, and the desk writes to no address on it: the thread
 * would be one the SDR can never answer (until 2026-11-30 the API assigned it and forwarded the
 * reply; the dashboard offers no Assign button for it).
 */
function notAssignable(reply: Pick<ReplyForHandoff, 'classification' | 'decided_by'>): string | null {
  if (reply.classification === 'bounce') return "is a bounce, not a person's answer";
  if (reply.decided_by.startsWith('arf:')) return "is a feedback-loop complaint, not a person's answer";
  if (reply.classification === 'unsubscribe')
    return 'asks to be unsubscribed (the address went on the suppression list): the SDR desk writes to no one who asked to stop, so it is not handed to an SDR; nothing was forwarded';
  return null;
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
    const sdr = await sdrOfWorkspace(this.em, workspaceId, input.sdrId);
    if (!sdr || !sdr.active) throw ApiError.invalid(`sdrId: ${input.sdrId} is not an active SDR of this workspace`);
    const refused = notAssignable(reply);
    if (refused) throw new ApiError(409, 'reply_not_assignable', `reply ${replyId} ${refused}`);
    if (!input.skipIcpCheck) await this.icpGate(workspaceId, input);
    if (reply.forwarded_at && !input.forceForward)
      throw new ApiError(409, 'already_forwarded', `reply ${replyId} was already forwarded (${isoOrNull(reply.forwarded_at)}); set forceForward to forward it again`);
    if (!reply.raw || !reply.sender_account_id) throw new ApiError(409, 'reply_not_forwardable', 'this reply has no stored message to forward');

    const account = await accountForSending(this.em, reply.sender_account_id);
    const lead = (await leadById(this.em, reply.lead_id))!;
    const original = await this.deps.mailParser.parse(reply.raw);
    // What the thread and the handoff store of the original is repaired as at ingestion (a NUL
    // in the body made the thread's insert fail after the forward had gone out: a 500, and a
    // new forward on every retry). The forward itself carries the original as it came.
    const originalSubject = storableText(original.subject ?? reply.inbound_subject ?? '');
    // An HTML-only reply has no text part: its words are the HTML's, as the classifier read them
    // (the forward quoted nothing, and the thread and the snapshot held an empty message).
    const originalText = storableText(bodyText(original));
    const originalHtml = typeof original.html === 'string' ? storableText(original.html) : null;
    const now = this.deps.clock.now();
    const forwardId = newId('msg');
    const domain = account.email.split('@')[1] ?? 'mailgate.local';
    const mail = this.forwardMail(input, { account, sdrEmail: sdr.email, original, originalSubject, originalText, raw: reply.raw, messageId: `<${forwardId}.${randomBytes(6).toString('hex')}@${domain}>` });

    const snapshot = await this.snapshot(reply, lead, originalText, originalSubject);
    // One assignment of a reply at a time, across processes: the check that it was not forwarded
    // yet, the forward and its record hold the reply's lock together. Checked only before the
    // forward, concurrent assigns each found it not forwarded, and each forwarded it and opened a
    // thread of its own. So the transaction spans the SMTP transaction, as an idempotent
    // send-manual's does (desk-mail.ts), and runs once: it sends mail (db/transaction.ts). In a
    // desk send slot (desk-slots.ts), as the desk's sends: a slow SMTP server holds at most half
    // of the pool's connections.
    return inDeskSendSlot(this.em, () => this.em.transactional(async (tx) => {
      await advisoryXactLock(tx, `assign:${reply.id}`);
      const current = await replyForHandoff(tx, workspaceId, replyId);
      if (!current) throw ApiError.notFound('reply', `reply ${replyId} not found`);
      if (current.forwarded_at && !input.forceForward)
        throw new ApiError(409, 'already_forwarded', `reply ${replyId} was already forwarded (${isoOrNull(current.forwarded_at)}); set forceForward to forward it again`);
      // Its classification as of now: an operator may have changed it since the first read
      // (PATCH /v1/replies/:replyId takes this lock too), into an unsubscribe for one.
      const refusedNow = notAssignable(current);
      if (refusedNow) throw new ApiError(409, 'reply_not_assignable', `reply ${replyId} ${refusedNow}`);
      const outcome = await this.deps.mailer.send(this.deps.crypto.decrypt(account.smtp_url_enc), mail);
      if (outcome.kind !== 'accepted') throw new ApiError(502, 'forward_failed', `the forward was not accepted by the SMTP server: ${outcome.response}`);
      await recordForward(
        tx,
        { id: forwardId, workspaceId, campaignId: reply.campaign_id, leadId: reply.lead_id, senderAccountId: reply.sender_account_id!, to: mail.to, subject: mail.subject, messageIdHeader: mail.messageId!, response: outcome.response },
        now,
      );
      // The contact is who wrote the reply, whom a mail client's Reply would answer: a colleague
      // answering for the lead ("Bob has left, I look after this now") or the lead writing from
      // another address. Until 2026-11-29 it was always the lead's address: the thread said the
      // lead had written, and the SDR's answers went to a mailbox nobody reads (docs/decisions.md).
      const writer = writerOf(original);
      const byLead = !writer || writer.address === reply.email.toLowerCase();
      const contactEmail = byLead ? reply.email : writer.address;
      const contactName = byLead ? [lead.first_name, lead.last_name].filter(Boolean).join(' ') : writer.name;
      const receivedAt = new Date(isoOrNull(reply.received_at)!);
      const existing = await lockThreadOfReply(tx, reply.id, sdr.id);
      // A forward again (forceForward) to the SDR who has the thread keeps its category unless
      // one is given (it was set back to B), and its priority from what the thread holds now.
      const category = input.category ?? existing?.category ?? 'B';
      const threadId = existing?.id ?? newId('thr');
      if (existing) {
        if (category !== existing.category) await recategorize(tx, threadId, category, now);
        await recomputeThreadPriority(tx, this.deps.clock, threadId);
      } else {
        const score = priorityScore({ category, classification: current.classification, lastMessageAt: receivedAt, now, overdueFollowups: 0 });
        await openThread(
          tx,
          {
            id: threadId,
            workspaceId,
            sdrId: sdr.id,
            replyId: reply.id,
            leadId: reply.lead_id,
            campaignId: reply.campaign_id,
            contactEmail,
            contactName,
            subject: originalSubject,
            category,
            score,
            receivedAt,
            mailThreadId: reply.message_id_header,
          },
          { from: contactEmail, to: [account.email], cc: addressesOf(original.cc), bodyText: originalText, bodyHtml: originalHtml, automatic: current.classification === 'out_of_office' },
          now,
        );
      }
      const handoffId = newId('hof');
      await recordHandoff(
        tx,
        {
          id: handoffId,
          workspaceId,
          replyId: reply.id,
          threadId,
          sdrId: sdr.id,
          forwardedMessageId: forwardId,
          to: mail.to,
          cc: mail.cc ?? [],
          subject: mail.subject,
          note: input.note ?? null,
          category,
          seniority: input.seniority ?? null,
          employeeCount: input.employeeCount === undefined ? null : String(input.employeeCount),
          snapshot,
        },
        now,
      );
      await markForwarded(tx, reply.id, now);
      return { data: { handoffId, threadId, messageId: forwardId, mailThreadId: reply.message_id_header ?? '' } };
    }));
  }

  private async reply(workspaceId: string, replyId: string): Promise<ReplyForHandoff> {
    const reply = await replyForHandoff(this.em, workspaceId, replyId);
    if (!reply) throw ApiError.notFound('reply', `reply ${replyId} not found`);
    return reply;
  }

  private async icpGate(workspaceId: string, input: AssignInput): Promise<void> {
    // Blank is missing too: checkIcp passes a value it is not given (spaces included).
    const missing = (['seniority', 'employeeCount'] as const).filter((f) => input[f] === undefined || String(input[f]).trim() === '');
    if (missing.length) {
      throw ApiError.invalid(`${missing.join(' and ')} required unless skipIcpCheck is true`, {
        errors: missing.map((field) => ({ field, message: 'is required unless skipIcpCheck is true' })),
      });
    }
    const criteria = await icpCriteria(this.em, workspaceId);
    const verdict = checkIcp({ seniority: criteria?.seniority ?? null, employeeCounts: criteria?.employee_counts ?? null }, { seniority: input.seniority!, employeeCount: input.employeeCount! });
    if (verdict === 'unknown_value') {
      // Each refused value by name, with what is accepted (docs/sdr-desk.md, the ICP values).
      const errors = [];
      if (!normalizeSeniority(String(input.seniority))) errors.push({ field: 'seniority', value: input.seniority, message: `is not one of ${SENIORITY_VALUES.join(', ')}` });
      if (!normalizeEmployeeCount(input.employeeCount as string | number)) {
        errors.push({ field: 'employeeCount', value: input.employeeCount, message: `is not one of ${EMPLOYEE_COUNT_VALUES.join(', ')} or a whole number` });
      }
      throw ApiError.invalid(errors.map((e) => `${e.field}: ${JSON.stringify(e.value)} ${e.message}`).join('; '), { errors });
    }
    if (verdict === 'failed') throw new ApiError(400, 'icp_failed', 'the contact is outside the workspace’s ICP criteria', { icpFailed: true });
  }

  private forwardMail(
    input: AssignInput,
    f: { account: { email: string; name: string }; sdrEmail: string; original: ParsedMail; originalSubject: string; originalText: string; raw: Buffer; messageId: string },
  ): OutgoingMail {
    const from = f.original.from?.text ?? '';
    const date = f.original.date ? f.original.date.toUTCString() : '';
    const list = (a: ParsedMail['to']) => (a ? (Array.isArray(a) ? a.map((x) => x.text).join(', ') : a.text) : '');
    const to = list(f.original.to);
    // Whom the prospect copied is part of what they wrote (the SDR's answer may need to copy them too).
    const cc = list(f.original.cc);
    const body = f.originalText.trim();
    const header = ['---------- Forwarded message ---------', `From: ${from}`, `Date: ${date}`, `Subject: ${f.originalSubject}`, `To: ${to}`, ...(cc ? [`Cc: ${cc}`] : [])];
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
  private async snapshot(reply: ReplyForHandoff, lead: LeadColumns, replyText: string, replySubject: string) {
    const steps = await sentSteps(this.em, reply.campaign_id, reply.lead_id);
    const name = await campaignName(this.em, reply.campaign_id);
    const values: LeadValues = { email: lead.email, firstName: lead.first_name, lastName: lead.last_name, company: lead.company, jobTitle: lead.job_title, custom: lead.custom ?? {} };
    return {
      campaign: { id: reply.campaign_id, name },
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

/** The reply's From: its address (lower-cased, as inbound addresses are kept) and display name. */
function writerOf(mail: ParsedMail): { address: string; name: string } | null {
  const first = mail.from?.value.find((x) => x.address);
  return first?.address ? { address: storableText(first.address.toLowerCase()), name: storableText(first.name ?? '') } : null;
}

/** The addresses of a parsed header (To, Cc), each once, as written. */
function addressesOf(a: ParsedMail['cc']): string[] {
  const out: string[] = [];
  const walk = (v: AddressObject['value']) => {
    for (const x of v) {
      if (x.group) walk(x.group);
      else if (x.address && !out.includes(x.address)) out.push(storableText(x.address));
    }
  };
  for (const o of a ? (Array.isArray(a) ? a : [a]) : []) walk(o.value);
  return out;
}
