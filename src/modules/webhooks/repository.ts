import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId, orderedIds } from '../../adapters/ids.ts';
import { toDate } from '../../shared/time.ts';
import { lockOutboxForDeletion, owedWebhooksSql, type EventType } from '../events/outbox.ts';
import type { Attempt, ClaimedDelivery, Delivery, DeliveryState, FanOutLease, FreshDelivery, Webhook, WebhookStatus } from './entities.ts';

// Every query of the webhook tables. Registrations and the delivery log are scoped by workspace
// first; the dispatcher's statements (fan-out, claim, outcome) work across workspaces.

/**
 * Runs statements. The dispatcher passes its own pool of prepared, asynchronously committed
 * statements (db/statements.ts); anything else runs through the ORM's connection (viaOrm).
 */
export interface Statements {
  run<T = Record<string, unknown>>(name: string, text: string, params: unknown[]): Promise<T[]>;
}

export function viaOrm(em: EntityManager): Statements {
  return { run: <T>(_name: string, text: string, params: unknown[]) => sql<T>(em, text, params) };
}

interface WebhookRow {
  id: string;
  workspace_id: string;
  url: string;
  events: EventType[];
  status: WebhookStatus;
  signing_secret_enc: string;
  created_at: Date | string;
  updated_at: Date | string;
}

const WEBHOOK_COLUMNS = 'id, workspace_id, url, events, status, signing_secret_enc, created_at, updated_at';

function toWebhook(r: WebhookRow): Webhook {
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    url: r.url,
    events: r.events,
    status: r.status,
    signingSecretEnc: r.signing_secret_enc,
    createdAt: toDate(r.created_at),
    updatedAt: toDate(r.updated_at),
  };
}

export async function insertWebhook(em: EntityManager, w: Webhook): Promise<void> {
  await sql(em, `insert into webhooks (${WEBHOOK_COLUMNS}) values (?, ?, ?, ?::text[], ?, ?, ?, ?)`, [
    w.id,
    w.workspaceId,
    w.url,
    w.events,
    w.status,
    w.signingSecretEnc,
    w.createdAt,
    w.updatedAt,
  ]);
}

/** One webhook of the workspace; `forUpdate` locks it for the rest of the transaction. */
export async function findWebhook(em: EntityManager, workspaceId: string, id: string, forUpdate = false): Promise<Webhook | null> {
  const [row] = await sql<WebhookRow>(em, `select ${WEBHOOK_COLUMNS} from webhooks where id = ? and workspace_id = ?${forUpdate ? ' for update' : ''}`, [id, workspaceId]);
  return row ? toWebhook(row) : null;
}

/** Newest first (webhooks_workspace_idx). */
export async function listWebhooks(em: EntityManager, workspaceId: string, limit: number, offset: number): Promise<{ rows: Webhook[]; total: number }> {
  const rows = await sql<WebhookRow>(em, `select ${WEBHOOK_COLUMNS} from webhooks where workspace_id = ? order by created_at desc, id desc limit ? offset ?`, [
    workspaceId,
    limit,
    offset,
  ]);
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from webhooks where workspace_id = ?`, [workspaceId]);
  return { rows: rows.map(toWebhook), total: Number(n) };
}

export async function saveWebhook(em: EntityManager, w: Webhook): Promise<void> {
  await sql(em, `update webhooks set url = ?, events = ?::text[], status = ?, signing_secret_enc = ?, updated_at = ? where id = ? and workspace_id = ?`, [
    w.url,
    w.events,
    w.status,
    w.signingSecretEnc,
    w.updatedAt,
    w.id,
    w.workspaceId,
  ]);
}

/**
 * Deletes the webhook and its deliveries (call it in a transaction). Deleting the webhook row waits for
 * a fan-out that is writing deliveries for it (it holds the row FOR KEY SHARE) and then sees
 * them; no foreign key does this (0009).
 */
export async function deleteWebhook(em: EntityManager, workspaceId: string, id: string): Promise<boolean> {
  const rows = await sql(em, `delete from webhooks where id = ? and workspace_id = ? returning id`, [id, workspaceId]);
  if (!rows.length) return false;
  await deleteDeliveriesOf(em, [id]);
  return true;
}

/**
 * The first steps of deleting a workspace (call it in that transaction, before the delete):
 * takes locks in the fan-out's order, so the two cannot deadlock, and returns the workspace's
 * webhooks, whose deliveries the caller deletes after the workspace (deleteDeliveriesOf):
 * 0. the outbox table in the mode its delete needs (ROW EXCLUSIVE), first: a webhook change
 *    holds the outbox (SHARE, holdOutbox) before its webhook's row, so taken after the webhook
 *    rows it deadlocked with one; writers of events and the fan-out share this mode;
 * 1. the workspace row: no new webhook of it can be written from here on (its foreign key
 *    needs it); events keep none (0028): an outcome holding one of its messages still writes
 *    its event, and the caller deletes the events after the messages (deleteWorkspaceEvents);
 * 2. its events not fanned out yet (waiting for a fan-out that holds some of them, which then
 *    writes its deliveries and commits; later fan-outs skip them);
 * 3. its webhooks, whose ids are then complete.
 */
export async function lockWorkspaceWebhooks(em: EntityManager, workspaceId: string): Promise<string[]> {
  await lockOutboxForDeletion(em);
  await sql(em, `select id from workspaces where id = ? for update`, [workspaceId]);
  await sql(em, `select id from events where workspace_id = ? and fanned_out_at is null for update`, [workspaceId]);
  // in id order, as the fan-out, a retake and an outcome take them
  const hooks = await sql<{ id: string }>(em, `select id from webhooks where workspace_id = ? order by id for update`, [workspaceId]);
  return hooks.map((h) => h.id);
}

/** The channel the workers hear webhook changes on (WebhookDispatcher.listen). */
export const WEBHOOK_CHANNEL = 'mailgate_webhooks';

/**
 * Tells the workers that these webhooks changed (a new URL, secret or status) or were deleted,
 * so attempts they hold and have not started use the new values or do not go out
 * (WebhookDispatcher.changed). Call it in the change's transaction, after the change:
 * PostgreSQL sends the notification when (and only if) it commits, in commit order, and a
 * worker that hears it reads the change in any statement it starts from then on. The payload
 * carries what an attempt needs (status, URL, the secret's ciphertext, as stored; under 2.5 KB
 * with the 2,048-character URL limit, well below PostgreSQL's 8,000 bytes), or `deleted` for a
 * row gone, so a worker applies it without a query.
 */
export async function notifyWebhookChanges(em: EntityManager, ids: string[]): Promise<void> {
  if (!ids.length) return;
  await sql(
    em,
    `select pg_notify('${WEBHOOK_CHANNEL}', case when w.id is null then json_build_object('id', x.id, 'status', 'deleted')
                                         else json_build_object('id', w.id, 'status', w.status, 'url', w.url, 'secret', w.signing_secret_enc) end::text)
       from unnest(?::text[]) as x(id) left join webhooks w on w.id = x.id`,
    [ids],
  );
}

/** The deliveries of these webhooks (webhook_deliveries_webhook_idx), attempts and all. */
export async function deleteDeliveriesOf(em: EntityManager, webhookIds: string[]): Promise<void> {
  if (webhookIds.length) await sql(em, `delete from webhook_deliveries where webhook_id = any(?::text[])`, [webhookIds]);
}

/**
 * A disabled webhook's pending deliveries are held: no due time, so the claim (which reads
 * webhook_deliveries_due_idx) does not even see them. Enabling makes them due at once.
 */
export async function holdDeliveries(em: EntityManager, webhookId: string, now: Date): Promise<void> {
  await sql(em, `update webhook_deliveries set next_attempt_at = null, updated_at = ? where webhook_id = ? and state = 'pending' and next_attempt_at is not null`, [
    now,
    webhookId,
  ]);
}

export async function releaseHeldDeliveries(em: EntityManager, webhookId: string, now: Date): Promise<void> {
  await sql(em, `update webhook_deliveries set next_attempt_at = ?, updated_at = ? where webhook_id = ? and state = 'pending' and next_attempt_at is null`, [
    now,
    now,
    webhookId,
  ]);
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event: EventType;
  state: DeliveryState;
  next_attempt_at: Date | string | null;
  created_at: Date | string;
  attempts: Array<{ at: string; statusCode: number | null; error: string | null; durationMs: number }>;
}

function toDelivery(r: DeliveryRow): Delivery {
  return {
    id: r.id,
    webhookId: r.webhook_id,
    eventId: r.event_id,
    event: r.event,
    state: r.state,
    // In the order made; an attempt logged after its claim ran out can land after a later one.
    attempts: r.attempts
      .map((a): Attempt => ({ at: toDate(a.at), statusCode: a.statusCode, error: a.error, durationMs: a.durationMs }))
      .sort((x, y) => x.at.getTime() - y.at.getTime()),
    nextAttemptAt: r.next_attempt_at === null ? null : toDate(r.next_attempt_at),
    createdAt: toDate(r.created_at),
  };
}

// A disabled webhook's pending deliveries show no due time (held), including one whose retry
// outcome was written while the disable committed (the outcome read the webhook as active).
const DELIVERY_SELECT = `select d.id, d.webhook_id, d.event_id, e.type as event, d.state,
          case when w.status = 'active' then d.next_attempt_at end as next_attempt_at, d.created_at, d.attempts
   from webhook_deliveries d join events e on e.id = d.event_id join webhooks w on w.id = d.webhook_id`;

/** A webhook's deliveries, newest first (webhook_deliveries_webhook_idx), each with its attempts. */
export async function listDeliveries(
  em: EntityManager,
  workspaceId: string,
  webhookId: string,
  opts: { state?: DeliveryState; limit: number; offset: number },
): Promise<{ rows: Delivery[]; total: number }> {
  const filter = opts.state ? ' and d.state = ?' : '';
  const params = opts.state ? [webhookId, workspaceId, opts.state] : [webhookId, workspaceId];
  const rows = await sql<DeliveryRow>(em, `${DELIVERY_SELECT} where d.webhook_id = ? and d.workspace_id = ?${filter} order by d.created_at desc, d.id desc limit ? offset ?`, [
    ...params,
    opts.limit,
    opts.offset,
  ]);
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from webhook_deliveries d where d.webhook_id = ? and d.workspace_id = ?${filter}`, params);
  return { rows: rows.map(toDelivery), total: Number(n) };
}

export async function findDelivery(em: EntityManager, workspaceId: string, webhookId: string, id: string): Promise<Delivery | null> {
  const [row] = await sql<DeliveryRow>(em, `${DELIVERY_SELECT} where d.id = ? and d.webhook_id = ? and d.workspace_id = ?`, [id, webhookId, workspaceId]);
  return row ? toDelivery(row) : null;
}

/**
 * A manual retry: the delivery is pending and due now. A failed delivery gets one more attempt
 * (its automatic retries are used up); a pending one moves its next attempt forward; a
 * delivered one is sent again.
 *
 * The retry also ends any worker's claim on the delivery: an attempt in flight then only logs
 * its outcome (recordOutcomes' `late`), so it cannot overwrite the retry (a last failed attempt
 * would end the delivery `failed`, a pending one push it back to its schedule). The retry is a
 * further attempt after it, possibly while it is still running.
 */
export async function scheduleRetry(em: EntityManager, workspaceId: string, webhookId: string, id: string, now: Date): Promise<boolean> {
  const rows = await sql(
    em,
    `update webhook_deliveries set state = 'pending', next_attempt_at = ?, lease_until = null, lease_owner = null, updated_at = ? where id = ? and webhook_id = ? and workspace_id = ? returning id`,
    [now, now, id, webhookId, workspaceId],
  );
  return rows.length > 0;
}

/** Whether any event waits to be fanned out (events_pending_idx; no locks, no transaction). */
export async function hasPendingEvents(db: Statements): Promise<boolean> {
  const rows = await db.run('webhooks.pending', `select 1 from events where fanned_out_at is null limit 1`, []);
  return rows.length > 0;
}

/** What a fan-out or a claim reads to attempt a delivery: its webhook and its event. */
interface DeliveryTargetRow {
  webhook_id: string;
  url: string;
  signing_secret_enc: string;
  event_id: string;
  type: EventType;
  data: Record<string, unknown>;
  /** ISO 8601 in UTC with milliseconds (isoTime). */
  created_at: string;
}

/**
 * An event time column as the envelope writes it (Date#toISOString: UTC, milliseconds
 * truncated), made by PostgreSQL so the worker neither parses nor formats a date per delivery.
 */
function isoTime(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

function claimOf(r: DeliveryTargetRow, id: string, attemptCount: number, leaseUntil: Date, hook: Pick<DeliveryTargetRow, 'url' | 'signing_secret_enc'> = r): ClaimedDelivery {
  return {
    id,
    attemptCount,
    leaseUntil,
    webhookId: r.webhook_id,
    url: hook.url,
    signingSecretEnc: hook.signing_secret_enc,
    eventId: r.event_id,
    event: r.type,
    data: r.data,
    eventCreatedAt: r.created_at,
  };
}

/** A first attempt of a fan-out batch: its delivery (id made by the worker) has no row yet. */
function freshClaimOf(r: DeliveryTargetRow, id: string, batch: FanOutLease, fannedOutAt: Date, hook?: Pick<DeliveryTargetRow, 'url' | 'signing_secret_enc'>): ClaimedDelivery {
  const c = claimOf(r, id, 0, batch.leaseUntil, hook);
  c.fresh = { fanOut: batch, webhookId: r.webhook_id, eventId: r.event_id, createdAt: fannedOutAt };
  return c;
}

/**
 * The webhooks an event (`e`) is owed to: those it was written with, or, for an event written
 * without them by a process of a version before migration 0021 still running during an
 * upgrade, those the old rule gives at fan-out (active, subscribed, created before the event).
 * COALESCE evaluates the lookup only for such an event.
 */
const OWED = `coalesce(e.webhook_ids, ${owedWebhooksSql('e.workspace_id', 'e.type', 'e.created_at')})`;

/**
 * The outbox to the deliveries, in one statement (one transaction): takes a batch of events not
 * yet fanned out (events_pending_idx, skipping rows another worker holds), pairs each with the
 * webhooks it is owed to (named when it was written: events/outbox.ts recordEvent) that still
 * exist, and marks the events fanned out. A pair whose webhook was disabled since is written at
 * once as a held delivery (pending, no due time), which enabling the webhook makes due.
 *
 * With `lease` (a worker's fan-out), the pairs of active webhooks come back as fresh claims,
 * ready to attempt, and no delivery row is written for them yet: each is written once, with
 * its first attempt's outcome (recordOutcomes). What keeps them from being lost meanwhile is
 * one webhook_fanouts row for the batch, naming its events, the owner and the lease,
 * `lease(attempts - 1)` (that of the batch's last claim in the worker's queue); a batch whose
 * lease runs out is taken again by retakeFanOuts. Without `lease` the statement writes a
 * pending delivery per pair, due at once (held for a disabled webhook), which goes through the
 * claim (claimDue).
 *
 * Delivery ids are made here (orderedIds), `perEvent` per event taken; a batch that needs more
 * (events with several webhooks) changes nothing and is run again with enough.
 *
 * On the dispatcher's pool it commits asynchronously: if PostgreSQL itself crashes and loses
 * it, the batch and the marks go together and the events are simply fanned out again (the
 * events themselves were committed durably by their producers).
 */
export async function fanOut(
  db: Pick<Statements, 'run'>,
  now: Date,
  limit: number,
  lease?: (i: number) => Date,
  perEvent = 1,
  /** The leasing worker's registered id (lease_owner), so its batch is taken over if it dies. */
  owner: string | null = null,
): Promise<{ events: number; deliveries: number; claims: ClaimedDelivery[] }> {
  let supply = Math.max(1, Math.ceil(limit * perEvent));
  for (;;) {
    // Ids in creation order: the primary key grows at its right edge (as for leads, adapters/ids.ts).
    const ids = orderedIds('dlv', supply);
    const leases = lease ? ids.map((_, i) => lease(i)) : null;
    const fanOutId = lease ? newId('fan') : null;
    const rows = await db.run<DeliveryTargetRow & { events: number; needed: number; attempts: number; n: string | null; active: boolean | null; made: boolean | null }>(
      'webhooks.fanout',
      `with arg as (
         select ?::text[] as ids, ?::timestamptz[] as leases, ?::timestamptz as now, ?::text as owner, ?::text as fan
       ), ev as (
         select id, workspace_id, type, data, created_at, ${OWED} as webhook_ids from events e
          where fanned_out_at is null order by created_at limit ? for update skip locked
       ), hooks as (
         -- The webhooks the events are owed to (named when each was written), as they are now.
         -- One lock per webhook (not per delivery, as a foreign key would): a deletion of the
         -- webhook waits for this statement, then deletes what it wrote (deleteWebhook).
         select w.id, w.url, w.signing_secret_enc, w.status from webhooks w
          where w.id in (select unnest(webhook_ids) from ev)
          order by w.id
          for key share of w
       ), pairs as (
         select ev.id as event_id, ev.workspace_id, ev.type, ev.data, ev.created_at, w.id as webhook_id, w.url, w.signing_secret_enc,
                w.status = 'active' as active,
                row_number() over (order by ev.created_at, ev.id, w.id) as n,
                row_number() over (partition by w.id order by ev.created_at, ev.id) = 1 as first
           from ev join hooks w on w.id = any(ev.webhook_ids)
       ), fits as (
         select count(*)::int as needed, count(*) filter (where active)::int as attempts, count(*) <= (select cardinality(ids) from arg) as ok from pairs
       ), ins as (
         -- Without a lease, every pair as a pending delivery, due at once; with one, only the
         -- pairs of webhooks disabled since their event, held (no due time) until enabled.
         insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, next_attempt_at, created_at, updated_at)
         select arg.ids[p.n], p.workspace_id, p.webhook_id, p.event_id, 'pending', case when p.active then arg.now end, arg.now, arg.now
           from pairs p, arg where (select ok from fits) and (arg.fan is null or not p.active)
         on conflict (webhook_id, event_id) do nothing
         returning id
       ), leased as (
         insert into webhook_fanouts (id, lease_owner, lease_until, event_ids, created_at)
         select arg.fan, arg.owner, arg.leases[(select attempts from fits)], array(select event_id from pairs where active group by event_id order by min(n)), arg.now
           from arg where (select ok from fits) and arg.fan is not null and (select attempts from fits) > 0
       ), marked as (
         update events e set fanned_out_at = arg.now from ev, arg where e.id = ev.id and (select ok from fits)
         returning e.id
       )
       select (select count(*)::int from ev) as events, (select needed from fits) as needed, (select attempts from fits) as attempts,
              p.n, p.active, p.n is not null and (((select fan from arg) is not null and p.active) or (select arg.ids[p.n] from arg) in (select id from ins)) as made,
              -- A webhook's URL and secret come once, with its first pair (rows come in pair order).
              p.webhook_id, case when p.first then p.url end as url, case when p.first then p.signing_secret_enc end as signing_secret_enc,
              p.event_id, p.type, p.data, ${isoTime('p.created_at')} as created_at
         from (select 1) one
         left join pairs p on true
        order by p.n`,
      // Ids (base32) and ISO times need no quoting: the array literals are written here
      // rather than escaped element by element by the pg client.
      [`{${ids.join(',')}}`, leases && `{${leases.map((d) => d.toISOString()).join(',')}}`, now, owner, fanOutId, limit],
    );
    const [{ events, needed, attempts }] = rows;
    if (needed > ids.length) {
      supply = needed;
      continue;
    }
    // Without a lease, only rows this insert created count (a conflict means the delivery
    // already exists). The n-th pair got the n-th id: nothing of it needs to come back. With
    // one, the pairs of active webhooks come back as the batch's claims, in order (the i-th
    // claim's lease is lease(i)), and held deliveries count as made.
    const claims: ClaimedDelivery[] = [];
    let made = 0;
    const hooks = new Map<string, DeliveryTargetRow>();
    const batch: FanOutLease | null = leases && attempts > 0 ? { id: fanOutId!, leaseUntil: leases[attempts - 1], unwritten: attempts, broken: false } : null;
    for (const r of rows) {
      if (r.url !== null) hooks.set(r.webhook_id, r);
      if (!r.made) continue;
      made++;
      if (!batch || !r.active) continue;
      claims.push(freshClaimOf(r, ids[Number(r.n) - 1], batch, now, hooks.get(r.webhook_id)!));
    }
    return { events, deliveries: made, claims };
  }
}

/**
 * Takes over one fan-out batch whose lease ran out (its worker died, stopped, or could not
 * record an outcome): leases it to the caller and returns, as fresh claims,
 * the pairs of its events that still have no delivery and whose webhook is active. The pairs of
 * a webhook disabled since are written held, as at a fan-out (nothing is owed to one deleted).
 * A batch with no attempt left is deleted. webhook_fanouts_lease_idx finds it; the table holds
 * only batches in flight. Delivery ids are made here, as by fanOut: `supply` of them, and the
 * statement is run again with enough when the batch needs more (it then changes nothing).
 *
 * The lease is `lease(attempts - 1)`, as at the fan-out: that of the batch's last claim in the
 * caller's queue, so it covers every pair however many there are. A batch of events with several
 * webhooks each can hold more pairs than a worker's queue: leased as if it filled the queue
 * (until 2026-11-29), its last pairs waited for a slot past the lease, and the next claim (of
 * its taker or another worker) took the batch again and repeated first attempts still queued
 * or in flight.
 */
export async function retakeFanOuts(db: Statements, now: Date, lease: Date | ((i: number) => Date), owner: string | null = null, supply = 64): Promise<ClaimedDelivery[]> {
  for (;;) {
    const ids = orderedIds('dlv', supply);
    const leases = ids.map((_, i) => (typeof lease === 'function' ? lease(i) : lease));
    const rows = await db.run<DeliveryTargetRow & { fan: string | null; needed: number; n: string | null; active: boolean | null }>(
      'webhooks.retake',
      `with arg as (
         select ?::text[] as ids, ?::timestamptz[] as leases, ?::timestamptz as now, ?::text as owner
       ), f as (
         select id, event_ids from webhook_fanouts where lease_until <= (select now from arg) order by lease_until limit 1 for update skip locked
       ), ev as (
         select f.id as fan, e.id, e.workspace_id, e.type, e.data, e.created_at, ${OWED} as webhook_ids
           from f cross join lateral unnest(f.event_ids) as x(id)
           join events e on e.id = x.id
       ), hooks as (
         -- As at the fan-out: locked, so an enabling or a deletion of the webhook waits for the
         -- held deliveries written here (and then releases or deletes them).
         select w.id, w.url, w.signing_secret_enc, w.status from webhooks w
          where w.id in (select unnest(webhook_ids) from ev)
          order by w.id
          for key share of w
       ), pairs as (
         select ev.fan, ev.id as event_id, ev.workspace_id, ev.type, ev.data, ev.created_at, w.id as webhook_id, w.url, w.signing_secret_enc,
                w.status = 'active' as active,
                row_number() over (order by ev.created_at, ev.id, w.id) as n
           from ev join hooks w on w.id = any(ev.webhook_ids)
          where not exists (select 1 from webhook_deliveries d where d.event_id = ev.id and d.webhook_id = w.id)
       ), fits as (
         select count(*)::int as needed, count(*) <= (select cardinality(ids) from arg) as ok from pairs
       ), held as (
         insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, next_attempt_at, created_at, updated_at)
         select arg.ids[p.n], p.workspace_id, p.webhook_id, p.event_id, 'pending', null, arg.now, arg.now
           from pairs p, arg where (select ok from fits) and not p.active
         on conflict (webhook_id, event_id) do nothing
       ), taken as (
         update webhook_fanouts x set lease_until = arg.leases[(select count(*)::int from pairs where active)], lease_owner = arg.owner from f, arg
          where x.id = f.id and (select ok from fits) and f.id in (select fan from pairs where active)
       ), done as (
         delete from webhook_fanouts x using f
          where x.id = f.id and (select ok from fits) and f.id not in (select fan from pairs where active)
       )
       select (select needed from fits) as needed, p.fan, p.n, p.active, p.webhook_id, p.url, p.signing_secret_enc, p.event_id, p.type, p.data,
              ${isoTime('p.created_at')} as created_at
         from (select 1) one
         left join pairs p on true
        order by p.n`,
      [`{${ids.join(',')}}`, `{${leases.map((d) => d.toISOString()).join(',')}}`, now, owner],
    );
    const [{ needed }] = rows;
    if (needed > ids.length) {
      supply = needed;
      continue;
    }
    const active = rows.filter((r) => r.active);
    if (!active.length) return [];
    const batch: FanOutLease = { id: active[0].fan!, leaseUntil: leases[active.length - 1], unwritten: active.length, broken: false };
    return active.map((r) => freshClaimOf(r, ids[Number(r.n) - 1], batch, now));
  }
}

/**
 * Gives back fan-out batches a stopping worker will not finish (only while they are still its
 * own): their leases run out at once, so any worker takes them again (retakeFanOuts), attempting
 * what has no delivery yet.
 */
export async function releaseFanOuts(db: Statements, batches: FanOutLease[], now: Date): Promise<void> {
  if (!batches.length) return;
  await db.run(
    'webhooks.release-fanouts',
    `update webhook_fanouts f set lease_until = ?, lease_owner = null
       from unnest(?::text[], ?::timestamptz[]) as b(id, lease_until)
      where f.id = b.id and f.lease_until = b.lease_until`,
    [now, batches.map((b) => b.id), batches.map((b) => b.leaseUntil)],
  );
}

/**
 * Claims up to `limit` due deliveries of active webhooks (webhook_deliveries_due_idx), skipping
 * rows another worker is claiming and rows whose lease has not expired, and leases them until
 * `leaseUntil`. One statement, so the row locks last only as long as it does; from then on the
 * lease keeps other workers away. A leased delivery is due again when its lease runs out
 * (next_attempt_at = lease_until), so the deliveries in flight stay out of the claim's range
 * and its scan reads only what it can take. Fresh deliveries come leased from fanOut; the claim
 * takes retries, manual retries and the deliveries of workers that died.
 *
 * And held deliveries (no due time) whose webhook is active again. Enabling a webhook makes its
 * held deliveries due, but the writers decide to hold a delivery from the webhook's status in
 * their statement's snapshot: one whose snapshot predates an enable can hold a delivery after
 * the enable's release (the retry outcome of an attempt in flight across a disable and an
 * enable; the fan-out of an event owed to it). Due here, whatever the interleaving.
 */
export async function claimDue(db: Statements, now: Date, leaseUntil: Date, limit: number, owner: string | null = null): Promise<ClaimedDelivery[]> {
  const rows = await db.run<DeliveryTargetRow & { id: string; attempt_count: number }>(
    'webhooks.claim',
    `with held as (
       -- Held deliveries of webhooks that are active (webhook_deliveries_held_idx per active
       -- webhook; usually none): first, they have waited since their webhook was disabled.
       select d.id from webhooks w join webhook_deliveries d on d.webhook_id = w.id
        where w.status = 'active' and d.state = 'pending' and d.next_attempt_at is null
          and (d.lease_until is null or d.lease_until <= ?)
        limit ?
        for update of d skip locked
     ), due as (
       select d.id from webhook_deliveries d
        where d.state = 'pending' and d.next_attempt_at <= ?
          and (d.lease_until is null or d.lease_until <= ?)
          and exists (select 1 from webhooks w where w.id = d.webhook_id and w.status = 'active')
        order by d.next_attempt_at
        limit ?
        for update of d skip locked
     ), picked as (
       (select id from held) union all (select id from due) limit ?
     ), claimed as (
       update webhook_deliveries d set lease_until = ?, lease_owner = ?, next_attempt_at = ?, updated_at = ?
         from picked where d.id = picked.id
       returning d.id, d.webhook_id, d.event_id, d.attempt_count
     )
     select c.id, c.attempt_count, w.id as webhook_id, w.url, w.signing_secret_enc, e.id as event_id, e.type, e.data, ${isoTime('e.created_at')} as created_at
       from claimed c join webhooks w on w.id = c.webhook_id join events e on e.id = c.event_id`,
    [now, limit, now, now, limit, limit, leaseUntil, owner, leaseUntil, now],
  );
  return rows.map((r) => claimOf(r, r.id, r.attempt_count, leaseUntil));
}

/**
 * Gives back claims a stopping worker will not attempt (only while they are still its own):
 * due at once again, unless their webhook was disabled meanwhile (held: no due time).
 */
export async function releaseClaims(db: Statements, claims: ClaimedDelivery[], now: Date): Promise<void> {
  if (!claims.length) return;
  await db.run(
    'webhooks.release',
    `update webhook_deliveries d set lease_until = null, lease_owner = null, next_attempt_at = case when d.next_attempt_at is not null then ?::timestamptz end
       from unnest(?::text[], ?::timestamptz[]) as c(id, lease_until)
      where d.id = c.id and d.lease_until = c.lease_until`,
    [now, claims.map((c) => c.id), claims.map((c) => c.leaseUntil)],
  );
}

export interface AttemptOutcome {
  deliveryId: string;
  leaseUntil: Date;
  attemptCount: number;
  attempt: Attempt;
  /** The delivery's state after this attempt, and when the next one is due (pending only). */
  state: DeliveryState;
  nextAttemptAt: Date | null;
  /** A first attempt's: its delivery is written by this outcome. */
  fresh?: FreshDelivery;
}

/**
 * Records attempts and moves their deliveries on, in one statement (one transaction) for a
 * batch. A first attempt writes its delivery, with the attempt in `attempts` (a pending one of
 * a webhook disabled meanwhile is held; one of a webhook deleted meanwhile is not written). A
 * later attempt is appended to its delivery's `attempts`, and the move is fenced by the claim's
 * lease and attempt count: a worker whose lease ran out (and whose delivery another worker may
 * have claimed since) changes nothing but still logs its attempt. So is a first attempt whose
 * delivery was written meanwhile by another worker that took over its fan-out batch.
 * `finished` are the fan-out batches whose last outcome is in this batch: their rows go with
 * it. Returns, per outcome, whether it moved its delivery on.
 */
export async function recordOutcomes(db: Statements, outcomes: AttemptOutcome[], now: Date, finished: FanOutLease[] = []): Promise<boolean[]> {
  // The statement names the outcomes that did not move their delivery: usually none, so a
  // batch's answer is one short message rather than a row per outcome.
  const rows = await db.run<{ n: number }>('webhooks.outcomes', OUTCOMES_SQL, [outcomesBatch(outcomes), now, finishedBatch(finished)]);
  const moved = outcomes.map(() => true);
  for (const r of rows) moved[Number(r.n)] = false;
  return moved;
}

/**
 * The batch as one JSON document: one native JSON.stringify here and one parse in PostgreSQL,
 * instead of nine arrays escaped element by element by the pg client. Times as ISO strings up
 * front (JSON.stringify calling Date#toJSON per value is slower). `n` is the outcome's position.
 */
export function outcomesBatch(outcomes: AttemptOutcome[]): string {
  return JSON.stringify(
    outcomes.map((o, n) => ({
      n,
      id: o.deliveryId,
      lease_until: o.leaseUntil.toISOString(),
      attempt_count: o.attemptCount,
      state: o.state,
      next_attempt_at: o.nextAttemptAt === null ? null : o.nextAttemptAt.toISOString(),
      attempt: { at: o.attempt.at.toISOString(), statusCode: o.attempt.statusCode, error: o.attempt.error, durationMs: o.attempt.durationMs },
      ...(o.fresh && { fresh: true, webhook_id: o.fresh.webhookId, event_id: o.fresh.eventId, created_at: o.fresh.createdAt.toISOString() }),
    })),
  );
}

/** The fan-out batches a write finishes, as (id, lease) pairs: the lease fences a batch taken over. */
export function finishedBatch(finished: FanOutLease[]): string {
  return JSON.stringify(finished.map((f) => ({ id: f.id, lease_until: f.leaseUntil.toISOString() })));
}

/**
 * recordOutcomes' statement: parameters (outcomesBatch, now, finishedBatch); returns the
 * positions of the outcomes that did not move their delivery (their claim had run out, or a
 * first attempt's delivery was there already or its webhook gone).
 *
 * Later attempts (`moved`, `late`): a delivery can have several outcomes in one batch (an
 * attempt whose lease ran out while it waited to be written, and the next worker's): all of
 * them are appended in one update of the row, by the outcome that moves it or, if none does,
 * by `late`. (One statement cannot update a row twice; an update joined to two rows of the same
 * delivery would apply only one.)
 *
 * First attempts (`fresh`, `written`): one insert per (event, webhook). Two first attempts of
 * one pair in a batch (a worker took its own expired batch again) are written as one row with
 * both attempts, by the first; a pair written meanwhile by another worker gets the attempts
 * appended (the conflict's update) and moves nothing. The webhook is locked FOR KEY SHARE, as
 * by the fan-out: a deletion of it waits for this statement and then deletes what it wrote,
 * or goes first and the insert finds no webhook. It is locked before any delivery, in the
 * order of the API's changes (the webhook's row, then its deliveries): until 2026-11-29 a
 * batch with a retry and a first attempt of one webhook locked the retried delivery first,
 * and deadlocked with a disabling, an enabling, a manual retry or a deletion of that webhook.
 */
export const OUTCOMES_SQL = `with arg as (
       select ?::json as batch, ?::timestamptz as now, ?::json as finished
     ), input as materialized (
       -- The batch parsed once; \`fresh\` marks first attempts.
       select i.* from arg, json_to_recordset(arg.batch) as i(n int, id text, lease_until timestamptz, attempt_count int, state text, next_attempt_at timestamptz,
                                                             attempt jsonb, fresh boolean, webhook_id text, event_id text, created_at timestamptz)
     ), o as (
       -- Each outcome carries every attempt of its delivery in this batch (in the order made).
       select o.n, o.id, o.lease_until, o.attempt_count, o.state, o.next_attempt_at, 'pending'::text as was,
              jsonb_agg(o.attempt) over (partition by o.id order by o.attempt->>'at' rows between unbounded preceding and unbounded following) as logged
         from input o
        where o.fresh is null
     ), fresh as (
       select distinct on (f.event_id, f.webhook_id) f.n, f.id, f.webhook_id, f.event_id, f.state, f.next_attempt_at, f.created_at,
              jsonb_agg(f.attempt) over (partition by f.event_id, f.webhook_id order by f.attempt->>'at' rows between unbounded preceding and unbounded following) as logged
         from input f
        where f.fresh
        order by f.event_id, f.webhook_id, f.n
     ), hooks as (
       -- Locked before any delivery (moved, late and written all wait for it): a webhook change
       -- (PATCH, a retry, a deletion) locks the webhook's row and then its deliveries, so a write
       -- that held a retried delivery while it waited for the webhook deadlocked with one.
       select w.id, w.workspace_id, w.status from webhooks w where w.id in (select webhook_id from fresh) order by w.id for key share of w
     ), moved as (
       update webhook_deliveries d
          set attempt_count = d.attempt_count + 1, state = o.state, lease_until = null, lease_owner = null, updated_at = (select now from arg), attempts = d.attempts || o.logged,
              next_attempt_at = case when o.state = 'pending' and exists (select 1 from webhooks w where w.id = d.webhook_id and w.status = 'active')
                                     then o.next_attempt_at end
         from o
        -- Every condition on d is a join condition (d.state = o.was, not = 'pending'), so the
        -- planner never thinks d filtered is small enough to scan once and match in memory:
        -- with statistics behind (a young table; a partial index created empty) it did, and
        -- scanned every pending delivery for every outcome. The plan is a primary-key probe
        -- per outcome (a test checks it).
        where d.id = o.id and d.lease_until = o.lease_until and d.attempt_count = o.attempt_count and d.state = o.was
          -- evaluated once, before the first delivery is read: the webhooks are locked first
          and (select count(*) from hooks) >= 0
       returning o.n, o.id
     ), late as (
       -- Deliveries none of whose outcomes moved them (their claims had run out): the attempts
       -- are logged, nothing else. Usually none, and then the filter leaves nothing to look up.
       update webhook_deliveries d set attempts = d.attempts || l.logged
         from (select distinct on (o.id) o.id, o.logged from o order by o.id) l
        where d.id = l.id and l.id not in (select id from moved)
     ), written as (
       insert into webhook_deliveries as d (id, workspace_id, webhook_id, event_id, state, attempt_count, attempts, next_attempt_at, created_at, updated_at)
       select f.id, h.workspace_id, f.webhook_id, f.event_id, f.state, 1, f.logged,
              case when f.state = 'pending' and h.status = 'active' then f.next_attempt_at end, f.created_at, arg.now
         from fresh f join hooks h on h.id = f.webhook_id, arg
       on conflict (webhook_id, event_id) do update set attempts = d.attempts || excluded.attempts
       returning d.id
     ), finished as (
       delete from webhook_fanouts x using arg, json_to_recordset(arg.finished) as b(id text, lease_until timestamptz)
        where x.id = b.id and x.lease_until = b.lease_until
     )
     select o.n from o where o.n not in (select n from moved)
     union all
     select f.n from input f where f.fresh and f.id not in (select id from written)`;

/**
 * Retention (maintenance/retention.ts): finished deliveries (attempts and all) in the heap pages
 * [from, to) created before `cutoff`. Returns one row per delivery deleted.
 */
export async function pruneDeliveries(em: EntityManager, from: string, to: string, cutoff: Date): Promise<unknown[]> {
  return sql(
    em,
    `delete from webhook_deliveries
      where ctid >= ?::tid and ctid < ?::tid and created_at < ? and state in ('delivered', 'failed')
      returning 1`,
    [from, to, cutoff],
  );
}
