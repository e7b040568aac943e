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
 * The outbox is for webhooks only: an event that no webhook of its workspace subscribes to
 * (active or disabled) when it is recorded is not written, since nothing would ever deliver
 * it, and writing, fanning out and pruning it was most of the outbox's cost on the sending hot
 * path (docs/decisions.md, "Events nobody subscribes to"). "When it is recorded" is the
 * statement's snapshot: a webhook whose creation committed before it gets the event. Returns
 * the event's id, or null when it was not written.
 */
export async function recordEvent(em: EntityManager, workspaceId: string, event: OutboxEvent, at: Date): Promise<string | null> {
  const id = newId('evt');
  const rows = await sql(
    em,
    `insert into events (id, workspace_id, type, data, created_at)
     select ?, ?, ?, ?::jsonb, ?
      where exists (select 1 from webhooks w where w.workspace_id = ? and ? = any(w.events))
     returning 1`,
    [id, workspaceId, event.type, JSON.stringify(event.data), at, workspaceId, event.type],
  );
  return rows.length ? id : null;
}

/**
 * Orders a change of what a workspace's webhooks subscribe to (a webhook created, or its events
 * changed) with the statements that write events: called first in the change's transaction, it
 * waits for every transaction that wrote to the outbox and holds new writers until it commits.
 * A writer's statement takes its lock before its snapshot, so recordEvent's subscription check
 * sees the change once it is committed: an event is never left out for a webhook whose creation
 * committed before the event was written. Webhook changes are rare; the wait is one outcome
 * commit at most.
 */
export async function holdOutbox(em: EntityManager): Promise<void> {
  await sql(em, `lock table events in share mode`);
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
