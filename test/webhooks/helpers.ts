import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { startTestApp, seedWorkspace, ManualClock, type TestApp } from '../support/harness.ts';
import { HttpsReceiver, testCertificates, type ReceivedRequest } from '../support/https.ts';
import { WebhookDispatcher, type WebhookDispatchOptions } from '../../src/modules/webhooks/dispatcher.ts';
import { recordEvent, type EventType } from '../../src/modules/events/outbox.ts';
import { anyEvent } from '../support/events.ts';
import type { Deps } from '../../src/deps.ts';

/** What a receiver does to check a delivery: HMAC-SHA256 of the raw bytes, constant-time compare. */
export function verifySignature(req: ReceivedRequest, secret: string): boolean {
  const expected = createHmac('sha256', secret).update(req.body).digest('hex');
  const got = String(req.headers['x-service-signature'] ?? '');
  return got.length === expected.length && timingSafeEqual(Buffer.from(got), Buffer.from(expected));
}

export interface WebhookWorld {
  app: TestApp;
  clock: ManualClock;
  receiver: HttpsReceiver;
  /** A dispatcher trusting the test CA, on the app's deps (or `deps`). */
  dispatcher(opts?: WebhookDispatchOptions, deps?: Deps): WebhookDispatcher;
  workspace(): Promise<{ key: string; workspaceId: string }>;
  register(key: string, events: EventType[], path?: string): Promise<{ id: string; signingSecret: string; url: string }>;
  /** Records an event a webhook of the workspace subscribes to; its id (throws when none does: then nothing is written, events/outbox.ts). */
  emit(workspaceId: string, type: EventType, data: Record<string, unknown>): Promise<string>;
  /** Records an event as the daemon does; its id, or null when no webhook subscribes to it. */
  record(workspaceId: string, type: EventType, data: Record<string, unknown>): Promise<string | null>;
  deliveries(key: string, webhookId: string, query?: string): Promise<any[]>;
  close(): Promise<void>;
}

/**
 * The app on a fresh database with a manual clock, private addresses allowed (the receiver is
 * on 127.0.0.1), short retry delays and timeout, and a real HTTPS receiver.
 */
export async function webhookWorld(config: Record<string, unknown> = {}): Promise<WebhookWorld> {
  const clock = new ManualClock('2026-05-04T10:00:00.000Z');
  const receiver = new HttpsReceiver();
  await receiver.start();
  const app = await startTestApp({
    clock,
    config: { webhookAllowPrivate: true, webhookRetryDelays: '1s,2s,3s,4s,5s', webhookTimeout: '400ms', ...config },
  });
  const made: WebhookDispatcher[] = [];
  const record = (workspaceId: string, type: EventType, data: Record<string, unknown>) =>
    app.deps.orm.em.fork().transactional((em) => recordEvent(em, workspaceId, anyEvent(type, data), clock.now()));
  return {
    app,
    clock,
    receiver,
    dispatcher(opts = {}, deps = app.deps) {
      // lingerMs 0: a round ends as soon as it has nothing to do, so a test can await it.
      const d = new WebhookDispatcher(deps, { ca: testCertificates().ca, lingerMs: 0, ...opts });
      made.push(d);
      return d;
    },
    async workspace() {
      const { adminKey, workspace } = await seedWorkspace(app);
      return { key: adminKey, workspaceId: workspace.id };
    },
    async register(key, events, path = '/hook') {
      const res = await app.request('POST', '/v1/webhooks', { key, body: { url: receiver.url(path), events } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body;
    },
    async emit(workspaceId, type, data) {
      const id = await record(workspaceId, type, data);
      if (id === null) throw new Error(`no webhook of workspace ${workspaceId} subscribes to ${type}: the event was not written`);
      return id;
    },
    record,
    async deliveries(key, webhookId, query = '') {
      const res = await app.request('GET', `/v1/webhooks/${webhookId}/deliveries${query}`, { key });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data;
    },
    async close() {
      for (const d of made) await d.close();
      await app.close();
      await receiver.stop();
    },
  };
}
