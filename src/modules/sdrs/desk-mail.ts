import { storableText } from '../../shared/text.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { randomBytes } from 'node:crypto';
import { sql } from '../../db/sql.ts';
import { idFromDigest, newId } from '../../adapters/ids.ts';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import type { InboundAnalysis } from '../inbound/analyze.ts';
import { escapeHtml, replySubject } from '../sending/render.ts';
import { FollowupService } from './followups.ts';

/** Statuses a prospect's answer or an SDR's send moves (closed ones stay as they are). */
const OPEN = ['new', 'awaiting_reply', 'needs_followup', 'replied'];

export interface PreparedSend {
  thread: { id: string; workspace_id: string; campaign_id: string | null; lead_id: string | null; contact_email: string; subject: string; status: string };
  box: { sdr_id: string; email: string; smtp_url_enc: string; health_state: string; name: string };
  references: string[];
}

export interface ThreadMail {
  subject: string;
  bodyText: string;
  bodyHtml: string;
  cc: string[];
}

export interface SentMail {
  id: string;
  messageIdHeader: string;
  response: string;
}

/** A Message-ID in the SDR's domain. */
function messageIdFor(sdrEmail: string, local: string): string {
  return `<${local}@${sdrEmail.split('@')[1] ?? 'mailgate.local'}>`;
}

/**
 * Mail of the SDR desk through the SDR's own mailbox: manual replies sent in the prospect's
 * thread, and the prospect's answers arriving in the SDR's mailbox joining their thread.
 */
export class DeskMailService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  /**
   * POST /v1/sdr/threads/:id/send-manual. With an `Idempotency-Key` (docs/sdr-desk.md), the
   * send's ids and Message-ID derive from (SDR, thread, key): a repeat of a recorded send answers
   * what it recorded and sends nothing; a repeat after a crash between the server's acceptance
   * and our commit carries the same Message-ID. Repeats wait for each other on an advisory lock.
   */
  async sendManual(
    sdrId: string,
    workspaceId: string,
    threadId: string,
    input: { bodyText: string; bodyHtml?: string; cc?: string[] },
    idempotencyKey?: string,
  ) {
    const prepared = await this.prepare(sdrId, workspaceId, threadId);
    const mail: ThreadMail = {
      subject: replySubject(prepared.thread.subject || ''),
      bodyText: input.bodyText,
      bodyHtml: input.bodyHtml ?? `<p>${escapeHtml(input.bodyText).replace(/\r?\n/g, '<br>')}</p>`,
      cc: input.cc ?? [],
    };
    if (idempotencyKey === undefined) {
      const sent = await this.transmit(prepared, mail);
      return this.em.transactional(async (tx) => ({ data: await this.record(tx, prepared, mail, sent) }));
    }
    const digest = this.deps.crypto.digest('send-manual', `${sdrId}\u0000${threadId}\u0000${idempotencyKey}`);
    const id = idFromDigest('msg', digest);
    const stableKey = `sm_${digest.toString('hex', 16, 32)}`;
    const messageIdHeader = messageIdFor(prepared.box.email, stableKey);
    return this.em.transactional(async (tx) => {
      await sql(tx, `select pg_advisory_xact_lock(hashtextextended(?, 0))`, [messageIdHeader]);
      const [done] = await sql<{ status: string }>(
        tx,
        `select t.status from thread_messages m join prospect_threads t on t.id = m.thread_id
          where m.thread_id = ? and m.direction = 'outbound' and m.message_id_header = ?`,
        [threadId, messageIdHeader],
      );
      if (done) return { data: { messageId: id, threadId, status: done.status } };
      const sent = await this.transmit(prepared, mail, { stableKey, id });
      return { data: await this.record(tx, prepared, mail, sent) };
    });
  }

  /** The thread (404 thread_not_found outside the SDR's scope), the usable mailbox (else 409 mail_not_connected), the References chain. */
  async prepare(sdrId: string, workspaceId: string, threadId: string): Promise<PreparedSend> {
    const [thread] = await sql<PreparedSend['thread']>(
      this.em,
      `select id, workspace_id, campaign_id, lead_id, contact_email, subject, status from prospect_threads where id = ? and sdr_id = ? and workspace_id = ?`,
      [threadId, sdrId, workspaceId],
    );
    if (!thread) throw ApiError.notFound('thread', `thread ${threadId} not found`);
    const [box] = await sql<PreparedSend['box']>(
      this.em,
      `select b.sdr_id, b.email, b.smtp_url_enc, b.health_state, s.name from sdr_mailboxes b join sdrs s on s.id = b.sdr_id where b.sdr_id = ?`,
      [sdrId],
    );
    if (!box || box.health_state !== 'active') throw new ApiError(409, 'mail_not_connected', `the SDR's mailbox is not usable (${box?.health_state ?? 'not connected'})`);
    const history = await sql<{ message_id_header: string | null }>(
      this.em,
      `select message_id_header from thread_messages where thread_id = ? and message_id_header is not null order by at, created_at`,
      [threadId],
    );
    return { thread, box, references: history.map((h) => h.message_id_header!) };
  }

  /**
   * Sends through the SDR's SMTP server as a reply in the thread (In-Reply-To, References). A
   * refusal updates the mailbox's health on its own connection (so it outlives a rolled-back
   * caller) and throws: 409 mail_not_connected for a refused login, else 502 send_failed.
   */
  async transmit(p: PreparedSend, mail: ThreadMail, opts: { stableKey?: string; id?: string } = {}): Promise<SentMail> {
    const id = opts.id ?? newId('msg');
    // With a stable key (a draft's id, a send-manual's idempotency key), a send repeated after a
    // crash between the server's acceptance and our commit carries the same Message-ID, which
    // Gmail keeps as one message (docs/drafts.md, docs/sdr-desk.md).
    const messageIdHeader = opts.stableKey ? messageIdFor(p.box.email, opts.stableKey) : messageIdFor(p.box.email, `${id}.${randomBytes(6).toString('hex')}`);
    const outcome = await this.deps.mailer.send(this.deps.crypto.decrypt(p.box.smtp_url_enc), {
      from: { name: p.box.name, address: p.box.email },
      to: p.thread.contact_email,
      cc: mail.cc.length ? mail.cc : undefined,
      subject: mail.subject.replace(/[\r\n]+/g, ' '),
      text: mail.bodyText,
      html: mail.bodyHtml,
      messageId: messageIdHeader,
      inReplyTo: p.references[p.references.length - 1],
      references: p.references.length ? p.references : undefined,
    });
    if (outcome.kind !== 'accepted') {
      // The attempt says how the mailbox is: refused login -> needs_reauth; 421/454 -> rate_limited.
      const health = outcome.kind === 'auth_failed' ? 'needs_reauth' : 'code' in outcome && (outcome.code === 421 || outcome.code === 454) ? 'rate_limited' : null;
      if (health)
        await sql(this.deps.orm.em.fork(), `update sdr_mailboxes set health_state = ?, last_sync_error = ?, updated_at = ? where sdr_id = ?`, [
          health,
          storableText(outcome.response),
          this.deps.clock.now(),
          p.box.sdr_id,
        ]);
      if (outcome.kind === 'auth_failed') throw new ApiError(409, 'mail_not_connected', `the SDR's mailbox refused the login: ${outcome.response}`);
      throw new ApiError(502, 'send_failed', `the SDR's SMTP server did not accept the message: ${outcome.response}`);
    }
    return { id, messageIdHeader, response: outcome.response };
  }

  /** Records a sent reply on the thread (and as an outbound message of its campaign), makes the thread awaiting_reply, completes its follow-up. */
  async record(tx: EntityManager, p: PreparedSend, mail: ThreadMail, sent: SentMail): Promise<{ messageId: string; threadId: string; status: string }> {
    const now = this.deps.clock.now();
    const { thread, references } = p;
    const inCampaign = !!(thread.campaign_id && thread.lead_id);
    if (inCampaign)
      await sql(
        tx,
        `insert into outbound_messages (id, workspace_id, campaign_id, lead_id, step_index, kind, state, due_at, to_email, subject, message_id_header,
                                        in_reply_to, references_header, smtp_response, sent_at, created_at, updated_at)
         values (?, ?, ?, ?, 0, 'sdr_reply', 'sent', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [sent.id, thread.workspace_id, thread.campaign_id, thread.lead_id, now, thread.contact_email, mail.subject, sent.messageIdHeader, references[references.length - 1] ?? null, references.join(' ') || null, sent.response, now, now, now],
      );
    await sql(
      tx,
      `insert into thread_messages (id, thread_id, direction, outbound_message_id, message_id_header, from_email, to_emails, cc_emails, subject, body_text, body_html, at, created_at)
       values (?, ?, 'outbound', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [newId('tmsg'), thread.id, inCampaign ? sent.id : null, sent.messageIdHeader, p.box.email, [thread.contact_email], mail.cc, mail.subject, mail.bodyText, mail.bodyHtml, now, now],
    );
    const [t] = await sql<{ status: string }>(
      tx,
      `update prospect_threads set status = case when status = any(?::text[]) then 'awaiting_reply' else status end, last_message_at = ?, updated_at = ?
        where id = ? returning status`,
      [OPEN, now, now, thread.id],
    );
    await new FollowupService(this.deps, tx).onSend(thread.id);
    return { messageId: sent.id, threadId: thread.id, status: t.status };
  }

  /**
   * An answer in the SDR's mailbox: the thread whose messages it references (else the SDR's
   * latest thread with that contact) gets it; a human answer makes it `replied` and cancels
   * the pending follow-up, an out-of-office answer with a return date moves the follow-up past it.
   * Returns false when it belongs to no thread of this SDR.
   */
  async prospectAnswer(tx: EntityManager, sdrId: string, a: InboundAnalysis, inboundId: string, receivedAt: Date): Promise<boolean> {
    // A person's answer only: a bounce, a complaint or unclassified automatic mail never joins a thread.
    if (a.kind !== 'reply') return false;
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
