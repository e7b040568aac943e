// MIME building blocks for the bounce corpus generator (scripts/bounce-corpus/generate.ts).
// Everything is assembled with "\n" and converted to the case's line ending at the end, so a
// template never has to think about CRLF.
import Encoding from 'encoding-japanese';
import iconv from 'iconv-lite';

export type Transfer = '7bit' | '8bit' | 'quoted-printable' | 'base64';
export type Eol = '\r\n' | '\n';

/** A small deterministic PRNG (mulberry32): the corpus is the same on every run. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];

/** Bytes of a text in a charset (iconv-lite, encoding-japanese for ISO-2022-JP). */
export function encodeCharset(text: string, charset: string): Buffer {
  const cs = charset.toLowerCase();
  if (cs === 'utf-8' || cs === 'us-ascii') return Buffer.from(text, 'utf8');
  if (cs === 'iso-2022-jp') return Buffer.from(Encoding.convert(Encoding.stringToCode(text), { to: 'JIS', from: 'UNICODE' }) as number[]);
  return iconv.encode(text, cs);
}

function qpEncode(bytes: Buffer): string {
  const out: string[] = [];
  for (const line of splitBytes(bytes)) {
    let cur = '';
    for (let i = 0; i < line.length; i++) {
      const b = line[i];
      const last = i === line.length - 1;
      const literal = (b >= 33 && b <= 126 && b !== 61) || ((b === 32 || b === 9) && !last);
      const tok = literal ? String.fromCharCode(b) : `=${b.toString(16).toUpperCase().padStart(2, '0')}`;
      if (cur.length + tok.length > 75) {
        out.push(`${cur}=`);
        cur = '';
      }
      cur += tok;
    }
    out.push(cur);
  }
  return out.join('\n');
}

function splitBytes(bytes: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 10) {
      lines.push(bytes.subarray(start, i > start && bytes[i - 1] === 13 ? i - 1 : i));
      start = i + 1;
    }
  }
  lines.push(bytes.subarray(start));
  return lines;
}

/** The encoded body of a leaf part, as a latin1 string (8bit bytes survive the round trip). */
export function encodeBody(text: string, charset: string, transfer: Transfer): string {
  const bytes = encodeCharset(text, charset);
  if (transfer === 'base64') return (bytes.toString('base64').match(/.{1,76}/g) ?? []).join('\n');
  if (transfer === 'quoted-printable') return qpEncode(bytes);
  return bytes.toString('latin1');
}

export interface Leaf {
  type: string;
  charset?: string;
  transfer?: Transfer;
  body: string;
  extra?: string[];
}

export function leaf(p: Leaf): string {
  const ct = p.charset ? `${p.type}; charset="${p.charset}"` : p.type;
  const head = [`Content-Type: ${ct}`];
  if (p.transfer) head.push(`Content-Transfer-Encoding: ${p.transfer}`);
  if (p.extra) head.push(...p.extra);
  return `${head.join('\n')}\n\n${p.transfer ? encodeBody(p.body, p.charset ?? 'utf-8', p.transfer) : p.body}`;
}

/** A multipart body (without the outer headers): its parts are complete MIME entities. */
export function multipart(boundary: string, parts: string[], preamble = ''): string {
  return `${preamble ? `${preamble}\n\n` : ''}${parts.map((p) => `--${boundary}\n${p}\n`).join('')}--${boundary}--\n`;
}

/** Content-Type header value of a multipart entity. */
export const multipartType = (subtype: string, boundary: string, extra = '') => `multipart/${subtype};${extra ? ` ${extra};` : ''} boundary="${boundary}"`;

/** RFC 2047 encoded word (B or Q) of a text in a charset. */
export function encodedWord(text: string, charset: string, q: 'B' | 'Q' = 'B'): string {
  if (/^[\x20-\x7e]*$/.test(text)) return text;
  const bytes = encodeCharset(text, charset);
  if (q === 'B') return `=?${charset}?B?${bytes.toString('base64')}?=`;
  let s = '';
  for (const b of bytes) s += (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) ? String.fromCharCode(b) : b === 32 ? '_' : `=${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return `=?${charset}?Q?${s}?=`;
}

/** A whole message: header lines, a blank line, the body; converted to the line ending. */
export function message(headers: string[], body: string, eol: Eol): Buffer {
  const text = `${headers.join('\n')}\n\n${body}`.replace(/\r\n/g, '\n');
  return Buffer.from(eol === '\n' ? text : text.replace(/\n/g, '\r\n'), 'latin1');
}
