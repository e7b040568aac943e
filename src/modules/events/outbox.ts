import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';

export type EventType = 'campaign.started' | 'message.sent' | 'message.bounced' | 'reply.received';

/**
 * Writes an event to the outbox. Call it inside the transaction of the change that caused
 * the event: both commit or neither does, so no event is lost. Delivery is a separate job.
 */
export async function recordEvent(em: EntityManager, workspaceId: string, type: EventType, data: Record<string, unknown>, at: Date): Promise<string> {
  const id = newId('evt');
  await sql(em, `insert into events (id, workspace_id, type, data, created_at) values (?, ?, ?, ?::jsonb, ?)`, [id, workspaceId, type, JSON.stringify(data), at]);
  return id;
}
