import { createHmac, randomBytes } from 'node:crypto';
import { EVENT_FIELDS, type EventType } from '../events/catalogue.ts';

// What a receiver gets (contract §6, §7): the envelope {id, event, timestamp, webhookId, data},
// signed with HMAC-SHA256 over the exact body bytes.


/** The event's fields in the catalogue's order, then any others in their own. */
function ordered(event: EventType, data: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const fields: readonly string[] = EVENT_FIELDS[event] ?? [];
  for (let i = 0; i < fields.length; i++) {
    const k = fields[i];
    if (Object.hasOwn(data, k)) out[k] = data[k];
  }
  for (const k in data) if (Object.hasOwn(data, k) && !Object.hasOwn(out, k)) out[k] = data[k];
  return out;
}

export interface EnvelopeInput {
  eventId: string;
  event: EventType;
  /** A Date, or already as ISO 8601 in UTC with milliseconds. */
  eventCreatedAt: Date | string;
  webhookId: string;
  data: Record<string, unknown>;
}

/** The request body: the same event id on every attempt, so receivers can dedupe. */
export function envelope(e: EnvelopeInput): Buffer {
  return Buffer.from(
    JSON.stringify({ id: e.eventId, event: e.event, timestamp: typeof e.eventCreatedAt === 'string' ? e.eventCreatedAt : e.eventCreatedAt.toISOString(), webhookId: e.webhookId, data: ordered(e.event, e.data) }),
    'utf8',
  );
}

/** Lowercase hex HMAC-SHA256 of the raw body, keyed with the signing secret's UTF-8 bytes. */
export function signature(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export function deliveryHeaders(opts: { secret: string; body: Buffer; eventId: string; at: Date; attempt: number }): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'mailgate-webhooks/1',
    'x-service-signature': signature(opts.secret, opts.body),
    'x-service-event-id': opts.eventId,
    'x-service-timestamp': String(Math.floor(opts.at.getTime() / 1000)),
    'x-service-attempt': String(opts.attempt),
  };
}
