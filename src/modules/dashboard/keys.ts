import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { isoOrNull, toIso } from '../../shared/time.ts';

// API keys as the dashboard lists them: never the secret or its hash.

interface KeyListRow {
  id: string;
  name: string | null;
  role: 'admin' | 'sdr';
  sdr_id: string | null;
  key_prefix: string;
  created_at: Date | string;
  last_used_at: Date | string | null;
  revoked_at: Date | string | null;
}

function keyView(r: KeyListRow) {
  return {
    id: r.id,
    name: r.name,
    role: r.role,
    sdrId: r.sdr_id,
    keyPrefix: r.key_prefix,
    createdAt: toIso(r.created_at),
    lastUsedAt: isoOrNull(r.last_used_at),
    revokedAt: isoOrNull(r.revoked_at),
  };
}

const COLUMNS = 'id, name, role, sdr_id, key_prefix, created_at, last_used_at, revoked_at';

/** The workspace's keys, newest first (api_keys_workspace_idx). */
export async function listKeys(em: EntityManager, workspaceId: string, limit: number, offset: number) {
  const rows = await sql<KeyListRow>(em, `select ${COLUMNS} from api_keys where workspace_id = ? order by created_at desc, id desc limit ? offset ?`, [workspaceId, limit, offset]);
  const [{ n }] = await sql<{ n: string }>(em, 'select count(*) as n from api_keys where workspace_id = ?', [workspaceId]);
  return { data: rows.map(keyView), total: Number(n), hasMore: offset + rows.length < Number(n) };
}

export async function getKey(em: EntityManager, workspaceId: string, id: string) {
  const [row] = await sql<KeyListRow>(em, `select ${COLUMNS} from api_keys where workspace_id = ? and id = ?`, [workspaceId, id]);
  return row ? keyView(row) : null;
}
