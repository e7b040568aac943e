import MimeNode from 'nodemailer/lib/mime-node';
import { encodeWord, foldLines, hasLongerLines, isPlainText } from 'nodemailer/lib/mime-funcs';
import { encode as qpEncode, wrap as qpWrap } from 'nodemailer/lib/qp';
import { encode as base64Encode, wrap as base64Wrap } from 'nodemailer/lib/base64';
import { randomBytes } from 'node:crypto';

export interface OutgoingMail {
  from: { name: string; address: string };
  to: string;
  cc?: string[];
  subject: string;
  html: string;
  text: string;
  messageId: string;
  inReplyTo?: string;
  references?: string[];
  headers?: Record<string, string>;
  attachments?: Array<{ filename: string; content: Buffer | string; contentType: string }>;
}

/**
 * A campaign message (headers, a text part and an HTML part, no attachments) as the bytes
 * nodemailer's composer would write, built in one pass into one buffer.
 *
 * Why: nodemailer composes a message as a tree of MIME nodes streamed through a pipeline per
 * node (abort controllers, transforms, one socket write per chunk). In the sending benchmark that
 * was ~0.37 ms of CPU per message of the ~0.6-0.7 ms nodemailer spent on it, on a machine where
 * every millisecond of CPU per message is ~ a tenth of the throughput; handing the pooled
 * transport the finished message (`raw`) leaves it the SMTP dialogue and one write of the data.
 *
 * The encoding is nodemailer's own: each header value goes through MimeNode#encodeHeaderValue
 * and foldLines, bodies through its quoted-printable and base64 encoders, with the same choice
 * of transfer encoding, header order and layout (test/adapters/mime.test.ts compares the two
 * byte for byte). Anything else (attachments, an empty alternative, an address that is not a
 * plain ASCII addr-spec) returns null and goes through the composer as before.
 */

// Only its encodeHeaderValue is used (a fixed base boundary: no random bytes per instance).
const headers = new MimeNode(false, { baseBoundary: '0' });

/** A dot-atom local part at an ASCII host name: written as is, the domain lower-cased. */
const PLAIN_ADDRESS = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;

function envelopeAddress(address: string): string | null {
  if (!PLAIN_ADDRESS.test(address) || /(^|\.)xn--/i.test(address.slice(address.lastIndexOf('@') + 1))) return null;
  const at = address.lastIndexOf('@');
  return address.slice(0, at) + '@' + address.slice(at + 1).toLowerCase();
}

function header(key: string, value: Parameters<MimeNode['encodeHeaderValue']>[1]): string {
  const encoded = headers.encodeHeaderValue(key, value);
  return (encoded || '').toString().trim() ? foldLines(`${key}: ${encoded}`, 76) + '\r\n' : '';
}

/**
 * The values encodeHeaderValue returns unchanged, checked without it (it parses and normalizes
 * on every call, ~7 us per header): printable ASCII without a double quote or an encoded-word
 * opener for unstructured text, one `<...>` id without white space for message ids.
 */
const PLAIN_TEXT = /^[\x20\x21\x23-\x7e]*$/;
const PLAIN_ID = /^<[\x21-\x7e]+>$/;
function textHeader(key: string, value: string): string {
  if (!(PLAIN_TEXT.test(value) && !value.includes('=?') && value.trim())) return header(key, value);
  const folded = foldLines(`${key}: ${value}`, 76);
  // A word too long to fold (a lead's field rendered into a subject) would leave a line past
  // RFC 5322's 998 characters: written as encoded-words instead, which fold anywhere.
  return (hasLongerLines(folded, 998) ? foldLines(`${key}: ${encodeWord(value, 'Q', 52)}`, 76) : folded) + '\r\n';
}
function idHeader(key: string, value: string | string[]): string {
  const ids = Array.isArray(value) ? value : [value];
  return ids.length && ids.every((id) => PLAIN_ID.test(id)) ? foldLines(`${key}: ${ids.join(' ')}`, 76) + '\r\n' : header(key, value);
}

/** The From line of each sender (a handful per worker), encoded once. */
const fromLines = new Map<string, string>();
function fromHeader(from: OutgoingMail['from']): string {
  const k = `${from.name}\u0000${from.address}`;
  let line = fromLines.get(k);
  if (line === undefined) {
    if (fromLines.size >= 1000) fromLines.clear();
    fromLines.set(k, (line = header('From', from)));
  }
  return line;
}

/** MimeNode#_getTextEncoding: quoted-printable when latin letters outnumber the 8-bit and control characters. */
function textEncoding(value: string): 'Q' | 'B' {
  let nonLatin = 0;
  let latin = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c <= 0x08 || c === 0x0b || c === 0x0c || (c >= 0x0e && c <= 0x1f) || c >= 0x80) nonLatin++;
    else if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) latin++;
  }
  return nonLatin < latin ? 'Q' : 'B';
}

/** One text/* part: its headers, the blank line and its content, as MimeNode#stream writes them. */
function textPart(type: 'text/plain' | 'text/html', content: string): string {
  let cte: string;
  let body: string;
  if (isPlainText(content) && !hasLongerLines(content, 76)) {
    cte = '7bit';
    body = content;
  } else if (textEncoding(content) === 'Q') {
    cte = 'quoted-printable';
    body = qpWrap(qpEncode(Buffer.from(content, 'utf8')), 76);
  } else {
    cte = 'base64';
    body = base64Wrap(base64Encode(Buffer.from(content, 'utf8')), 76);
  }
  return `Content-Type: ${type}; charset=utf-8\r\nContent-Transfer-Encoding: ${cte}\r\n\r\n${body}`;
}

let boundaryPool = Buffer.alloc(0);
let boundaryAt = 0;
/** 8 random bytes in hex, as nodemailer's base boundary, from a pooled buffer. */
function boundaryBase(): string {
  if (boundaryAt + 8 > boundaryPool.length) {
    boundaryPool = randomBytes(8 * 512);
    boundaryAt = 0;
  }
  boundaryAt += 8;
  return boundaryPool.toString('hex', boundaryAt - 8, boundaryAt);
}

export interface RawMessage {
  envelope: { from: string; to: string[] };
  raw: Buffer;
}

export function rawMessage(mail: OutgoingMail, date = new Date()): RawMessage | null {
  if (mail.attachments?.length || !mail.text || !mail.html) return null;
  const from = envelopeAddress(mail.from.address);
  const to = [mail.to, ...(mail.cc ?? [])].map(envelopeAddress);
  if (!from || to.some((a) => a === null)) return null;
  const recipients = [...new Set(to as string[])];

  let head = '';
  for (const [key, value] of Object.entries(mail.headers ?? {})) head += textHeader(key, value);
  head += fromHeader(mail.from);
  // A plain addr-spec is written as its envelope form (the domain lower-cased), as the composer does.
  head += foldLines(`To: ${to[0]}`, 76) + '\r\n';
  if (mail.cc?.length) head += header('Cc', mail.cc);
  if (mail.inReplyTo) head += idHeader('In-Reply-To', mail.inReplyTo);
  if (mail.references?.length) head += idHeader('References', mail.references);
  if (mail.subject) head += textHeader('Subject', mail.subject);
  head += idHeader('Message-ID', mail.messageId);
  head += `Date: ${date.toUTCString().replace(/GMT/, '+0000')}\r\n`;
  const boundary = `--_NmP-${boundaryBase()}-Part_1`;
  head += `MIME-Version: 1.0\r\n${foldLines(`Content-Type: multipart/alternative; boundary="${boundary}"`, 76)}\r\n`;

  const message =
    `${head}\r\n` +
    `--${boundary}\r\n${textPart('text/plain', mail.text)}` +
    `\r\n--${boundary}\r\n${textPart('text/html', mail.html)}` +
    `\r\n--${boundary}--\r\n`;
  return { envelope: { from, to: recipients }, raw: Buffer.from(message, 'utf8') };
}
