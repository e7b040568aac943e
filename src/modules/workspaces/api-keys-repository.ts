import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { hashApiKey } from '../../adapters/crypto.ts';
import { isoOrNull, toIso } from '../../shared/time.ts';
import type { ApiKeyRow } from './repository.ts';
import type { SdrRow } from '../sdrs/rows.ts';

// api_keys: the key lookup of every request (http/auth.ts) and of a dashboard sign-in, the
// last-use mark, and the keys as the dashboard lists them (never the secret or its hash). Keys
// are created and revoked by WorkspaceService (ORM entities in service.ts).

/** A key as a request authenticates with it. */
export type KeyRow = Pick<ApiKeyRow, 'id' | 'workspace_id' | 'role' | 'sdr_id' | 'revoked_at' | 'last_used_at'> & {
  /** null when the key has no SDR, or its SDR is gone or of another workspace. */
  sdr_active: SdrRow['active'] | null;
};

/** The key of `secret` and, for an sdr key, whether its SDR (of the key's workspace) is active. */
export async function findKey(em: EntityManager, secret: string): Promise<KeyRow | undefined> {
  // One statement: two ORM lookups cost ~3 ms a request (bench/inbox.ts).
  const [key] = await sql<KeyRow>(
    em,
    `select k.id, k.workspace_id, k.role, k.sdr_id, k.revoked_at, k.last_used_at, s.active as sdr_active
       from api_keys k left join sdrs s on s.id = k.sdr_id and s.workspace_id = k.workspace_id
      where k.key_hash = ?`,
    [hashApiKey(secret)],
    // Once per connection: a unique-index lookup, the same plan for every key.
    { name: 'mailgate_auth_key_v1' },
  );
  return key;
}

/** Marks the key as used now (`last_used_at`, informative). */
export async function noteKeyUsed(em: EntityManager, keyId: string, now: Date): Promise<void> {
  await sql(em, 'update api_keys set last_used_at = ? where id = ?', [now, keyId]);
}

type KeyListRow = Pick<ApiKeyRow, 'id' | 'name' | 'role' | 'sdr_id' | 'key_prefix' | 'created_at' | 'last_used_at' | 'revoked_at'>;

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
