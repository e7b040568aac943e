import { EVENT_TYPES, type EventType } from '../events/catalogue.ts';

// Rows of the webhook tables (created by 0001_initial). The module reads and writes them with
// hand-written SQL in repository.ts; these are the shapes it works with.

export { EVENT_TYPES };

export type WebhookStatus = 'active' | 'disabled';
export type DeliveryState = 'pending' | 'delivered' | 'failed';

export interface Webhook {
  id: string;
  workspaceId: string;
  url: string;
  events: EventType[];
  status: WebhookStatus;
  /** AES-256-GCM ciphertext of the signing secret (crypto.encrypt). */
  signingSecretEnc: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface Attempt {
  at: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

export interface Delivery {
  id: string;
  webhookId: string;
  eventId: string;
  event: EventType;
  state: DeliveryState;
  attempts: Attempt[];
  nextAttemptAt: Date | null;
  createdAt: Date;
}

/**
 * A fan-out batch leased to this worker (a webhook_fanouts row, 0019): the events it took, whose
 * deliveries are written with their first outcomes. The worker counts the outcomes not yet
 * written; the batch's row goes with the last of them, unless one of its deliveries will not be
 * written (`broken`: its outcome could not be recorded, or it was given back), and then the row
 * stays until its lease runs out and the batch is taken again.
 */
export interface FanOutLease {
  id: string;
  leaseUntil: Date;
  unwritten: number;
  broken: boolean;
}

/**
 * What a first attempt's outcome needs to write its delivery (it has no row before; its
 * workspace is the webhook's).
 */
export interface FreshDelivery {
  fanOut: FanOutLease;
  webhookId: string;
  eventId: string;
  /** When the event was fanned out: the delivery's createdAt. */
  createdAt: Date;
}

/** A delivery claimed by a dispatcher, with everything one attempt needs. */
export interface ClaimedDelivery {
  id: string;
  /** Attempts made before this one. */
  attemptCount: number;
  /**
   * The claim's lease; also the fencing token its outcome is recorded with. For a fresh delivery,
   * its fan-out batch's lease.
   */
  leaseUntil: Date;
  /** Set for a first attempt: the delivery has no row until its outcome writes one. */
  fresh?: FreshDelivery;
  webhookId: string;
  url: string;
  signingSecretEnc: string;
  eventId: string;
  event: EventType;
  data: Record<string, unknown>;
  /** When the event happened: ISO 8601 in UTC with milliseconds, as the envelope's `timestamp`. */
  eventCreatedAt: string;
}
