import { randomBytes } from 'node:crypto';

// Opaque, prefixed ids (contract §3): cmp_, lead_, rpl_, whk_, snd_, pool_, sdr_, thr_, drf_, fup_,
// hof_, msg_ and our own internal ones. 16 random bytes in base32 (lowercase, no padding).
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

export type IdPrefix =
  | 'ws' | 'key' | 'snd' | 'pool' | 'cmp' | 'step' | 'lead' | 'enr' | 'msg' | 'inb' | 'rpl'
  | 'whk' | 'evt' | 'dlv' | 'mbx' | 'sdr' | 'thr' | 'tmsg' | 'hof' | 'drf' | 'fur' | 'fup' | 'kb';

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

function encode(prefix: string, bytes: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return `${prefix}_${out}`;
}
