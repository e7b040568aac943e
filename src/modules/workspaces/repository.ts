import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';

// workspaces: created, resolved and deleted by WorkspaceService (ORM entities in service.ts);
// the reads other modules need are here.

/** The workspace's name ('' when it is gone). */
export async function workspaceName(em: EntityManager, workspaceId: string): Promise<string> {
  const [ws] = await sql<{ name: string }>(em, 'select name from workspaces where id = ?', [workspaceId]);
  return ws?.name ?? '';
}
