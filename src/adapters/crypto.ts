import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import path from 'node:path';
import { decodeKey, ConfigError } from '../config/index.ts';

/**
 * Secret-key cryptography: AES-256-GCM for stored credentials, HMAC for signed tokens.
 * Ciphertexts are `v1.<iv>.<tag>.<data>` in base64url so the format can evolve.
 */
export class Crypto {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('secret key must be 32 bytes');
  }

  encrypt(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return ['v1', iv.toString('base64url'), tag.toString('base64url'), data.toString('base64url')].join('.');
  }

  /** Throws when the value was not encrypted with this key (or was tampered with). */
  decrypt(value: string): string {
    const [v, iv, tag, data] = value.split('.');
    if (v !== 'v1' || !iv || !tag || data === undefined) throw new Error('unrecognised ciphertext');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
  }

  /** A URL-safe signed token carrying `payload` (used by tracking and unsubscribe links). */
  sign(payload: string): string {
    const mac = createHmac('sha256', this.key).update(payload).digest('base64url').slice(0, 22);
    return `${Buffer.from(payload).toString('base64url')}.${mac}`;
  }

  /** HMAC-SHA256 of `payload` under the secret key, for `purpose`: ids derived, yet unguessable. */
  digest(purpose: string, payload: string): Buffer {
    return createHmac('sha256', this.key).update(`${purpose}\u0000${payload}`).digest();
  }

  /**
   * The payload of a token made by sign(), or null when it is forged or malformed. Only sign()'s
   * own spelling passes: Node's base64url decoder skips characters outside the alphabet and
   * padding, so without the round trip a valid token had many working spellings (a `~` or `=`
   * inserted, text after a second dot).
   */
  verify(token: string): string | null {
    const parts = token.split('.');
    if (parts.length !== 2) return null;
    const [body, mac] = parts;
    if (!body || !mac) return null;
    const payload = Buffer.from(body, 'base64url').toString();
    if (Buffer.from(payload).toString('base64url') !== body) return null;
    const expected = createHmac('sha256', this.key).update(payload).digest('base64url').slice(0, 22);
    const a = Buffer.from(mac);
    const b = Buffer.from(expected);
    return a.length === b.length && timingSafeEqual(a, b) ? payload : null;
  }
}

/** API keys: high-entropy random strings; only their SHA-256 is stored. */
export function generateApiKey(): string {
  return `mgk_${randomBytes(32).toString('base64url')}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/**
 * The secret key from MAILGATE_SECRET_KEY, else from dataDir/secret.key, generated there
 * (mode 0600) on first use.
 */
export function loadSecretKey(configured: string | undefined, dataDir: string): Buffer {
  if (configured) {
    const k = decodeKey(configured);
    if (!k) throw new ConfigError('invalid setting MAILGATE_SECRET_KEY: 32 random bytes, hex or base64');
    return k;
  }
  const file = path.join(dataDir, 'secret.key');
  if (existsSync(file)) {
    const k = decodeKey(readFileSync(file, 'utf8'));
    if (!k) throw new ConfigError(`${file} does not hold a valid 32-byte key`);
    return k;
  }
  mkdirSync(dataDir, { recursive: true });
  const k = randomBytes(32);
  writeFileSync(file, k.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return k;
}
