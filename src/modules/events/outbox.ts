import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { OutboxEvent } from './catalogue.ts';

export type { EventType, OutboxEvent } from './catalogue.ts';

/**
 * Writes an event to the outbox. Call it inside the transaction of the change that caused
 * the event: both commit or neither does, so no event is lost. Delivery is a separate job.
 * The event comes from one of the builders of catalogue.ts.
 *
 * The event names the webhooks it is owed to (`webhook_ids`, owedWebhooksSql): the active
 * webhooks of its workspace that subscribe to its type, in the snapshot of the statement that
 * writes it. That is final: the fan-out pairs the event with those webhooks whatever they became
 * since (one disabled meanwhile gets its delivery held, one deleted gets nothing), so a webhook
 * gets exactly the events that happened while it was active and subscribed (docs/decisions.md,
 * "Who is owed an event"). An event owed to nobody is not written: nothing would ever deliver
 * it, and writing, fanning out and pruning it was most of the outbox's cost on the sending hot
 * path ("Events nobody subscribes to"). Returns the event's id, or null when it was not written.
 */
export async function recordEvent(em: EntityManager, workspaceId: string, event: OutboxEvent, at: Date): Promise<string | null> {
  const id = newId('evt');
  const rows = await sql(
    em,
    `insert into events (id, workspace_id, type, data, created_at, webhook_ids)
     select ?, ?, ?, ?::jsonb, ?, owed.ids
       from (select ${owedWebhooksSql('?::text', '?::text')} as ids) owed
      where cardinality(owed.ids) > 0
     returning 1`,
    [id, workspaceId, event.type, JSON.stringify(event.data), at, workspaceId, event.type],
  );
  return rows.length ? id : null;
}

/**
 * The ids of the webhooks an event of this workspace and type is owed to, as an array
 * expression (empty when none): the active ones subscribed to the type
 * (webhooks_workspace_idx). Shared by recordEvent and the sending engine's message.sent, and,
 * with `createdBy` (the event's time: webhooks created after it are not owed it), by the
 * fan-out for events written without their webhooks (webhooks/repository.ts).
 */
export function owedWebhooksSql(workspaceId: string, type: string, createdBy?: string): string {
  const older = createdBy ? ` and w.created_at <= ${createdBy}` : '';
  return `array(select w.id from webhooks w where w.workspace_id = ${workspaceId} and ${type} = any(w.events) and w.status = 'active'${older} order by w.id)`;
}

/**
 * Orders a change of which webhooks are owed a workspace's events (a webhook created, its
 * events changed, or it is enabled or disabled) with the statements that write events: called
 * first in the change's transaction, it waits for every transaction that wrote to the outbox
 * and holds new writers until it commits. A writer's statement takes its lock before its
 * snapshot, so an event written after the change committed is owed by the new rule, and one
 * whose writer was in flight by the old: the change and the events are in one order, the same
 * as their times (an event is never left out for a webhook whose creation committed before the
 * event was written). Webhook changes are rare; the wait is one outcome commit at most.
 */
export async function holdOutbox(em: EntityManager): Promise<void> {
  await sql(em, `lock table events in share mode`);
}

/**
 * The outbox's table lock a workspace deletion needs to delete its events (ROW EXCLUSIVE),
 * taken first in that transaction: a webhook change takes holdOutbox before its webhook's row,
 * so a deletion that locked the webhooks first and the outbox then (at its delete) deadlocked
 * with one. It shares this mode with every writer of events and the fan-out.
 */
export async function lockOutboxForDeletion(em: EntityManager): Promise<void> {
  await sql(em, `lock table events in row exclusive mode`);
}

/**
 * A workspace deletion's events (events keep no foreign key to workspaces, 0028), after its
 * messages, in its transaction: every event it had, and those written meanwhile by an outcome
 * that held one of its messages (the deletion waited for it). An event a fan-out holds is left
 * to it (SKIP LOCKED): the fan-out waits for the deletion's lock on the workspace's webhooks,
 * so waiting for it here would be a lock cycle; it then finds no webhook, writes no delivery,
 * and the event, fanned out with nothing owed, goes with the retention job. One pass over the
 * table (no index on workspace_id: it would cost every event written), as the cascade made.
 */
export async function deleteWorkspaceEvents(em: EntityManager, workspaceId: string): Promise<void> {
  await sql(em, `delete from events where id in (select id from events where workspace_id = ? for update skip locked)`, [workspaceId]);
}

/**
 * Retention (maintenance/retention.ts): events in the heap pages [from, to) created before
 * `cutoff` that were fanned out and have no delivery left nor any to come. Returns one row per
 * event deleted.
 */
export async function pruneEvents(em: EntityManager, from: string, to: string, cutoff: Date): Promise<unknown[]> {
  // webhook_deliveries_event_webhook_key (0007) answers "no delivery left" per event.
  return sql(
    em,
    `delete from events e
      where ctid >= ?::tid and ctid < ?::tid and e.created_at < ? and e.fanned_out_at is not null
        and not exists (select 1 from webhook_deliveries d where d.event_id = e.id)
        -- nor an event of a fan-out batch in flight, whose deliveries are not written yet (0019)
        and e.id <> all(array(select unnest(f.event_ids) from webhook_fanouts f))
      returning 1`,
    [from, to, cutoff],
  );
}
