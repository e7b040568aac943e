import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../adapters/ids.ts';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import { recordEvent } from '../events/outbox.ts';
import { messageBounced, replyReceived, type MessageFacts } from '../events/catalogue.ts';
import { suppress } from '../suppression/repository.ts';
import { isSenderAddress, senderOfDomain } from '../senders/repository.ts';
import { bumpCounters } from '../messages/counters.ts';
import { endEnrollments, enrollmentsOfLead, lockEnrollment, noteEnrollmentEvent, postponeNextStep } from '../messages/enrollments.ts';
import { bounceDelivered, lockMessage, recordAnsweredCopy } from '../messages/transitions.ts';
import { loadForHeaders } from '../messages/send.ts';
import { headersOf } from '../sending/compose.ts';
import { matchByMessageIds, matchBySender, type MatchedMessage } from '../messages/lookups.ts';
import { oooResumeAt } from '../sending/postpone.ts';
import { campaignExists } from '../campaigns/repository.ts';
import { analyzeMessage, type InboundAnalysis } from './analyze.ts';
import { advanceCursor } from '../mailboxes/repository.ts';
import { alreadyIngested, dropInbound, ingestedElsewhere, hasCountedReply, HUMAN_CLASSIFICATIONS, insertReply, listReplies, storeInbound, type ReplyQuery } from './repository.ts';

export interface IncomingMail {
  watchId: string;
  workspaceId: string;
  senderAccountId: string | null;
  /** Set for an SDR's mailbox: its mail joins prospect threads instead of campaigns. */
  sdrId?: string | null;
  owner: string;
  uidValidity: bigint;
  uid: number;
  raw: Buffer;
  receivedAt: Date;
  /** The message is larger than `raw`: only its first MAILGATE_INBOUND_MAX_BYTES were read. */
  truncated?: boolean;
}

export type IngestResult = 'reply' | 'bounce' | 'complaint' | 'unclassified' | 'unmatched' | 'ignored' | 'duplicate' | 'lost_lease';

/** Classifications that count as a human reply (`replied`, contract §4). */
const HUMAN = new Set(HUMAN_CLASSIFICATIONS);

/**
 * What becomes of a person's answer in an SDR's mailbox: it joins one of the SDR's prospect
 * threads (sdrs/desk-mail.ts implements it; services.ts wires it in), in the ingesting
 * transaction. False when it belongs to no thread of this SDR.
 */
export interface ProspectAnswers {
  prospectAnswer(tx: EntityManager, sdrId: string, analysis: InboundAnalysis, inboundId: string, receivedAt: Date): Promise<boolean>;
}

/**
 * One inbound message: parse and classify it, match it to the campaign message it answers,
 * and apply its effects, in one transaction with the mailbox cursor, so a restart neither
 * misses nor double-counts it.
 */
export class InboundService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    private readonly prospects: ProspectAnswers,
  ) {}

  /** Moves the cursor past a message without looking at it (mail older than the watch). */
  async skip(watchId: string, owner: string, uidValidity: bigint, uid: number): Promise<IngestResult> {
    return (await advanceCursor(this.em, watchId, owner, uidValidity, uid)) ? 'ignored' : 'lost_lease';
  }

  async ingest(mail: IncomingMail): Promise<IngestResult> {
    let analysis: InboundAnalysis;
    try {
      // The mail's arrival dates a return day without a year when it has no Date header (it was
      // no return date at all: 7 days' postponement, the desk's follow-up left due).
      analysis = await analyzeMessage(mail.raw, { now: mail.receivedAt });
      // A large message whose words lie past what was read (an attachment first): no text to
      // classify, so no answer of anyone's; kept unclassified rather than called interested.
      if (mail.truncated && analysis.kind === 'reply' && analysis.strippedText.trim() === '') {
        this.deps.log.warn({ watchId: mail.watchId, uid: mail.uid, from: analysis.from }, 'a large inbound message has no text within MAILGATE_INBOUND_MAX_BYTES: left unclassified');
        analysis = { ...analysis, kind: 'unclassified', decidedBy: 'truncated:no-text' };
      }
    } catch (err) {
      // Mail we cannot parse is left alone (logged), like unmatched mail: the cursor moves on.
      this.deps.log.warn({ err, watchId: mail.watchId, uid: mail.uid }, 'could not parse an inbound message');
      this.deps.metrics.inboundSkipped.inc({ reason: 'unparseable' });
      return (await advanceCursor(this.em, mail.watchId, mail.owner, mail.uidValidity, mail.uid)) ? 'ignored' : 'lost_lease';
    }
    let copyRecorded: { messageId: string; campaignId: string; enrollmentId: string; was: string } | undefined;
    const result = await this.em.transactional(async (tx): Promise<IngestResult> => {
      copyRecorded = undefined;
      if (!(await advanceCursor(tx, mail.watchId, mail.owner, mail.uidValidity, mail.uid))) return 'lost_lease';
      if (analysis.kind === 'ignored') return 'ignored';
      if (await alreadyIngested(tx, mail.watchId, { messageId: analysis.messageId, from: analysis.from, receivedAt: mail.receivedAt, raw: mail.raw })) return 'duplicate';
      if (mail.sdrId) return this.ingestForSdr(tx, mail, analysis);
      // A copy of a message we sent (a Bcc to the sender itself, a list's reflection, a rule
      // copying sent mail to the inbox) is never the lead's answer.
      if (analysis.messageId && (await matchByMessageIds(tx, this.deps.crypto, mail.workspaceId, [analysis.messageId]))) return 'ignored';
      const match = await this.match(tx, mail, analysis);
      if (!match) return 'unmatched';
      // Mail the account's own user wrote in the lead's thread (a manual follow-up copied into
      // the inbox by a Cc or Bcc to self, an Outlook rule, a CRM's logging Bcc) carries the
      // thread's references but is no answer of the lead's; unless the lead is that address.
      if (
        (analysis.kind === 'reply' || analysis.kind === 'unclassified') &&
        analysis.from &&
        analysis.from !== match.to_email.toLowerCase() &&
        (await isSenderAddress(tx, mail.workspaceId, analysis.from))
      )
        return 'ignored';
      if (analysis.messageId && (await ingestedElsewhere(tx, mail.watchId, match.id, { messageId: analysis.messageId, from: analysis.from }))) return 'duplicate';
      if (analysis.kind === 'unclassified') this.deps.log.info({ watchId: mail.watchId, uid: mail.uid, from: analysis.from, decidedBy: analysis.decidedBy }, 'automatic inbound mail left unclassified');
      if (match.named && (match.state === 'queued' || match.state === 'scheduled' || match.state === 'sending')) {
        const was = match.state;
        if (await this.recordCopy(tx, match, mail.receivedAt, mail.senderAccountId)) copyRecorded = { messageId: match.id, campaignId: match.campaign_id, enrollmentId: match.enrollment_id, was };
      }
      const inboundId = await this.store(tx, mail, analysis, match.id, analysis.kind);
      if (analysis.kind === 'bounce') await this.bounce(tx, match, analysis, inboundId, mail.receivedAt);
      else if (analysis.kind === 'complaint') await this.complaint(tx, match, analysis, inboundId, mail.receivedAt);
      else if (analysis.kind === 'reply') await this.reply(tx, match, analysis, inboundId, mail.receivedAt);
      return analysis.kind;
    });
    // Logged once committed, as the counts below.
    if (copyRecorded) this.deps.log.warn(copyRecorded, 'mail named a copy whose outcome was never recorded: recorded as sent');
    // Counted once committed (the classification of a campaign reply, a DSN's bounce type).
    if (result === 'reply') {
      this.deps.metrics.replies.inc({ classification: analysis.classification });
      if (analysis.classification === 'unsubscribe') this.deps.metrics.unsubscribes.inc({ source: 'reply' });
    } else if (result === 'bounce' && analysis.bounce) this.deps.metrics.bounces.inc({ type: analysis.bounce.type });
    return result;
  }

  private async ingestForSdr(tx: EntityManager, mail: IncomingMail, a: InboundAnalysis): Promise<IngestResult> {
    // Only a person's answer joins a prospect thread: bounces, complaints and unclassified
    // automatic mail never reach an SDR's inbox.
    if (a.kind !== 'reply') return a.kind === 'unclassified' ? 'unclassified' : 'ignored';
    // Stored first (thread_messages points at it); rolled back with everything if unmatched.
    const inboundId = await this.store(tx, mail, a, null, 'thread_reply');
    if (await this.prospects.prospectAnswer(tx, mail.sdrId!, a, inboundId, mail.receivedAt)) return 'reply';
    await dropInbound(tx, inboundId);
    return 'unmatched';
  }

  /** The raw message, stored (so a classification can be re-run); returns its id. */
  private async store(tx: EntityManager, mail: IncomingMail, analysis: InboundAnalysis, outboundMessageId: string | null, kind: string): Promise<string> {
    const id = newId('inb');
    await storeInbound(tx, {
      id,
      workspaceId: mail.workspaceId,
      watchId: mail.watchId,
      uidValidity: mail.uidValidity,
      uid: mail.uid,
      analysis,
      receivedAt: mail.receivedAt,
      raw: mail.raw,
      outboundMessageId,
      kind,
      now: this.deps.clock.now(),
    });
    return id;
  }

  private async match(tx: EntityManager, mail: IncomingMail, a: InboundAnalysis): Promise<MatchedMessage | undefined> {
    const report = a.bounce ?? a.complaint;
    if (report) {
      // Every Message-ID the report names (matchByMessageIds keeps the last it finds: reversed so
      // the most reliable route wins), else the failed recipient among this account's messages.
      const original = await matchByMessageIds(tx, this.deps.crypto, mail.workspaceId, [...report.originalMessageIds].reverse());
      if (original) return original;
      if (report.recipient && mail.senderAccountId) return matchBySender(tx, mail.senderAccountId, report.recipient, mail.receivedAt);
      return undefined;
    }
    const chain = [...a.references, ...(a.inReplyTo ? [a.inReplyTo] : [])];
    const byThread = await matchByMessageIds(tx, this.deps.crypto, mail.workspaceId, chain);
    if (byThread) return byThread;
    if (a.from && mail.senderAccountId) return matchBySender(tx, mail.senderAccountId, a.from, mail.receivedAt);
    return undefined;
  }

  /**
   * Mail naming a copy of ours whose outcome was never recorded (its worker was killed after
   * the server accepted it): that copy was sent, and is recorded so before the mail's effects
   * (messages/transitions.ts recordAnsweredCopy), which then apply as to any sent message: a
   * reply ends the sequence instead of cancelling the message, an out-of-office postpones the
   * next step instead of the copy itself, a bounce report bounces it.
   *
   * Locks in the order of the writers it meets. A waiting copy (queued, scheduled) after its
   * enrollment, as the writers that end an enrollment take them (an unsubscribe holds the
   * lead's enrollments and then cancels their waiting messages). A copy being sent again before
   * it, as the workers' outcome writers take them (markSent, bounce, notSent: the message, then
   * its enrollment); the enrollment first, a re-send's outcome written meanwhile held the
   * message and waited for the enrollment while this waited for the message, and PostgreSQL
   * aborted the mail's ingestion after a second (a crash probe). A writer that ends an
   * enrollment never waits for a message being sent (it cancels only waiting ones).
   */
  private async recordCopy(tx: EntityManager, m: MatchedMessage, receivedAt: Date, mailboxAccountId: string | null): Promise<boolean> {
    if (m.state === 'sending') await lockMessage(tx, m.id);
    await lockEnrollment(tx, m.enrollment_id);
    const row = await loadForHeaders(tx, m.id);
    if (!row) return false;
    // The account that sent the copy: the one whose mailbox the mail came to (an answer goes to
    // the copy's From, a bounce report to its envelope sender), when its domain is the one in
    // the Message-ID the mail named. Not the claim's: a queued message has none (the killed
    // worker's claim was cleared) and a re-send's may be another account's.
    const sentBy = mailboxAccountId ? await senderOfDomain(tx, mailboxAccountId, m.named!.slice(m.named!.lastIndexOf('@') + 1, -1)) : null;
    const h = headersOf(row, this.deps);
    const now = this.deps.clock.now();
    const copy = {
      id: m.id,
      at: receivedAt < now ? receivedAt : now,
      response: 'not recorded: the worker sending it stopped before its outcome; mail naming it shows it went out',
      messageIdHeader: m.named!,
      subject: h.subject,
      inReplyTo: h.inReplyTo,
      references: h.references.length ? h.references.join(' ') : null,
      nextId: newId('msg'),
      eventId: newId('evt'),
    };
    if (!(await recordAnsweredCopy(tx, copy, now, sentBy))) return false;
    // The effects below read the match as recorded now: a bounce report's message.bounced (and
    // a complaint's log line) name the copy's header, null in the match (none was stored yet).
    m.state = 'sent';
    m.message_id_header = copy.messageIdHeader;
    return true;
  }

  /** A DSN for a message our server had accepted: the message bounces after all. */
  private async bounce(tx: EntityManager, m: MatchedMessage, a: InboundAnalysis, inboundId: string, receivedAt: Date): Promise<void> {
    const now = this.deps.clock.now();
    const b = a.bounce!;
    // A hard bounce's suppression under the enrollment's lock, before the counters (messages/transitions.ts BeforeEnding).
    const suppressHard = b.type === 'hard' ? (em: EntityManager) => suppress(em, m.workspace_id, [m.to_email], 'hard_bounce', m.id, now) : undefined;
    if (await bounceDelivered(tx, { id: m.id, campaignId: m.campaign_id, enrollmentId: m.enrollment_id }, b.type, b.reason, receivedAt, now, suppressHard)) {
      await recordEvent(tx, m.workspace_id, messageBounced(factsOf(m), { type: b.type, reason: b.reason, at: receivedAt }), now);
    }
    // Bounces are listed with the replies either way.
    await this.insertReply(tx, m, a, inboundId, receivedAt, { bounceType: b.type, bounceReason: b.reason });
  }

  /**
   * A feedback-loop complaint (RFC 5965) about one of our messages: the address is suppressed
   * (`complaint`), every enrollment of the lead ends (`unsubscribed`), the campaign counts it in
   * `complained`, and it is listed with the replies as `unsubscribe`. It is not a reply: it does
   * not count in `replied`. Logged at warn: complaints are what gets a sending domain blocked.
   */
  private async complaint(tx: EntityManager, m: MatchedMessage, a: InboundAnalysis, inboundId: string, receivedAt: Date): Promise<void> {
    const now = this.deps.clock.now();
    // The lead's enrollments first, then the suppression (the other writers' order).
    const enrollments = await enrollmentsOfLead(tx, m.lead_id);
    const replyId = await this.insertReply(tx, m, a, inboundId, receivedAt, {});
    await suppress(tx, m.workspace_id, [m.to_email], 'complaint', replyId, now);
    await endEnrollments(tx, enrollments, 'unsubscribed', 'complained', now);
    await bumpCounters(tx, m.campaign_id, { complained: 1 });
    this.deps.log.warn(
      { campaignId: m.campaign_id, leadId: m.lead_id, email: m.to_email, messageId: m.message_id_header, feedbackType: a.complaint?.feedbackType, userAgent: a.complaint?.userAgent },
      'feedback-loop spam complaint: address suppressed',
    );
  }

  private async reply(tx: EntityManager, m: MatchedMessage, a: InboundAnalysis, inboundId: string, receivedAt: Date): Promise<void> {
    const now = this.deps.clock.now();
    // Two replies of the lead in this campaign (through two sender accounts' mailboxes, ingested
    // side by side) would both find no earlier one and both count: the enrollment is locked first.
    await lockEnrollment(tx, m.enrollment_id);
    const firstHuman = HUMAN.has(a.classification) && !(await hasCountedReply(tx, m.campaign_id, m.lead_id));
    const replyId = await this.insertReply(tx, m, a, inboundId, receivedAt, {});
    if (a.classification === 'unsubscribe') {
      await suppress(tx, m.workspace_id, [m.to_email], 'reply_unsubscribe', replyId, now);
      await endEnrollments(tx, [m.enrollment_id], 'unsubscribed', 'unsubscribed', now);
    } else if (a.classification !== 'out_of_office') {
      await endEnrollments(tx, [m.enrollment_id], 'replied', 'replied', now);
    } else {
      await noteEnrollmentEvent(tx, m.enrollment_id, 'out_of_office', now);
      // The sequence goes on, but not while the lead is away (contract §5).
      const resumeAt = await oooResumeAt(tx, m.campaign_id, a.oooReturnDate, now, this.deps.config.oooDefaultDelay);
      const moved = await postponeNextStep(tx, m.enrollment_id, resumeAt, now);
      if (moved) this.deps.log.info({ enrollmentId: m.enrollment_id, messageId: moved.messageId, from: moved.from, to: moved.to, returnDate: a.oooReturnDate }, 'out-of-office: next step postponed');
    }
    // The counters last, after the enrollment and its messages: promoteDue holds messages while
    // it waits for the counters, so the other order could deadlock with it.
    if (firstHuman) await bumpCounters(tx, m.campaign_id, { replied: 1 });
  }

  private async insertReply(
    tx: EntityManager,
    m: MatchedMessage,
    a: InboundAnalysis,
    inboundId: string,
    receivedAt: Date,
    bounce: { bounceType?: string; bounceReason?: string },
  ): Promise<string> {
    const id = newId('rpl');
    const now = this.deps.clock.now();
    await insertReply(tx, {
      id,
      workspaceId: m.workspace_id,
      campaignId: m.campaign_id,
      leadId: m.lead_id,
      enrollmentId: m.enrollment_id,
      outboundMessageId: m.id,
      inboundMessageId: inboundId,
      email: m.to_email,
      classification: a.classification,
      decidedBy: a.decidedBy,
      confidence: a.confidence,
      snippet: a.snippet,
      bounceType: bounce.bounceType ?? null,
      bounceReason: bounce.bounceReason ?? null,
      receivedAt,
      now,
    });
    await recordEvent(
      tx,
      m.workspace_id,
      replyReceived({ id, campaignId: m.campaign_id, email: m.to_email, classification: a.classification, snippet: a.snippet, receivedAt }),
      now,
    );
    return id;
  }

  /** GET /v1/replies: newest first, filtered, paged; the total for X-Total-Count. 404 for a campaign not of the workspace. */
  async list(workspaceId: string, q: ReplyQuery) {
    if (q.campaignId && !(await campaignExists(this.em, workspaceId, q.campaignId))) throw ApiError.notFound('campaign', `campaign ${q.campaignId} not found`);
    return listReplies(this.em, workspaceId, q);
  }
}

function factsOf(m: MatchedMessage): MessageFacts {
  return { id: m.id, campaignId: m.campaign_id, leadId: m.lead_id, toEmail: m.to_email, stepIndex: m.step_index, messageIdHeader: m.message_id_header };
}
