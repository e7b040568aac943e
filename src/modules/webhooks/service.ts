import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { ApiError, type FieldError } from '../../shared/errors.ts';
import { newId } from '../../adapters/ids.ts';
import { parseWebhookUrl, checkWebhookHost } from '../../adapters/http-client.ts';
import type { Deps } from '../../deps.ts';
import { holdOutbox, type EventType } from '../events/outbox.ts';
import { EVENT_TYPES, type Delivery, type DeliveryState, type Webhook } from './entities.ts';
import { newSigningSecret } from './payload.ts';
import type { createWebhookBody, patchWebhookBody } from './schemas.ts';
import {
  insertWebhook,
  findWebhook,
  listWebhooks,
  saveWebhook,
  deleteWebhook,
  holdDeliveries,
  releaseHeldDeliveries,
  listDeliveries,
  findDelivery,
  scheduleRetry,
  notifyWebhookChanges,
} from './repository.ts';
import { transaction } from '../../db/transaction.ts';

export function webhookView(w: Webhook) {
  return { id: w.id, url: w.url, events: w.events, status: w.status, createdAt: w.createdAt.toISOString(), updatedAt: w.updatedAt.toISOString() };
}

export function deliveryView(d: Delivery) {
  return {
    id: d.id,
    webhookId: d.webhookId,
    eventId: d.eventId,
    event: d.event,
    state: d.state,
    attempts: d.attempts.map((a) => ({ at: a.at.toISOString(), statusCode: a.statusCode, error: a.error, durationMs: a.durationMs })),
    nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
    createdAt: d.createdAt.toISOString(),
  };
}

/** Known event names, deduplicated in their given order; unknown ones are 422. */
function checkEvents(names: string[]): EventType[] {
  const errors: FieldError[] = [];
  names.forEach((value, index) => {
    if (!(EVENT_TYPES as readonly string[]).includes(value))
      errors.push({ index, field: 'events', value, message: `unknown event type; expected one of ${EVENT_TYPES.join(', ')}` });
  });
  if (errors.length) throw new ApiError(422, 'validation_failed', `${errors.length} unknown event type(s)`, { errors });
  return [...new Set(names)] as EventType[];
}

function urlError(value: string, err: unknown): ApiError {
  const message = `url ${(err as Error).message}`;
  return ApiError.invalid(message, { errors: [{ field: 'url', value, message }] });
}

/**
 * Webhook registrations and their delivery log. Delivery itself is the WebhookDispatcher's:
 * this service only writes what it reads (registrations, held/released deliveries, retries).
 */
export class WebhookService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  /** Validation order: URL syntax (400), event names (422), then the address check (400). */
  private parseUrl(raw: string): URL {
    try {
      return parseWebhookUrl(raw);
    } catch (err) {
      throw urlError(raw, err);
    }
  }

  private async checkHost(raw: string, url: URL): Promise<void> {
    try {
      await checkWebhookHost(url, { allowPrivate: this.deps.config.webhookAllowPrivate });
    } catch (err) {
      throw urlError(raw, err);
    }
  }

  async create(workspaceId: string, input: z.output<typeof createWebhookBody>) {
    const url = this.parseUrl(input.url);
    const events = checkEvents(input.events);
    await this.checkHost(input.url, url);
    const now = this.deps.clock.now();
    const signingSecret = newSigningSecret();
    const webhook: Webhook = {
      id: newId('whk'),
      workspaceId,
      url: url.href,
      events,
      status: 'active',
      signingSecretEnc: this.deps.crypto.encrypt(signingSecret),
      createdAt: now,
      updatedAt: now,
    };
    await transaction(this.em, async (em) => {
      // Ordered with the event writers (events/outbox.ts): an event written after this commits sees it.
      await holdOutbox(em);
      await insertWebhook(em, webhook);
    });
    return { ...webhookView(webhook), signingSecret };
  }

  async list(workspaceId: string, limit: number, offset: number) {
    const { rows, total } = await listWebhooks(this.em, workspaceId, limit, offset);
    return { data: rows.map(webhookView), total, hasMore: offset + rows.length < total };
  }

  async get(workspaceId: string, id: string) {
    return webhookView(await this.require(this.em, workspaceId, id));
  }

  /**
   * url, events and status. Disabling holds the webhook's pending deliveries, and those of
   * events it was owed but not yet fanned out (the fan-out writes them held); events that
   * happen while it is disabled are not owed to it, ever. Enabling makes the held ones due now.
   */
  async update(workspaceId: string, id: string, input: z.output<typeof patchWebhookBody>) {
    const url = input.url !== undefined ? this.parseUrl(input.url) : undefined;
    const events = input.events !== undefined ? checkEvents(input.events) : undefined;
    // The address check may wait on DNS: before the row lock, not under it.
    if (url) await this.checkHost(input.url!, url);
    return transaction(this.em, async (em) => {
      // A change of what the webhook is owed is ordered with the event writers (events/outbox.ts
      // holdOutbox), before the row lock.
      if (events || input.status) await holdOutbox(em);
      const webhook = await this.require(em, workspaceId, id, true);
      const now = this.deps.clock.now();
      if (url) webhook.url = url.href;
      if (events) webhook.events = events;
      const statusChanged = input.status !== undefined && input.status !== webhook.status;
      if (statusChanged) {
        webhook.status = input.status!;
        if (input.status === 'disabled') await holdDeliveries(em, id, now);
        else await releaseHeldDeliveries(em, id, now);
      }
      webhook.updatedAt = now;
      await saveWebhook(em, webhook);
      // Attempts a worker holds and has not started stop at once (disabled) or use the new URL.
      if (url || statusChanged) await notifyWebhookChanges(em, [id]);
      return webhookView(webhook);
    });
  }

  /**
   * Deletes the registration with its deliveries and attempts; nothing more is sent to it (an
   * attempt whose POST has started finishes, and writes nothing).
   */
  async remove(workspaceId: string, id: string): Promise<void> {
    const deleted = await transaction(this.em, async (em) => {
      if (!(await deleteWebhook(em, workspaceId, id))) return false;
      // Attempts a worker holds and has not started do not go out.
      await notifyWebhookChanges(em, [id]);
      return true;
    });
    if (!deleted) throw this.notFound(id);
  }

  /** A new signing secret, effective for every attempt from now on; the old one stops at once. */
  async rotateSecret(workspaceId: string, id: string) {
    return transaction(this.em, async (em) => {
      const webhook = await this.require(em, workspaceId, id, true);
      const signingSecret = newSigningSecret();
      webhook.signingSecretEnc = this.deps.crypto.encrypt(signingSecret);
      webhook.updatedAt = this.deps.clock.now();
      await saveWebhook(em, webhook);
      // Attempts a worker holds and has not started are signed with the new secret.
      await notifyWebhookChanges(em, [id]);
      return { ...webhookView(webhook), signingSecret };
    });
  }

  async deliveries(workspaceId: string, id: string, opts: { state?: DeliveryState; limit: number; offset: number }) {
    await this.require(this.em, workspaceId, id);
    const { rows, total } = await listDeliveries(this.em, workspaceId, id, opts);
    return { data: rows.map(deliveryView), total, hasMore: opts.offset + rows.length < total };
  }

  /** Schedules an immediate attempt of one delivery (409 while the webhook is disabled). */
  async retry(workspaceId: string, id: string, deliveryId: string) {
    return transaction(this.em, async (em) => {
      const webhook = await this.require(em, workspaceId, id, true);
      // An unknown delivery is 404 whatever the webhook's state; a known one of a disabled webhook 409.
      if (webhook.status !== 'active') {
        if (!(await findDelivery(em, workspaceId, id, deliveryId))) throw ApiError.notFound('delivery', `delivery ${deliveryId} not found`);
        throw new ApiError(409, 'webhook_disabled', 'the webhook is disabled: enable it before retrying its deliveries');
      }
      if (!(await scheduleRetry(em, workspaceId, id, deliveryId, this.deps.clock.now()))) throw ApiError.notFound('delivery', `delivery ${deliveryId} not found`);
      return deliveryView((await findDelivery(em, workspaceId, id, deliveryId))!);
    });
  }

  private async require(em: EntityManager, workspaceId: string, id: string, forUpdate = false): Promise<Webhook> {
    const webhook = await findWebhook(em, workspaceId, id, forUpdate);
    if (!webhook) throw this.notFound(id);
    return webhook;
  }

  private notFound(id: string): ApiError {
    return ApiError.notFound('webhook', `webhook ${id} not found`);
  }
}
