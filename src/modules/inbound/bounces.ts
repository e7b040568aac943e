import { detectComplaint } from './arf.ts';
import type { BounceCandidate, BounceInfo, BounceVerdict } from './reports.ts';

export type { BounceCandidate, BounceInfo, BounceVerdict };

// Bounce detection (contract §5): RFC 3464 delivery-status reports first, then the
// non-standard notices MTAs still send (Postfix without DSN, Exim, qmail, old Gmail, old
// Exchange, Yahoo). Pure functions over an already parsed message.
//
// Rules: the enhanced status code's class decides (5.x.x hard, 4.x.x soft); without one the
// SMTP reply code's (5xx / 4xx); without either the wording (a temporary condition such as a
// full mailbox is soft, any other failure hard). `Action: delayed` (and its non-DSN
// equivalents) is not a bounce: the MTA is still trying, so the notice is ignored, as are
// success DSNs, read receipts and feedback reports.

const DSN_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const ORIGINAL_TYPES = new Set(['message/rfc822', 'text/rfc822-headers', 'message/global', 'message/global-headers', 'message/rfc822-headers']);

export const SYSTEM_LOCAL_PART = /^(mailer-daemon|mailer_daemon|mailerdaemon|mail-daemon|postmaster|mdaemon|double-bounce|bounce|bounces|nobody|microsoftexchange[0-9a-f]{32})$/i;
const SYSTEM_NAME = /(mail delivery (subsystem|system|service)|mailer-daemon|mailer daemon|postmaster|mail administrator|microsoft outlook|microsoft exchange|system ?administrator|e-?mail-?system|courier mail server|mail router|email security service|proofpoint essentials)/i;

const FAILURE_SUBJECT =
  /^\s*(\[bounce\]|\*\*message you sent blocked|permanent delivery failure|delivery[ _]failure|mail failure|message frozen|failure notice|notice: mail delivery status|delivery status notification: error|undeliverable|mail system error|配信エラー|配信不能|メール配信エラー|недоставленное сообщение|échec de la remise|votre message n'a pas pu être délivré|non recapitabile|undelivered mail returned to sender|undeliverable|undelivered|delivery status notification \((failure|failed)\)|mail delivery failed|returned mail|failure notice|delivery failure|delivery failed|delivery has failed|mail delivery failure|message not delivered|mail system error|nicht zustellbar|unzustellbar|non remis|non distribuable|remise impossible|no se puede entregar|no entregado|não é possível entregar|não entregue|onbestelbaar|niet bezorgd)/i;
const DELAY_SUBJECT =
  /^\s*(delivery status notification \(delay\)|delayed mail|delivery delayed|message delayed|warning: could not send message|warning: message \S+ delayed|zustellung verzögert|übermittlung verzögert|remise différée|entrega retrasada|entrega atrasada|bezorging vertraagd)/i;
const FAILURE_TEXT =
  /(was not delivered to|undeliverable to the following|has not been delivered|has been frozen|is frozen|an error has occurred while attempting to deliver|an error occurred while trying to deliver|had permanent fatal (delivery )?errors|had delivery problems|permanent fatal errors|error code ?:|cannot be delivered|was blocked by|delivery to these recipients or groups failed|remise (a échoué|à ces destinataires)|zustellung an folgende empfänger|error en la entrega|no se pudo entregar a estos|falha na entrega|recapito non riuscito|bezorging is mislukt|配信に失敗|配信できませんでした|届きませんでした|не может быть доставлено|не удалось доставить|could not be delivered|couldn'?t be delivered|wasn'?t delivered|was not delivered|failed permanently|permanent (fatal )?errors?|delivery (has )?failed|not able to deliver|unable to deliver|wasn'?t able to deliver|did not reach|cannot be reached|could not be reached|following address(\(es\))? failed|returned to sender|no such user|user unknown|mailbox unavailable|recipient address rejected|does not exist|konnte nicht zugestellt werden|fehler bei der zustellung|n'a pas pu être remis|no se pudo entregar|não pôde ser entregue|kan niet worden bezorgd|kon niet worden bezorgd)/i;
const DELAY_TEXT =
  /(this is a warning only|delivery to the following recipients? (has been|is) delayed|has not yet been delivered|not been delivered yet|message not delivered yet|delivery incomplete|this is a warning message only|you do not need to resend|could not send message for past|will (continue to|keep) (try|retry)|will be retried|still being retried|no action is required on your part)/i;
const GAVE_UP_TEXT = /(i've given up|giving up on|failed permanently|permanent (fatal )?(delivery )?errors?|retry timeout exceeded|cannot send message for \d+ days?|removed from the mail queue|has been frozen|is frozen)/i;

// The wording rules, for a failure with neither an enhanced status code nor an SMTP reply code.
// Temporary conditions first: "Host not found, try again" is Postfix's temporary DNS failure.
const SOFT_RULES: Array<[string, RegExp]> = [
  ['mailbox-full', /(mailbox (is )?full|mail ?(file|box|folder|database) is (over|full)|is full|over ?quota|quota (exceeded|exceeds)|exceeded the local limit|exceeded storage|insufficient (system )?storage)/i],
  ['greylisting', /(grey|gray)[- ]?list/i],
  ['timeout', /(timed? ?out|timeout|retry time|frozen)/i],
  ['rate-limit', /(rate[- ]limit|too many (connections|messages|concurrent)|slow down|unusual rate)/i],
  ['temporary', /(deferred|try (again )?later|try again|come back later|retry later|temporar)/i],
  ['network', /(connection refused|could not connect|unable to connect|service (not|temporarily) available|unable to establish|resources temporarily)/i],
];
const HARD_RULES: Array<[string, RegExp]> = [
  ['unknown-user', /(user unknown|unknown (user|recipient)|no such (user|mailbox|recipient)|not (found|listed)|does ?n[o']t (exist|have)|invalid (recipient|mailbox|address)|no mailbox|mailbox unavailable|address rejected|not a valid recipient|recipnotfound|recipientnotfound)/i],
  ['mailbox-disabled', /(disabled|suspended|deactivated|inactive|discontinued|account (is )?(closed|locked))/i],
  ['domain-not-found', /(host unknown|unknown host|domain (not found|does not exist)|host (or domain name )?not found|no such domain|nxdomain|unroutea?ble|non-existent host|no route|couldn't find any host)/i],
  ['policy', /(blocked|reject|refused|denied|spam|policy|black ?list|block ?list|prohibit|not authorized|unauthenticated)/i],
];

const ENHANCED_STATUS = /(?<![\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])/;
const SMTP_CODE = /(?<![\d.#])([45])[0-9]{2}(?![\d.])/;
// Tried only where a run of local-part characters starts: tried inside the run too, a long run
// without an @ cost time quadratic in its length.
const EMAIL = /(?<![A-Za-z0-9._%+'=!#$&*/?^`{|}~-])[A-Za-z0-9._%+'=!#$&*/?^`{|}~-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/;

/** A bounce or an ignorable delivery report, or null for ordinary mail. */
export function detectBounce(mail: BounceCandidate): BounceVerdict | null {
  if (mail.reportType === 'disposition-notification') {
    return { kind: 'ignored', decidedBy: 'report:disposition-notification', confidence: 0.99, reason: 'read receipt (RFC 8098)' };
  }
  if (mail.reportType === 'feedback-report' || mail.parts.some((p) => p.contentType === 'message/feedback-report')) {
    return detectComplaint(mail, originalMessageIds(mail), originalRecipient(mail));
  }
  const dsnPart = mail.parts.find((p) => DSN_TYPES.has(p.contentType));
  if (dsnPart) {
    const verdict = fromDsn(mail, dsnPart.content);
    if (verdict) return verdict;
  }
  return fromText(mail);
}

// --- RFC 3464 ------------------------------------------------------------------------------

interface DsnRecipient {
  action: string | null;
  status: string | null;
  diagnostic: string | null;
  finalRecipient: string | null;
  originalRecipient: string | null;
}

/** Per-recipient field groups of a message/delivery-status body (the first group is per-message). */
export function parseDeliveryStatus(content: string): DsnRecipient[] {
  const groups = content.replace(/\r\n?/g, '\n').trim().split(/\n\s*\n/);
  const out: DsnRecipient[] = [];
  for (const group of groups) {
    const fields = parseFields(group);
    if (!fields.has('final-recipient') && !fields.has('original-recipient') && !fields.has('action')) continue;
    out.push({
      action: fields.get('action')?.toLowerCase().trim() ?? null,
      status: normalizeStatus(fields.get('status') ?? null),
      diagnostic: fields.get('diagnostic-code') ?? null,
      finalRecipient: addressOf(fields.get('final-recipient') ?? null),
      originalRecipient: addressOf(fields.get('original-recipient') ?? null),
    });
  }
  return out;
}

function fromDsn(mail: BounceCandidate, content: string): BounceVerdict | null {
  const recipients = parseDeliveryStatus(content);
  const failed = recipients.find((r) => r.action === 'failed') ?? recipients.find((r) => r.action === null && r.status?.startsWith('5'));
  if (failed) {
    const diagnostic = failed.diagnostic ? cleanDiagnostic(failed.diagnostic) : null;
    const status = failed.status ?? statusIn(diagnostic ?? '');
    const reason = diagnostic || reasonFromText(mail.text) || describeStatus(status) || mail.subject;
    const type = typeOf(status, diagnostic ?? reason, reportRegion(mail.text));
    const ids = originalMessageIds(mail, content);
    return {
      kind: 'bounce',
      decidedBy: `dsn:rfc3464;type:${type.rule}`,
      confidence: 0.99,
      bounce: {
        type: type.type,
        status,
        reason,
        originalMessageId: ids[0] ?? null,
        originalMessageIds: ids,
        recipient: failed.finalRecipient ?? failed.originalRecipient ?? xFailedRecipient(mail) ?? originalRecipient(mail),
      },
    };
  }
  const delayed = recipients.find((r) => r.action === 'delayed');
  if (delayed) {
    const why = delayed.diagnostic ? cleanDiagnostic(delayed.diagnostic) : delayed.status ?? 'delivery delayed';
    return { kind: 'ignored', decidedBy: 'dsn:action-delayed', confidence: 0.99, reason: `delivery delayed, the MTA keeps trying: ${why}` };
  }
  const other = recipients.find((r) => r.action && ['delivered', 'relayed', 'expanded'].includes(r.action));
  if (other) return { kind: 'ignored', decidedBy: `dsn:action-${other.action}`, confidence: 0.99, reason: `delivery report: ${other.action}` };
  return null;
}

// --- non-standard notices ------------------------------------------------------------------

function fromText(mail: BounceCandidate): BounceVerdict | null {
  const fromSystem = isMailSystem(mail);
  const xFailed = mail.header('x-failed-recipients') !== null;
  const report = reportRegion(mail.text);
  const failureSubject = FAILURE_SUBJECT.test(mail.subject);
  const delaySubject = DELAY_SUBJECT.test(mail.subject);
  const failureText = FAILURE_TEXT.test(report);
  const delayText = DELAY_TEXT.test(report) && !GAVE_UP_TEXT.test(report);

  const gaveUp = GAVE_UP_TEXT.test(report);
  if ((fromSystem || delaySubject) && (delaySubject || (delayText && !failureSubject)) && !xFailed && !gaveUp) {
    return { kind: 'ignored', decidedBy: 'bounce-text:delayed', confidence: 0.9, reason: `delivery delayed, the MTA keeps trying: ${mail.subject}` };
  }
  const isBounce = ((fromSystem || xFailed) && (failureSubject || failureText)) || (failureSubject && failureText && mail.nullSender);
  if (!isBounce) return null;

  const reason = reasonFromText(mail.text) || firstSentenceAfterFailure(report) || mail.subject;
  const status = statusIn(reason) ?? qmailStatus(report) ?? statusIn(report);
  const type = typeOf(status, reason, report);
  const ids = originalMessageIds(mail);
  const detector = xFailed ? 'bounce-text:x-failed-recipients' : fromSystem ? 'bounce-text:mailer-daemon' : 'bounce-text:subject';
  return {
    kind: 'bounce',
    decidedBy: `${detector};type:${type.rule}`,
    confidence: fromSystem || xFailed ? 0.95 : 0.85,
    bounce: {
      type: type.type,
      status,
      reason,
      originalMessageId: ids[0] ?? null,
      originalMessageIds: ids,
      recipient: xFailedRecipient(mail) ?? recipientFromText(report, mail) ?? originalRecipient(mail),
    },
  };
}

export function isMailSystem(mail: Pick<BounceCandidate, 'fromAddress' | 'fromName'>): boolean {
  const local = mail.fromAddress?.split('@')[0] ?? '';
  if (SYSTEM_LOCAL_PART.test(local)) return true;
  // Not the null sender with Auto-Submitted alone: RFC 3834 auto-replies (out of office) carry
  // both too, and "I cannot be reached until Monday" must not become a bounce.
  return !!mail.fromName && SYSTEM_NAME.test(mail.fromName);
}

// The notice itself, without the copy of the original message many MTAs append.
const ORIGINAL_COPY_MARKERS = [
  /^-{2,}\s*this is a copy of the message/im,
  /^-{2,}\s*below this line is a copy of the message/im,
  /^-{2,}\s*original message\s*-{2,}/im,
  /^-{2,}\s*original message follows/im,
  /^[^\S\n]*original message headers:/im,
  /^-{2,}\s*the original message was received/im,
  /^[^\S\n]*-{3,}\s*returned message\s*-{3,}/im,
  /^[^\S\n]*-{3,}\s*(original|undelivered|unsent) message (headers? )?follows\s*-{3,}/im,
  /^[^\S\n]*-{3,}\s*original message header follows\s*-{3,}/im,
  /^-{2,}\s*enclosed are the original headers/im,
  /^-{2,}\s*the header of the original message/im,
  /^-{3,}\s*original message headers\s*-{3,}/im,
  /^[^\S\n]*possibly truncated original message follows/im,
  /^[^\S\n]*below is a copy of the original message/im,
  /^[^\S\n]*-{3,}\s*元のメッセージのヘッダ/im,
  /^[^\S\n]*(ursprüngliche nachrichtenkopfzeilen|ursprüngliche nachrichtenheader|en-têtes (du message|de message) d'origine|encabezados del mensaje original|cabeçalhos da mensagem original|oorspronkelijke berichtkoppen|intestazioni originali del messaggio|元のメッセージ ヘッダー)\s*:/im,
];

function reportRegion(text: string): string {
  let end = text.length;
  for (const re of ORIGINAL_COPY_MARKERS) {
    const m = re.exec(text);
    if (m && m.index < end && m.index > 0) end = m.index;
  }
  return text.slice(0, end);
}

// Where each MTA family puts the remote server's answer, most specific first.
// Continuation lines of a wrapped answer are indented; the first unindented line ends it.
const REASON_PATTERNS: RegExp[] = [
  /remote server returned '([^']+)'/i, // Exchange / Office 365
  /reported error:\s*([^\n]+)/i, // Office 365 (current)
  /^[^\S\n]*#([45]\d\d[ -][^\n]+?)\s*##/m, // Exchange 2010-2016 diagnostic line
  /error code ?:\s*([^\n]+)/i, // Zoho
  /^[^\S\n]*(?:reason|error|raison|motivo|grund)\s*:\s*([^\n]+)/im, // Mimecast, Barracuda, Kerio, MessageLabs, Orange
  /\breason:\s*([45]\d\d[^\n]*)/i, // GMX, Web.de
  /error message(?: below)?:\s*\n\s*([^\n]+)/i, // Apache James
  /non-delivered information -+\s*\n\s*([^\n]+)/i, // Biglobe
  /^because:\s*\n\s*\n?\s*([^\n]+)/im, // Domino
  /^[^\S\n]*(?:<[^<>\s]+@[^<>\s]+>|[^\s<>@]+@[^\s<>]+)\s*:\s*([45]\d\d[ -][^\n]+)/m, // OpenSMTPD, SoftBank: "addr: 550 ..."
  /^[^\S\n]*<<<\s*([45]\d\d[ -][^\n]+)/m, // Courier, Sendmail transcript
  /^([45]\d\d[ -]<?[^\s<>]+@[^\s<>]+?>?\.\.\.[ \t]*[^\n]+)/m, // Sendmail: "550 addr... User unknown"
  /<[^<>\s]+\s+#\d\.\d{1,3}\.\d{1,3}\s+smtp;([^>]+)>/i, // Exchange 2003: <host #5.1.1 smtp;550 5.1.1 User unknown>
  /the (?:error that the other server returned was|response from the remote server was|response was):[ \t]*\n[ \t]*([^\n]+(?:\n[ \t]+\S[^\n]*)*)/i, // Gmail
  /smtp error from remote (?:mail server|server|mailer) after [^\n]*:[ \t]*\n[ \t]*([^\n]+(?:\n[ \t]+\S[^\n]*)*)/i, // Exim
  /following address(?:\(es\))? failed:[ \t]*\n(?:[ \t]*\n)*[ \t]*\S+@\S+[^\n]*\n((?:[ \t]+\S[^\n]*\n?)+)/i, // Exim, local failures
  /remote host said:\s*([^\n]+(?:\n[ \t]+\S[^\n]*)*)/i, // qmail
  /\bsaid:\s*([^\n]+(?:\n[ \t]+\S[^\n]*)*)/i, // Postfix
  /\(reason:\s*([^)]+)\)/i, // Sendmail
  /^[^\S\n]*<[^<>\s]+@[^<>\s]+>:[ \t]*\n((?:[^\n]+\n?){1,3})/m, // qmail / Yahoo: the lines under "<addr>:"
  /^[^\S\n]*<?[^\s<>@]+@[^\s<>]+?>?\s*\(([^)]+)\)\s*$/m, // GroupWise: "addr (reason)"
  /^[ \t]+[^\s@]+@[^\s@]+\s*\n[ \t]+([^\n]+)/m, // Exim-style indented "addr" then the reason
  /^[ \t]*(?:\S+\s*)?([45]\d\d[ -][245]\.\d{1,3}\.\d{1,3}[^\n]*)/m, // any line with an SMTP answer
];

function reasonFromText(text: string): string | null {
  const region = reportRegion(text);
  for (const re of REASON_PATTERNS) {
    const m = re.exec(region);
    if (!m) continue;
    const reason = cleanDiagnostic(m[1]);
    if (reason.length >= 3 && !/^(giving up|i'm not going to try again)/i.test(reason)) return reason;
  }
  return null;
}

function firstSentenceAfterFailure(region: string): string | null {
  const m = FAILURE_TEXT.exec(region);
  if (!m) return null;
  const start = region.lastIndexOf('\n', m.index) + 1;
  const line = region.slice(start).split(/\n\s*\n/)[0];
  return cleanDiagnostic(line) || null;
}

const RECIPIENT_PATTERNS: RegExp[] = [
  /your message wasn'?t delivered to\s+(\S+@\S+?)\s+because/i, // Gmail
  /delivery to the following recipients? failed permanently:\s*\n\s*(\S+@\S+)/i, // Gmail (old)
  /delivery has failed to these recipients or groups:\s*\n(?:\s*\n)*\s*([^\n]+)/i, // Exchange / Office 365
  /the following recipient\(s\) cannot be reached:\s*\n(?:\s*\n)*\s*([^\n]+)/i, // Exchange 2003
  /following address(?:\(es\))? failed:\s*\n(?:\s*\n)*\s*([^\n]+)/i, // Exim
  /had permanent fatal errors\s*-*\s*\n\s*([^\n]+)/i, // Sendmail
  /^[^\S\n]*<([^<>\s]+@[^<>\s]+)>:/m, // Postfix, qmail, Yahoo
  /(?:recipient|your message to|failed recipient\(s\)|recipient address)\s*:?\s*\n?\s*<?([^\s<>]+@[^\s<>]+)/i, // Mimecast, Barracuda, James, Office 365
  /could not be reached:\s*\n(?:\s*\n)*\s*([^\n]+)/i, // Kerio
  /(?:not delivered to|undeliverable to the following):\s*\n(?:\s*\n)*\s*([^\n]+)/i, // Domino, GroupWise
  /^[^\S\n]*rcpt to:\s*<([^<>\s]+)>/im, // MDaemon transcript
];

function recipientFromText(region: string, mail: BounceCandidate): string | null {
  for (const re of RECIPIENT_PATTERNS) {
    const m = re.exec(region);
    const addr = m ? EMAIL.exec(m[1]) : null;
    if (addr) return addr[0].toLowerCase();
  }
  // Else the first address in the notice that is neither ours (its To) nor a mail system's.
  const own = new Set([mail.header('to'), mail.fromAddress].flatMap((v) => (v ? [...v.matchAll(new RegExp(EMAIL, 'g'))].map((m) => m[0].toLowerCase()) : [])));
  for (const m of region.matchAll(new RegExp(EMAIL, 'g'))) {
    const addr = m[0].toLowerCase();
    if (!own.has(addr) && !SYSTEM_LOCAL_PART.test(addr.split('@')[0])) return addr;
  }
  return null;
}

function xFailedRecipient(mail: BounceCandidate): string | null {
  const v = mail.header('x-failed-recipients');
  const m = v ? EMAIL.exec(v) : null;
  return m ? m[0].toLowerCase() : null;
}

// --- the original message ------------------------------------------------------------------

/**
 * Every Message-ID the report gives for the bounced message, most reliable first: the returned
 * message or its headers; an Original-Message-ID field (some DSNs, MDNs, feedback reports); a
 * Message-ID line quoted in the notice (Exim's, qmail's and Sendmail's copies, Exchange's
 * "Original message headers", Zoho's and Mimecast's summaries); the notice's In-Reply-To and
 * References (Gmail and Exchange thread their notices). The caller tries them all.
 */
export function originalMessageIds(mail: BounceCandidate, dsn?: string): string[] {
  const ids: string[] = [];
  const add = (id: string | null | undefined) => {
    if (id && /^<[^<>\s]+>$/.test(id) && !ids.includes(id)) ids.push(id);
  };
  for (const part of mail.parts) if (ORIGINAL_TYPES.has(part.contentType)) add(headerIn(headerBlock(part.content), 'message-id'));
  for (const block of [dsn ?? '', ...mail.parts.filter((p) => !ORIGINAL_TYPES.has(p.contentType)).map((p) => p.content)]) {
    for (const m of block.matchAll(/^(?:x-)?original-message-id:[ \t]*(?:\r?\n[ \t]+)?(<[^<>\s]+>)/gim)) add(m[1]);
  }
  add(/<[^<>\s]+>/.exec(mail.header('original-message-id') ?? mail.header('x-original-message-id') ?? '')?.[0]);
  for (const m of mail.text.matchAll(/^[ \t>]*(?:x-)?(?:original-)?message-id:[ \t]*(?:\n[ \t]+)?(<[^<>\s]+>)/gim)) add(m[1]);
  add(mail.inReplyTo);
  for (const m of (mail.header('references') ?? '').matchAll(/<[^<>\s]+>/g)) add(m[0]);
  return ids;
}

function originalRecipient(mail: BounceCandidate): string | null {
  for (const part of mail.parts) {
    if (!ORIGINAL_TYPES.has(part.contentType)) continue;
    const to = headerIn(headerBlock(part.content), 'to');
    const m = to ? EMAIL.exec(to) : null;
    if (m) return m[0].toLowerCase();
  }
  return null;
}

function headerBlock(content: string): string {
  const normalized = content.replace(/\r\n?/g, '\n');
  const end = normalized.search(/\n\s*\n/);
  return end < 0 ? normalized : normalized.slice(0, end);
}

function headerIn(block: string, name: string): string | null {
  const fields = parseFields(block);
  const v = fields.get(name);
  if (!v) return null;
  if (name === 'message-id') {
    const m = /<[^<>\s]+>/.exec(v);
    return m ? m[0] : null;
  }
  return v;
}

// --- helpers -------------------------------------------------------------------------------

/** "Name: value" lines with folded continuations; the first occurrence of a name wins. */
function parseFields(block: string): Map<string, string> {
  const fields = new Map<string, string>();
  let current: string | null = null;
  for (const line of block.replace(/\r\n?/g, '\n').split('\n')) {
    if (/^[ \t]/.test(line) && current) {
      fields.set(current, `${fields.get(current)} ${line.trim()}`);
      continue;
    }
    const m = /^([A-Za-z][A-Za-z0-9-]*)\s*:\s*(.*)$/.exec(line);
    if (!m) {
      current = null;
      continue;
    }
    const name = m[1].toLowerCase();
    if (fields.has(name)) {
      current = null;
      continue;
    }
    fields.set(name, m[2].trim());
    current = name;
  }
  return fields;
}

function addressOf(field: string | null): string | null {
  if (!field) return null;
  const value = field.replace(/^[a-z0-9-]+\s*;\s*/i, '');
  const m = EMAIL.exec(value);
  return m ? m[0].toLowerCase() : null;
}

function normalizeStatus(value: string | null): string | null {
  if (!value) return null;
  const m = ENHANCED_STATUS.exec(value);
  return m ? `${m[1]}.${Number(m[2])}.${Number(m[3])}` : null;
}

function statusIn(text: string): string | null {
  return normalizeStatus(text);
}

/** qmail's "(#5.1.1)". */
function qmailStatus(text: string): string | null {
  const m = /\(#([245]\.\d{1,3}\.\d{1,3})\)/.exec(text);
  return m ? normalizeStatus(m[1]) : null;
}

function cleanDiagnostic(value: string): string {
  let v = value
    .replace(/^\s*(smtp|x-postfix|x-local|x-unix|x-ses|x-exim)\s*;\s*/i, '')
    .replace(/\s+/g, ' ')
    .replace(/^['"]|['"]$/g, '')
    .trim();
  // A multi-line SMTP answer repeats its codes on every line ("550-5.1.1 ... 550-5.1.1 ..."): keep the first.
  const m = /^(\d{3})[ -](\d\.\d{1,3}\.\d{1,3})\s+/.exec(v);
  if (m) {
    const repeated = new RegExp(`\\s${m[1]}[ -]${m[2].replace(/\./g, '\\.')}\\s+`, 'g');
    v = `${m[1]} ${m[2]} ${v.slice(m[0].length).replace(repeated, ' ')}`;
  }
  return v.slice(0, 1000);
}

/**
 * Hard or soft, and the rule that decided (for decidedBy): the enhanced status code's class,
 * else the SMTP reply code's, else the wording of the reason, else of the whole notice, else hard.
 */
function typeOf(status: string | null, reason: string, region = ''): { type: 'hard' | 'soft'; rule: string } {
  if (status) return { type: status.startsWith('4') ? 'soft' : 'hard', rule: 'status-class' };
  const code = SMTP_CODE.exec(reason);
  if (code) return { type: code[1] === '4' ? 'soft' : 'hard', rule: 'smtp-code' };
  for (const text of [reason, region]) {
    for (const [name, re] of SOFT_RULES) if (re.test(text)) return { type: 'soft', rule: `text:${name}` };
    for (const [name, re] of HARD_RULES) if (re.test(text)) return { type: 'hard', rule: `text:${name}` };
  }
  return { type: 'hard', rule: 'default-hard' };
}

const STATUS_DESCRIPTIONS: Record<string, string> = {
  '1': 'bad destination address',
  '2': 'mailbox status',
  '3': 'mail system status',
  '4': 'network or routing problem',
  '5': 'mail delivery protocol problem',
  '6': 'message content or media problem',
  '7': 'security or policy problem',
};

function describeStatus(status: string | null): string | null {
  if (!status) return null;
  const [cls, subject] = status.split('.');
  return `${cls === '4' ? 'temporary' : 'permanent'} failure: ${STATUS_DESCRIPTIONS[subject] ?? 'other'} (${status})`;
}
