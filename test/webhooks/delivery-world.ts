// The world of the webhook delivery tests (test/webhooks/{retries,workers,deletions,plans,ssrf}.test.ts):
// webhookWorld with a database connection and a dispatcher, each test starting with no webhooks.
// Call it inside a describe: it registers its own hooks.
//
// Retry delays are 1s,2s,3s,4s,5s and the timeout 400 ms (see webhookWorld). The clock is a
// ManualClock: tests move it instead of sleeping.
import pg from 'pg';
import { claimDue, fanOut, viaOrm } from '../../src/modules/webhooks/repository.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { webhookWorld, type WebhookWorld } from './helpers.ts';

export const DELAYS = [1_000, 2_000, 3_000, 4_000, 5_000];

export interface DeliveryWorld {
  w: WebhookWorld;
  db: pg.Client;
  dispatcher: WebhookDispatcher;
  oneHookOneEvent(events?: Parameters<WebhookWorld['register']>[1]): Promise<{ key: string; workspaceId: string; hook: { id: string; signingSecret: string; url: string }; eventId: string }>;
  attemptsOf(key: string, hookId: string): Promise<any>;
  staleClaim(): ReturnType<typeof staleClaimOf>;
}

export function deliveryWorld(): DeliveryWorld {
  const d = {} as DeliveryWorld;
  before(async () => {
    d.w = await webhookWorld();
    d.db = new pg.Client({ connectionString: d.w.app.databaseUrl });
    await d.db.connect();
    d.dispatcher = d.w.dispatcher();
  });
  after(async () => {
    await d.db.end();
    await d.w.close();
  });
  beforeEach(() => d.w.receiver.reset());
  // Each test starts with no webhooks and no fan-out batches, so nothing scheduled by one test
  // fires in the next.
  afterEach(async () => {
    await d.db.query('delete from webhooks');
    await d.db.query('delete from webhook_fanouts');
  });
  d.oneHookOneEvent = async (events = ['message.sent']) => {
    const { key, workspaceId } = await d.w.workspace();
    const hook = await d.w.register(key, events);
    const eventId = await d.w.emit(workspaceId, events[0], { messageId: 'msg_1' });
    return { key, workspaceId, hook, eventId };
  };
  d.attemptsOf = async (key, hookId) => (await d.w.deliveries(key, hookId))[0];
  d.staleClaim = () => staleClaimOf(d);
  return d;
}

/**
 * One due delivery (fanned out without a lease, as after a first failed attempt) claimed by a
 * first worker with a 1 s lease that runs out, then claimed by a second worker; `outcome` builds
 * an outcome of it for either worker's lease.
 */
async function staleClaimOf(d: DeliveryWorld) {
  const { key, hook } = await d.oneHookOneEvent();
  const db2 = viaOrm(d.w.app.deps.orm.em.fork());
  const t0 = d.w.clock.now();
  await fanOut(db2, t0, 10);
  const [first] = await claimDue(db2, t0, new Date(t0.getTime() + 1_000), 10);
  const t1 = new Date(t0.getTime() + 2_000);
  const [second] = await claimDue(db2, t1, new Date(t1.getTime() + 60_000), 10);
  const outcome = (lease: Date, at: Date, statusCode: number, state: 'delivered' | 'pending' = 'delivered') => ({
    deliveryId: first.id,
    leaseUntil: lease,
    attemptCount: 0,
    attempt: { at, statusCode, error: statusCode >= 300 ? `receiver answered ${statusCode}` : null, durationMs: 5 },
    state,
    nextAttemptAt: state === 'pending' ? new Date(t1.getTime() + 1_000) : null,
  });
  return { key, hook, db2, t0, t1, first, second, outcome };
}
