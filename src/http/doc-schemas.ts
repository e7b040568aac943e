import { z } from 'zod';

// Building blocks of the documented (response) schemas: what the JSON Schema of the OpenAPI
// document says where zod's own output would say less. They validate nothing at run time:
// responses are not parsed, and lenient request items are checked by their services.

/** A timestamp as every response writes it (Date.toISOString(), UTC). */
export const isoTime = z.string().meta({ format: 'date-time', examples: ['2026-11-24T09:30:00.000Z'] });

/** An email address as stored (any case, trimmed). */
export const emailText = z.string().meta({ format: 'email' });

/**
 * An item the service validates itself so that a bad one is a 422 naming its index (the
 * contract's bulk and suppression errors) rather than a 400: any JSON at run time, documented
 * as the shape a client should send.
 */
export function checkedByService(shape: Record<string, unknown>) {
  return z.unknown().meta(shape);
}
