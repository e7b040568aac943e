import { storableText } from '../../shared/text.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { randomBytes } from 'node:crypto';
import { advisoryXactLock } from '../../db/admin.ts';
import { idFromDigest, newId } from '../../adapters/ids.ts';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import type { InboundAnalysis } from '../inbound/analyze.ts';
import { escapeHtml, replySubject } from '../sending/render.ts';
import { followupsOnAnswer, followupsOnSend } from './followups.ts';
import { endMailboxRateLimit, mailboxOf, setMailboxHealth, type DeskMailbox } from './repository.ts';
import { addAnswer, addSentMessage, lockThreadOfSdr, recordedSend, recordedSendOfKey, threadOfAnswer, threadOfSdr, threadReferences, type ThreadForSend } from './thread-repository.ts';
import { recordSdrReply } from '../messages/desk.ts';
import { suppressedAmong } from '../suppression/repository.ts';
import { inDeskSendSlot } from './desk-slots.ts';

/** A send checked and ready to go out through the SDR's mailbox (prepare). */
export interface DeskSend {
  thread: ThreadForSend;
  box: DeskMailbox;
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

/**
 * What other modules do when the SDR answers a thread by hand (wired in services.ts, so the desk
 * depends on none of them): the drafts module supersedes the thread's open drafts, which answer
 * a message that has been answered now. Run in the send's transaction, before it is recorded.
 */
export interface DeskReactions {
  manualReply(tx: EntityManager, threadId: string): Promise<unknown>;
}

/** The SDR's mailbox when a send may go out through it (`active`, `rate_limited`: prepare), else 409 mail_not_connected. */
function usableMailbox(box: DeskMailbox | undefined): DeskMailbox {
  if (!box || (box.health_state !== 'active' && box.health_state !== 'rate_limited')) throw new ApiError(409, 'mail_not_connected', `the SDR's mailbox is not usable (${box?.health_state ?? 'not connected'})`);
  return box;
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
    private readonly reactions?: DeskReactions,
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
    const keyed = idempotencyKey === undefined ? null : this.keyedSend(sdrId, threadId, idempotencyKey);
    // A repeat of a recorded send is answered from the thread before the mailbox is looked at:
    // the mailbox may have changed since (another address, so another domain in the Message-ID:
    // the repeat sent the mail again and its record collided with the first's id, a 500; or a
    // health that is no longer active: a 409 for a mail that went out).
    if (keyed) {
      const done = await recordedSendOfKey(this.em, { workspaceId, sdrId }, threadId, keyed.stableKey);
      if (done) return { data: { messageId: keyed.id, threadId, status: done.status } };
    }
    const prepared = await this.prepare(sdrId, workspaceId, threadId);
    const mail: ThreadMail = {
      subject: replySubject(prepared.thread.subject || ''),
      bodyText: input.bodyText,
      bodyHtml: input.bodyHtml ?? `<p>${escapeHtml(input.bodyText).replace(/\r?\n/g, '<br>')}</p>`,
      cc: input.cc ?? [],
    };
    // One transaction around the SMTP transaction (it sends mail, so it runs once): the thread's
    // open drafts and then the thread are locked before the mail goes out, a draft's send's
    // order. An admin's reassignment of the thread (sdrs/reassign.ts, the same locks) waits for
    // this send; a thread moved before it is 404 thread_not_found, and nothing goes out from this
    // SDR's mailbox (until 2026-11-30 a send without a key held no lock while the server answered).
    // In a desk send slot (desk-slots.ts): at most half the pool's connections wait on SMTP servers.
    return this.inSendSlot(() => this.em.transactional(async (tx) => {
      if (keyed) {
        // Locked and looked up by the key, not by the Message-ID, whose domain is the mailbox's.
        await advisoryXactLock(tx, keyed.stableKey);
        const done = await recordedSendOfKey(tx, { workspaceId, sdrId }, threadId, keyed.stableKey);
        if (done) return { data: { messageId: keyed.id, threadId, status: done.status } };
      }
      // The reactions first: the thread's open drafts superseded (rolled back with the rest when
      // the send fails). Until 2026-11-30 the drafts stayed open, and one of them could go out as
      // a second answer to the same message.
      await this.reactions?.manualReply(tx, threadId);
      const ready = await this.lockForSend(tx, sdrId, prepared);
      const sent = await this.transmit(ready, mail, keyed ?? {}, tx);
      return { data: await this.record(tx, ready, mail, sent) };
    }));
  }

  /**
   * Runs a desk send's transaction (held across its SMTP transaction) in one of the ORM pool's
   * desk send slots (desk-slots.ts): the sends beyond wait for one holding no connection, so a
   * slow SMTP server cannot take every connection of the API and the workers.
   */
  inSendSlot<T>(fn: () => Promise<T>): Promise<T> {
    return inDeskSendSlot(this.em, fn);
  }

  /**
   * Locks the thread for a send (after its open drafts: a send's lock order) and checks it is
   * still the SDR's; reads its References again under the lock (an answer may have joined it
   * since prepare). 404 thread_not_found when an admin moved it to another SDR meanwhile.
   */
  async lockForSend(tx: EntityManager, sdrId: string, p: DeskSend): Promise<DeskSend> {
    if (!(await lockThreadOfSdr(tx, sdrId, p.thread.workspace_id, p.thread.id))) throw ApiError.notFound('thread', `thread ${p.thread.id} not found`);
    // The mailbox as it is now: a send may have waited since prepare (for a desk send slot, for
    // the guardrails' LLM, for another send's locks) while the SDR disconnected the mailbox,
    // connected another or its login was refused; the mail goes out through the mailbox as it
    // is, or not at all.
    return { ...p, box: usableMailbox(await mailboxOf(tx, sdrId)), references: await threadReferences(tx, p.thread.id) };
  }

  /** The ids of a send-manual with an `Idempotency-Key`: its `msg_` id and the local part of its Message-ID. */
  private keyedSend(sdrId: string, threadId: string, idempotencyKey: string): { id: string; stableKey: string } {
    const digest = this.deps.crypto.digest('send-manual', `${sdrId}\u0000${threadId}\u0000${idempotencyKey}`);
    return { id: idFromDigest('msg', digest), stableKey: `sm_${digest.toString('hex', 16, 32)}` };
  }

  /**
   * The thread (404 thread_not_found outside the SDR's scope), the usable mailbox (else 409
   * mail_not_connected), the References chain. A `rate_limited` mailbox is usable: a limit
   * passes, and nothing else would end it while the watcher's IMAP session stays logged in
   * (its login is what sets the health), so the send is tried and the server says.
   */
  async prepare(sdrId: string, workspaceId: string, threadId: string): Promise<DeskSend> {
    const thread = await threadOfSdr(this.em, sdrId, workspaceId, threadId);
    if (!thread) throw ApiError.notFound('thread', `thread ${threadId} not found`);
    const box = usableMailbox(await mailboxOf(this.em, sdrId));
    return { thread, box, references: await threadReferences(this.em, threadId) };
  }

  /**
   * Sends through the SDR's SMTP server as a reply in the thread (In-Reply-To, References). A
   * refusal updates the mailbox's health on its own connection (so it outlives a rolled-back
   * caller) and throws: 409 mail_not_connected for a refused login, else 502 send_failed.
   */
  async transmit(p: DeskSend, mail: ThreadMail, opts: { stableKey?: string; id?: string } = {}, tx: EntityManager = this.em): Promise<SentMail> {
    // The workspace's suppression list holds for the desk too: an address that unsubscribed,
    // complained, hard-bounced or was put on it by an admin gets no mail from anyone of the
    // workspace (until 2026-11-29 an SDR's reply or draft went to it all the same).
    // In the send's transaction (`tx`): on another connection, a send holding its own would take
    // two of the pool's at once.
    const suppressed = await suppressedAmong(tx, p.thread.workspace_id, [p.thread.contact_email, ...mail.cc]);
    if (suppressed.length)
      throw new ApiError(
        409,
        'recipient_suppressed',
        `${suppressed.join(', ')} ${suppressed.length === 1 ? 'is' : 'are'} on the workspace's suppression list (an unsubscribe, a complaint, a hard bounce or an admin's entry): nothing was sent; an admin can take an address off the list`,
        { suppressed },
      );
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
        await setMailboxHealth(this.deps.orm.em.fork(), p.box.sdr_id, health, storableText(outcome.response), this.deps.clock.now());
      if (outcome.kind === 'auth_failed') throw new ApiError(409, 'mail_not_connected', `the SDR's mailbox refused the login: ${outcome.response}`);
      throw new ApiError(502, 'send_failed', `the SDR's SMTP server did not accept the message: ${outcome.response}`);
    }
    // Accepted: a limit the mailbox was under is over (on its own connection, as above).
    if (p.box.health_state === 'rate_limited') await endMailboxRateLimit(this.deps.orm.em.fork(), p.box.sdr_id, this.deps.clock.now());
    return { id, messageIdHeader, response: outcome.response };
  }

  /** Records a sent reply on the thread (and as an outbound message of its campaign), makes the thread awaiting_reply, completes its follow-up. */
  async record(tx: EntityManager, p: DeskSend, mail: ThreadMail, sent: SentMail): Promise<{ messageId: string; threadId: string; status: string }> {
    const now = this.deps.clock.now();
    const { thread, references } = p;
    const inCampaign = !!(thread.campaign_id && thread.lead_id);
    if (inCampaign)
      await recordSdrReply(
        tx,
        {
          id: sent.id,
          workspaceId: thread.workspace_id,
          campaignId: thread.campaign_id!,
          leadId: thread.lead_id!,
          to: thread.contact_email,
          subject: mail.subject,
          messageIdHeader: sent.messageIdHeader,
          inReplyTo: references[references.length - 1] ?? null,
          references: references.join(' ') || null,
          response: sent.response,
        },
        now,
      );
    const t = await addSentMessage(
      tx,
      thread.id,
      { outboundMessageId: inCampaign ? sent.id : null, messageIdHeader: sent.messageIdHeader, from: p.box.email, to: [thread.contact_email], cc: mail.cc, subject: mail.subject, bodyText: mail.bodyText, bodyHtml: mail.bodyHtml },
      now,
    );
    await followupsOnSend(tx, this.deps.clock, thread.id);
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
    // A copy of the SDR's own mail (a Cc or Bcc to self, a server filing sent mail in the inbox)
    // carries the thread's references too, but it is no prospect's answer (contract §8): by its
    // sender, or by the Message-ID of a send from the desk in that thread.
    const box = await mailboxOf(tx, sdrId);
    if (box && a.from && a.from.toLowerCase() === box.email.toLowerCase()) return false;
    const chain = [...a.references, ...(a.inReplyTo ? [a.inReplyTo] : [])];
    const threadId = await threadOfAnswer(tx, sdrId, chain, a.from, receivedAt);
    if (!threadId) return false;
    if (a.messageId && (await recordedSend(tx, threadId, a.messageId))) return false;
    const now = this.deps.clock.now();
    const ooo = a.classification === 'out_of_office';
    await addAnswer(tx, threadId, { inboundMessageId: inboundId, messageIdHeader: a.messageId, from: a.from ?? '', subject: a.subject, bodyText: a.strippedText, receivedAt, outOfOffice: ooo }, now);
    await followupsOnAnswer(tx, this.deps.clock, threadId, ooo ? { returnDate: a.oooReturnDate } : null);
    return true;
  }
}
