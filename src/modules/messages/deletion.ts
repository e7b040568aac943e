import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { deleteWorkspaceTallies } from './tallies.ts';

/**
 * Deletes every message of a workspace (campaign steps, forwards, SDR replies) and its pools'
 * and accounts' sent tallies (tallies.ts), in the caller's transaction. outbound_messages has
 * no foreign keys to cascade from (0017), so deleting a workspace calls this twice: before the
 * workspace row goes (it locks the messages, so a worker recording an outcome for one of them
 * either finishes first or finds it gone) and after (a fresh snapshot also takes the next step,
 * and the tallies, such an outcome wrote meanwhile). One pass over the
 * table each time: a rare operation, and the cascade it replaces read the table once per
 * enrollment.
 */
export async function deleteWorkspaceMessages(em: EntityManager, workspaceId: string): Promise<void> {
  await sql(em, 'delete from outbound_messages where workspace_id = ?', [workspaceId]);
  await deleteWorkspaceTallies(em, workspaceId);
}
