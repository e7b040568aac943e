import { z } from 'zod';
import { EVENT_TYPES } from './entities.ts';

// Request and response schemas of the webhook routes (they also generate /v1/openapi.json).
// Event names are checked by the service, not here: an unknown one is 422, not 400.

const url = z.string().min(1, 'must not be empty').max(2048, 'at most 2048 characters').describe('https URL of the receiver');
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

export const idParams = z.object({ id: z.string() });
export const deliveryParams = z.object({ id: z.string(), deliveryId: z.string() });

export const pageQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  offset: z.coerce.number().int().min(0).default(0),
});

export const deliveriesQuery = pageQuery.extend({ state: z.enum(['pending', 'delivered', 'failed']).optional() });

export const webhookView = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.enum(EVENT_TYPES)),
  status: z.enum(['active', 'disabled']),
  createdAt: z.string(),
  updatedAt: z.string(),
});

export const webhookWithSecret = webhookView.extend({
  signingSecret: z.string().describe('HMAC-SHA256 key of X-Service-Signature; shown only in this response'),
});

export const attemptView = z.object({
  at: z.string(),
  statusCode: z.number().int().nullable().describe("the receiver's status code; null when it did not answer"),
  error: z.string().nullable().describe('why the attempt failed without an answer (timeout, refused address, TLS, connection)'),
  durationMs: z.number().int(),
});

export const deliveryView = z.object({
  id: z.string(),
  webhookId: z.string(),
  eventId: z.string().describe('the event id, the same in every attempt (the body\'s id)'),
  event: z.enum(EVENT_TYPES),
  state: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.array(attemptView),
  nextAttemptAt: z.string().nullable().describe('when the next attempt is due; null when none is scheduled (or the webhook is disabled)'),
  createdAt: z.string(),
});

export const page = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), total: z.number().int(), hasMore: z.boolean() });
