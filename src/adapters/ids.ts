import { randomBytes } from 'node:crypto';

// Opaque, prefixed ids (contract §3): cmp_, lead_, rpl_, whk_, snd_, pool_, sdr_, thr_, drf_, fup_,
// hof_, msg_ and our own internal ones. 16 random bytes in base32 (lowercase, no padding).
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

export type IdPrefix =
  | 'ws' | 'key' | 'snd' | 'pool' | 'cmp' | 'step' | 'lead' | 'enr' | 'msg' | 'inb' | 'rpl'
  | 'whk' | 'evt' | 'dlv' | 'fan' | 'mbx' | 'sdr' | 'thr' | 'tmsg' | 'hof' | 'drf' | 'fur' | 'fup' | 'kb' | 'rsg';

// Random bytes drawn 4 KB at a time: one randomBytes call per 256 ids instead of one per id
// (the sending hot path makes two ids per message).
let pool = Buffer.alloc(0);
let offset = 0;

function random16(): Buffer {
  if (offset + 16 > pool.length) {
    pool = randomBytes(4096);
    offset = 0;
  }
  const bytes = pool.subarray(offset, offset + 16);
  offset += 16;
  return bytes;
}

export function newId(prefix: IdPrefix): string {
  return encode(prefix, random16());
}

/** The id of `prefix` made from the first 16 bytes of `digest` (an id derived, not drawn). */
export function idFromDigest(prefix: IdPrefix, digest: Buffer): string {
  if (digest.length < 16) throw new Error('idFromDigest needs at least 16 bytes');
  return encode(prefix, digest.subarray(0, 16));
}

/** `n` new ids at once (one call for the random bytes). */
export function newIds(prefix: IdPrefix, n: number): string[] {
  const all = randomBytes(16 * n);
  return Array.from({ length: n }, (_, i) => encode(prefix, all.subarray(16 * i, 16 * i + 16)));
}

// The same 32 symbols in ascending byte order, so that ids made by orderedIds sort (as text, in
// the C and the usual linguistic collations) in the order they were made.
const SORTED_ALPHABET = '234567abcdefghijklmnopqrstuvwxyz';
let counter = randomBytes(4).readUInt32BE(0);

/**
 * `n` new ids that sort in creation order: 6 bytes of the time in milliseconds, a 4-byte
 * per-process counter and 6 random bytes, in the same 26-symbol form as newId. For the rows
 * written by the ten thousand (leads, enrollments): a primary key and the indexes led by it
 * grow at their right edge instead of at random places (docs/benchmarks.md, issue 20). Not
 * unguessable: nothing uses these ids as secrets (tracking and unsubscribe tokens are signed).
 */
export function orderedIds(prefix: IdPrefix, n: number): string[] {
  const random = randomBytes(6 * n);
  const ms = Date.now();
  const out = new Array<string>(n);
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(ms, 0, 6);
  for (let i = 0; i < n; i++) {
    counter = (counter + 1) >>> 0;
    bytes[6] = counter >>> 24;
    bytes[7] = (counter >>> 16) & 0xff;
    bytes[8] = (counter >>> 8) & 0xff;
    bytes[9] = counter & 0xff;
    for (let j = 0; j < 6; j++) bytes[10 + j] = random[6 * i + j];
    out[i] = encode(prefix, bytes, SORTED_CODES);
  }
  return out;
}

const ALPHABET_CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const SORTED_CODES = Uint8Array.from(SORTED_ALPHABET, (c) => c.charCodeAt(0));
// The symbols' char codes, reused by every call (26 for 16 bytes; one string made from them):
// appending them one by one to a string made 26 strings per id, 770 bytes of garbage an id and
// 15 MB per 10,000-lead request (docs/benchmarks.md, session 54).
const codes: number[] = [];

function encode(prefix: string, bytes: Uint8Array, alphabet = ALPHABET_CODES): string {
  // Indexed, not iterated: ten thousand ids per bulk request, two per message sent.
  let bits = 0;
  let value = 0;
  let n = 0;
  for (let i = 0; i < bytes.length; i++) {
    value = ((value << 8) | bytes[i]) & 0xfff;
    bits += 8;
    while (bits >= 5) {
      codes[n++] = alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) codes[n++] = alphabet[(value << (5 - bits)) & 31];
  codes.length = n;
  return `${prefix}_${String.fromCharCode.apply(null, codes)}`;
}
