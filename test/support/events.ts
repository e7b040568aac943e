import type { EventType, OutboxEvent } from '../../src/modules/events/catalogue.ts';

/**
 * An outbox event with an arbitrary payload. Delivery tests write partial payloads on purpose:
 * the webhook dispatcher forwards whatever the outbox holds, and what it holds is not its
 * concern (producers use the builders of events/catalogue.ts).
 */
export function anyEvent(type: EventType, data: Record<string, unknown>): OutboxEvent {
  return { type, data } as unknown as OutboxEvent;
}
