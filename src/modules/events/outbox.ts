import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { OutboxEvent } from './catalogue.ts';

export type { EventType, OutboxEvent } from './catalogue.ts';

/**
 * Writes an event to the outbox. Call it inside the transaction of the change that caused
 * the event: both commit or neither does, so no event is lost. Delivery is a separate job.
 * The event comes from one of the builders of catalogue.ts.
 */
export async function recordEvent(em: EntityManager, workspaceId: string, event: OutboxEvent, at: Date): Promise<string> {
  const id = newId('evt');
  await sql(em, `insert into events (id, workspace_id, type, data, created_at) values (?, ?, ?, ?::jsonb, ?)`, [id, workspaceId, event.type, JSON.stringify(event.data), at]);
  return id;
}
