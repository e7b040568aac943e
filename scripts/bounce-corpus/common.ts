// What every bounce template gets: the message we sent (sender, recipient, Message-ID), the
// failure to report, the line ending and a random source; and what it gives back.
import { type Eol, leaf, pick } from './mime.ts';

export interface Diag {
  /** SMTP reply code, when the report has one. */
  code: string | null;
  /** Enhanced status code, when the report has one. */
  status: string | null;
  /** The remote server's words, without codes. */
  text: string;
  type: 'hard' | 'soft';
}

export interface Case {
  n: number;
  r: () => number;
  eol: Eol;
  senderName: string;
  sender: string;
  senderDomain: string;
  rcpt: string;
  rcptLocal: string;
  rcptDomain: string;
  origId: string;
  origSubject: string;
  origDate: string;
  date: string;
  mx: string;
  ip: string;
  diag: Diag;
}

export interface Sample {
  raw: Buffer;
  /** What the report offers to find the original: its Message-ID, else only the recipient. */
  carriesMessageId: boolean;
  class?: 'bounce' | 'ignored';
  /** The expected hard/soft, when it differs from the case's diagnostic (rare). */
  type?: 'hard' | 'soft';
}

export type Template = (c: Case) => Sample;

const SENDERS = [
  ['Alice Martin', 'alice@northwind.example'],
  ['Bruno Keller', 'bruno.keller@contoso-sales.example'],
  ['Chloé Durand', 'chloe@fabrikam-growth.example'],
  ['Daniel Ortega', 'd.ortega@outreach.tailspin.example'],
  ['Emma Visser', 'emma@wingtip-partners.example'],
] as const;
const FIRST = ['john', 'maria', 'k.tanaka', 'sven.olsen', 'priya', 'l.moreau', 'a.ivanova', 'jdoe', 'hiroshi', 'carla.mendes', 'tom.baker', 'nina', 'r.schmidt', 'yuki.sato', 'peter.novak'];
const SUBJECTS = ['Quick question about {c}', 'Idea for {c}', '{c} + Northwind', 'Following up', 'Cutting onboarding time at {c}', 'Worth a chat?'];
const COMPANIES = ['Initech', 'Globex', 'Umbrella', 'Hooli', 'Vandelay', 'Stark', 'Wayne', 'Tyrell', 'Soylent', 'Cyberdyne'];

function rfcDate(d: Date): string {
  return d.toUTCString().replace('GMT', '+0000');
}

/** A case: one message we sent and the failure a remote system reports for it. */
export function makeCase(n: number, r: () => number, rcptDomain: string, diag: Diag, eol: Eol): Case {
  const [senderName, sender] = pick(r, SENDERS);
  const rcptLocal = pick(r, FIRST);
  const sent = new Date(Date.UTC(2026, 10, 2 + (n % 25), 8 + (n % 9), (n * 7) % 60, (n * 13) % 60));
  const hex = (len: number) => Array.from({ length: len }, () => '0123456789abcdefghijklmnopqrstuvwxyz'[Math.floor(r() * 36)]).join('');
  return {
    n,
    r,
    eol,
    senderName,
    sender,
    senderDomain: sender.split('@')[1],
    rcpt: `${rcptLocal}@${rcptDomain}`,
    rcptLocal,
    rcptDomain,
    origId: `<msg_${hex(26)}.${hex(12)}@${sender.split('@')[1]}>`,
    origSubject: pick(r, SUBJECTS).replace('{c}', pick(r, COMPANIES)),
    origDate: rfcDate(sent),
    date: rfcDate(new Date(sent.getTime() + (3 + Math.floor(r() * 600)) * 1000)),
    mx: `mx${1 + Math.floor(r() * 4)}.${rcptDomain}`,
    ip: `203.0.113.${10 + Math.floor(r() * 200)}`,
    diag,
  };
}

/** The header block of the message we sent (as the outbound sender writes it). */
export function originalHeaders(c: Case, received = true): string {
  return [
    ...(received ? [`Received: from mail.${c.senderDomain} (mail.${c.senderDomain} [198.51.100.20])\n\tby relay.${c.senderDomain} with ESMTPSA id ${c.origId.slice(5, 15)}\n\tfor <${c.rcpt}>; ${c.origDate}`] : []),
    `From: ${c.senderName} <${c.sender}>`,
    `To: ${c.rcpt}`,
    `Subject: ${c.origSubject}`,
    `Message-ID: ${c.origId}`,
    `Date: ${c.origDate}`,
    'MIME-Version: 1.0',
    `List-Unsubscribe: <https://mail.${c.senderDomain}/u/${c.origId.slice(5, 27)}>`,
    'List-Unsubscribe-Post: List-Unsubscribe=One-Click',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
  ].join('\n');
}

/** The whole message we sent: headers and a short body (that itself says "interested"). */
export function originalMessage(c: Case): string {
  return `${originalHeaders(c)}\n\nHi ${c.rcptLocal.split(/[._]/)[0]},\n\nWould your team be interested in a 15-minute call next week?\n\nBest,\n${c.senderName}\n\nIf you'd rather not hear from me, reply "stop".\n`;
}

/** The attached original as message/rfc822 or text/rfc822-headers. */
export function attachedOriginal(c: Case, headersOnly: boolean): string {
  return headersOnly ? leaf({ type: 'text/rfc822-headers', body: originalHeaders(c) }) : leaf({ type: 'message/rfc822', body: originalMessage(c) });
}

/** "550 5.1.1 text", "550 text", "5.1.1 text" or "text", as the diagnostic has them. */
export function smtpLine(d: Diag): string {
  return [d.code, d.status, d.text].filter(Boolean).join(' ');
}

export function boundary(c: Case, tag: string): string {
  return `${tag}${c.origId.slice(5, 21)}${c.n}`;
}

export function dsnFields(c: Case, reportingMta: string, opts: { action?: string; arrival?: boolean; remote?: boolean } = {}): string {
  const d = c.diag;
  const status = d.status ?? (d.type === 'hard' ? '5.0.0' : '4.0.0');
  return [
    `Reporting-MTA: dns; ${reportingMta}`,
    ...(opts.arrival === false ? [] : [`Arrival-Date: ${c.origDate}`]),
    '',
    `Final-Recipient: rfc822; ${c.rcpt}`,
    `Original-Recipient: rfc822;${c.rcpt}`,
    `Action: ${opts.action ?? 'failed'}`,
    `Status: ${status}`,
    ...(opts.remote === false ? [] : [`Remote-MTA: dns; ${c.mx}`]),
    `Diagnostic-Code: smtp; ${smtpLine(d)}`,
    `Last-Attempt-Date: ${c.date}`,
    '',
  ].join('\n');
}

/** One entry of fixtures/mail/bounces/labels.json: written by generate.ts, read by eval-bounces.ts. */
export interface CorpusLabel {
  file: string;
  family: string;
  set: 'holdout' | 'tuned';
  class: 'bounce' | 'ignored';
  bounceType?: 'hard' | 'soft';
  originalMessageId?: string;
  recipient?: string;
}
