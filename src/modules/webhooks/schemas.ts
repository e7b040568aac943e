import { z } from 'zod';
import { queryInt } from '../../shared/query.ts';
import { EVENT_TYPES } from './entities.ts';
import { isoTime } from '../../http/doc-schemas.ts';
import { WEBHOOK_URL_MAX } from '../../adapters/http-client.ts';

// Request and response schemas of the webhook routes (they also generate /v1/openapi.json).
// Event names are checked by the service, not here: an unknown one is 422, not 400.

const url = z
  .string()
  .min(1, 'must not be empty')
  .max(WEBHOOK_URL_MAX, `at most ${WEBHOOK_URL_MAX} characters`)
  .describe(`https URL of the receiver (at most ${WEBHOOK_URL_MAX} characters, also once normalized: percent-encoded, host lowercased)`);
const events = z
  .array(z.string())
  .min(1, 'must list at least one event')
  .describe(`subscribed event types: ${EVENT_TYPES.join(', ')}`);

export const createWebhookBody = z.strictObject({ url, events });

export const patchWebhookBody = z.strictObject({
  url: url.optional(),
  events: events.optional(),
  status: z.enum(['active', 'disabled']).optional().describe('a disabled webhook gets no new deliveries and its pending ones wait'),
});

const webhookId = z.string().describe('a webhook id');
export const webhookParams = z.object({ webhookId });
export const deliveryParams = z.object({ webhookId, deliveryId: z.string().describe('a delivery id') });

export const pageQuery = z.strictObject({
  limit: queryInt(1, 200, 50),
  offset: queryInt(0, undefined, 0),
});

export const deliveriesQuery = pageQuery.extend({ state: z.enum(['pending', 'delivered', 'failed']).optional() });

const webhookFields = {
  id: z.string(),
  url: z.string(),
  events: z.array(z.enum(EVENT_TYPES)),
  status: z.enum(['active', 'disabled']),
  createdAt: isoTime,
  updatedAt: isoTime,
};
export const webhookView = z.object(webhookFields).meta({ id: 'Webhook' });

export const webhookWithSecret = z
  .object({ ...webhookFields, signingSecret: z.string().describe('HMAC-SHA256 key of X-Service-Signature; shown only in this response') })
  .meta({ id: 'WebhookWithSecret' });

export const attemptView = z.object({
  at: isoTime,
  statusCode: z.number().int().nullable().describe("the receiver's status code; null when it did not answer"),
  error: z.string().nullable().describe("why the attempt failed: the receiver's answer when it gave one (`receiver answered 500`), else the timeout, refused address, TLS or connection error; null on success"),
  durationMs: z.number().int(),
}).meta({ id: 'WebhookAttempt' });

export const deliveryView = z.object({
  id: z.string(),
  webhookId: z.string(),
  eventId: z.string().describe('the event id, the same in every attempt (the body\'s id)'),
  event: z.enum(EVENT_TYPES),
  state: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.array(attemptView),
  nextAttemptAt: isoTime.nullable().describe('when the next attempt is due; null when none is scheduled (or the webhook is disabled)'),
  createdAt: isoTime,
}).meta({ id: 'WebhookDelivery' });

export const page = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), total: z.number().int(), hasMore: z.boolean() });
