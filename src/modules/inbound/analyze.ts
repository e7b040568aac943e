import { storableOrNull, storableText } from '../../shared/text.ts';
import { simpleParser, type ParsedMail } from 'mailparser';
import { convert } from 'html-to-text';
import type { ComplaintInfo } from './arf.ts';
import { detectBounce, isMailSystem, type BounceCandidate, type BounceInfo } from './bounces.ts';
import { HybridClassifier, isUnsubscribeRequest, type Classification, type ReplyClassifier } from './classifier.ts';
import type { ReplyModel } from './model.ts';
import replyModel from './reply-model.json' with { type: 'json' };
import { extractReturnDate } from './classifier-dates.ts';
import { OOO_BODY, OOO_SUBJECT } from './lexicon.ts';
import { snippetOf, stripReply } from './strip.ts';

export type { Classification, ReplyClassifier } from './classifier.ts';

// One inbound mail in, one verdict out: the pure half of inbound processing (no database).
// The IMAP watcher and `mailgate classify` both call analyzeMessage.

export interface InboundAnalysis {
  /**
   * ignored: delayed-delivery DSNs, success DSNs, read receipts, not-spam feedback reports.
   * complaint: an RFC 5965 feedback-loop report (classification `unsubscribe`).
   * unclassified: automatic mail (a mail system's, null sender, Auto-Submitted, multipart/report)
   * that is neither a recognized report nor an out-of-office answer: never a human reply.
   */
  kind: 'bounce' | 'reply' | 'ignored' | 'complaint' | 'unclassified';
  /** This mail's Message-ID, with angle brackets as in the header. */
  messageId: string | null;
  inReplyTo: string | null;
  references: string[];
  /** Lower-cased sender address. */
  from: string | null;
  fromName: string | null;
  subject: string;
  date: Date | null;
  /** 'bounce' when kind is 'bounce'; 'out_of_office' (automatic, no effect) when 'ignored'. */
  classification: Classification;
  decidedBy: string;
  confidence: number;
  /** A reply without quoted history and signature; a bounce's reason; why mail is ignored. */
  strippedText: string;
  /** The first 200 characters of strippedText, whitespace collapsed. */
  snippet: string;
  oooReturnDate: Date | null;
  bounce: BounceInfo | null;
  complaint: ComplaintInfo | null;
}

export interface AnalyzeOptions {
  /** Defaults to the rules with the shipped model (HybridClassifier). */
  classifier?: ReplyClassifier;
  /** Reference for return dates without a year when the mail has no Date header (or one that does not parse). */
  now?: Date;
}

const DEFAULT_CLASSIFIER = new HybridClassifier(replyModel as unknown as ReplyModel);

const PART_TYPES = new Set([
  'message/delivery-status',
  'message/global-delivery-status',
  'message/rfc822',
  'message/global',
  'text/rfc822-headers',
  'message/rfc822-headers',
  'message/global-headers',
  'message/feedback-report',
]);

/**
 * Parses and classifies one message. Every text of the result is storable (shared/text.ts): a
 * NUL (a quoted-printable =00, a raw byte) is dropped and a lone surrogate (a broken UTF-16
 * part) becomes U+FFFD, so what a sender wrote can never make the message's transaction fail.
 */
export async function analyzeMessage(raw: Buffer | string, options: AnalyzeOptions = {}): Promise<InboundAnalysis> {
  return storableAnalysis(await analyze(raw, options));
}

function storableAnalysis(a: InboundAnalysis): InboundAnalysis {
  return {
    ...a,
    messageId: storableOrNull(a.messageId),
    inReplyTo: storableOrNull(a.inReplyTo),
    references: a.references.map(storableText),
    from: storableOrNull(a.from),
    fromName: storableOrNull(a.fromName),
    subject: storableText(a.subject),
    decidedBy: storableText(a.decidedBy),
    strippedText: storableText(a.strippedText),
    snippet: storableText(a.snippet),
    bounce: a.bounce && {
      ...a.bounce,
      status: storableOrNull(a.bounce.status),
      reason: storableText(a.bounce.reason),
      originalMessageId: storableOrNull(a.bounce.originalMessageId),
      // Sent to PostgreSQL as a text[] to find the original: one NUL failed the whole message,
      // and the report was skipped (no bounce, no suppression).
      originalMessageIds: a.bounce.originalMessageIds.map(storableText),
      recipient: storableOrNull(a.bounce.recipient),
    },
    complaint: a.complaint && {
      ...a.complaint,
      feedbackType: storableText(a.complaint.feedbackType),
      userAgent: storableOrNull(a.complaint.userAgent),
      originalMessageId: storableOrNull(a.complaint.originalMessageId),
      originalMessageIds: a.complaint.originalMessageIds.map(storableText),
      recipient: storableOrNull(a.complaint.recipient),
    },
  };
}

async function analyze(raw: Buffer | string, options: AnalyzeOptions): Promise<InboundAnalysis> {
  const mail = await simpleParser(raw, {
    // Keep message/delivery-status as a part of its own instead of text appended to the body.
    keepDeliveryStatus: true,
    // We convert HTML-only mail ourselves (no wrapping, links without their URLs).
    skipHtmlToText: true,
    skipImageLinks: true,
    skipTextLinks: true,
    skipTextToHtml: true,
  });
  const header = rawHeaders(mail);
  const text = bodyText(mail);
  const base = {
    messageId: angleId(mail.messageId ?? null),
    inReplyTo: angleIds(mail.inReplyTo ?? null)[0] ?? null,
    // In-Reply-To may name several messages (RFC 5322 3.6.4): the first is the one answered,
    // the others join the references, before it in the match's order.
    references: [...new Set([...angleIds(mail.references ?? null), ...angleIds(mail.inReplyTo ?? null).slice(1)])],
    from: mail.from?.value[0]?.address?.toLowerCase() || null,
    fromName: mail.from?.value[0]?.name || null,
    subject: mail.subject ?? '',
    date: headerDate(header('date')),
  };

  const contentType = mail.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  const candidate: BounceCandidate = {
    fromAddress: base.from,
    fromName: base.fromName,
    subject: base.subject,
    reportType: contentType?.value?.toLowerCase() === 'multipart/report' ? (contentType.params?.['report-type']?.toLowerCase() ?? null) : null,
    nullSender: /^\s*<\s*>\s*$/.test(header('return-path') ?? ''),
    header,
    text,
    parts: mail.attachments
      .filter((a) => PART_TYPES.has(a.contentType.toLowerCase()))
      .map((a) => ({ contentType: a.contentType.toLowerCase(), content: a.content.toString('utf8') })),
    inReplyTo: base.inReplyTo,
  };
  const verdict = detectBounce(candidate);
  if (verdict?.kind === 'bounce') {
    const { bounce } = verdict;
    return { ...base, kind: 'bounce', classification: 'bounce', decidedBy: verdict.decidedBy, confidence: verdict.confidence, strippedText: bounce.reason, snippet: snippetOf(bounce.reason), oooReturnDate: null, bounce, complaint: null };
  }
  if (verdict?.kind === 'complaint') {
    const why = `spam complaint (${verdict.complaint.feedbackType}${verdict.complaint.userAgent ? `, ${verdict.complaint.userAgent}` : ''})`;
    return { ...base, kind: 'complaint', classification: 'unsubscribe', decidedBy: verdict.decidedBy, confidence: verdict.confidence, strippedText: why, snippet: snippetOf(why), oooReturnDate: null, bounce: null, complaint: verdict.complaint };
  }
  if (verdict?.kind === 'ignored') {
    return { ...base, kind: 'ignored', classification: 'out_of_office', decidedBy: verdict.decidedBy, confidence: verdict.confidence, strippedText: verdict.reason, snippet: snippetOf(verdict.reason), oooReturnDate: null, bounce: null, complaint: null };
  }

  const strippedText = stripReply(text);
  const classifier = options.classifier ?? DEFAULT_CLASSIFIER;
  const result = await classifier.classify({ subject: base.subject, text: strippedText, headers: mail.headers });
  // Safety (contract §5): what a mail system sends, or a report, is never a person's answer; mail
  // with a null sender or Auto-Submitted may be an out-of-office answer, or an unsubscribe
  // request by its form (a mail client sending our List-Unsubscribe mailto marks it so), never
  // another human reply. What is left is recorded as unclassified and reaches no one's queue.
  const guard = automaticMail(candidate, contentType?.value?.toLowerCase() ?? '');
  const automaticMayBe =
    result.classification === 'out_of_office' || (result.classification === 'unsubscribe' && isUnsubscribeRequest({ subject: base.subject, text: strippedText }));
  if (guard && (guard.strict || !automaticMayBe)) {
    const why = `automatic mail (${guard.rule.replace('guard:', '')}) that is neither a recognized report nor an out-of-office answer`;
    return { ...base, kind: 'unclassified', classification: 'out_of_office', decidedBy: `${guard.rule};${result.decidedBy}`, confidence: 0.9, strippedText, snippet: snippetOf(strippedText), oooReturnDate: null, bounce: null, complaint: null };
  }
  let oooReturnDate: Date | null = null;
  if (result.classification === 'out_of_office') {
    const reference = base.date ?? options.now ?? null;
    const monthFirst = writtenInEnglish(`${base.subject}\n${strippedText}`);
    oooReturnDate = extractReturnDate(strippedText, reference, monthFirst) ?? extractReturnDate(text, reference, monthFirst);
  }
  return { ...base, kind: 'reply', ...result, strippedText, snippet: snippetOf(strippedText), oooReturnDate, bounce: null, complaint: null };
}

/** Why mail is automatic, if it is; strict: not even an out-of-office answer. */
function automaticMail(c: BounceCandidate, contentType: string): { rule: string; strict: boolean } | null {
  if (isMailSystem(c)) return { rule: 'guard:mailer-daemon', strict: true };
  if (contentType === 'multipart/report') return { rule: 'guard:multipart-report', strict: true };
  if (c.nullSender) return { rule: 'guard:null-sender', strict: false };
  const auto = c.header('auto-submitted');
  if (auto && !/^\s*no\b/i.test(auto)) return { rule: 'guard:auto-submitted', strict: false };
  return null;
}

/** The text a person reads: the text/plain part, else the HTML part converted (assignment's forward quotes it too). */
export function bodyText(mail: ParsedMail): string {
  if (typeof mail.text === 'string' && mail.text.trim() !== '') return mail.text;
  if (typeof mail.html === 'string' && mail.html.trim() !== '') return htmlToText(mail.html);
  return '';
}

/**
 * How much of an HTML-only mail is converted to text, and how deep: a reply's words come first,
 * and the classifier reads only its first 20,000 characters. Unbounded, a 2 MB table took 14 s
 * (html-to-text's table layout) and 3,000 nested blocks overflowed the stack, losing the reply.
 */
const HTML_TEXT_CHARS = 200_000;
const HTML_TEXT_DEPTH = 100;

export function htmlToText(html: string): string {
  return convert(html.length > HTML_TEXT_CHARS ? html.slice(0, HTML_TEXT_CHARS) : html, {
    wordwrap: false,
    limits: { maxDepth: HTML_TEXT_DEPTH },
    selectors: [
      { selector: 'img', format: 'skip' },
      { selector: 'style', format: 'skip' },
      { selector: 'a', options: { ignoreHref: true } },
      ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((h) => ({ selector: h, options: { uppercase: false } })),
      { selector: 'table', format: 'dataTable' },
    ],
  });
}

/**
 * The Date header's instant, or null without one or when it does not parse ("... CET", German
 * day names): mailparser gives the time of parsing then, which dated a return day by the
 * machine's clock instead of the mail's arrival (the reference the inbound path gives).
 */
function headerDate(value: string | null): Date | null {
  if (value === null) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** Raw header access: lower-cased name to the first unfolded value. */
function rawHeaders(mail: ParsedMail): (name: string) => string | null {
  const map = new Map<string, string>();
  for (const { key, line } of mail.headerLines) {
    if (map.has(key)) continue;
    const colon = line.indexOf(':');
    map.set(key, line.slice(colon + 1).replace(/\r?\n[ \t]+/g, ' ').trim());
  }
  return (name) => map.get(name.toLowerCase()) ?? null;
}

/**
 * A Message-ID longer than a header line may be (998 bytes, RFC 5322 2.1.1) is no id of any
 * mail client's: left out, as an absent one is. Kept, it was stored into a btree index that
 * refuses keys over 2,704 bytes, and the refused insert stopped its mailbox's cursor.
 */
const MAX_ID_BYTES = 998;

function angleIds(value: string | string[] | null): string[] {
  if (!value) return [];
  // Comments go first: "foo@bar (sent from a phone)" arrives from mailparser wrapped whole,
  // "<foo@bar (sent from a phone)>", and became "<<foo@bar>", which matched nothing.
  const all = (Array.isArray(value) ? value.join(' ') : value).replace(/\([^()]*\)/g, ' ');
  const ids =
    all.match(/<[^<>\s]+>/g) ??
    all
      .split(/\s+/)
      .map((s) => s.replace(/^<+|>+$/g, ''))
      .filter((s) => s.includes('@'))
      .map((s) => `<${s}>`);
  return ids.filter((id) => Buffer.byteLength(id) <= MAX_ID_BYTES);
}

function angleId(value: string | null): string | null {
  return angleIds(value)[0] ?? null;
}

function writtenInEnglish(text: string): boolean {
  const langs = [...OOO_BODY, ...OOO_SUBJECT].filter((c) => c.re.test(text)).map((c) => c.lang);
  if (langs.length === 0) return true;
  const en = langs.filter((l) => l === 'en').length;
  return en * 2 >= langs.length;
}
