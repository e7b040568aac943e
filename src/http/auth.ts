import type { Context } from 'koa';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../shared/errors.ts';
import { hashApiKey } from '../adapters/crypto.ts';
import type { Role } from '../modules/workspaces/entities.ts';
import { sql } from '../db/sql.ts';
import { toDate } from '../shared/time.ts';
import type { Clock } from '../adapters/clock.ts';

/** Who may call a route: an admin key, an SDR key, or anyone (tracking links, health). */
export type Access = 'admin' | 'sdr' | 'none';

export interface AuthContext {
  keyId: string;
  workspaceId: string;
  role: Role;
  /** Set for sdr keys: the SDR the key acts for. */
  sdrId: string | null;
}

interface KeyRow {
  id: string;
  workspace_id: string | null;
  role: Role;
  sdr_id: string | null;
  revoked_at: Date | string | null;
  last_used_at: Date | string | null;
  /** null when the key has no SDR, or its SDR is gone or of another workspace. */
  sdr_active: boolean | null;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
// last_used_at is informative; writing it at most once a minute keeps reads read-only.
const TOUCH_EVERY_MS = 60_000;

/**
 * Bearer auth and roles (contract §3): 401 authentication_failed for a missing, malformed,
 * unknown or revoked key; 404 workspace_not_found when the key's workspace is gone; 403
 * forbidden for the wrong role or an inactive SDR.
 */
export function authorizer(clock: Clock) {
  return async (ctx: Context, access: Access): Promise<AuthContext> => {
    if (access === 'none') return undefined as unknown as AuthContext;
    const header = ctx.get('authorization');
    const m = BEARER.exec(header);
    if (!m) throw new ApiError(401, 'authentication_failed', header ? 'malformed Authorization header; expected "Bearer <API key>"' : 'missing Authorization header');
    const em: EntityManager = ctx.state.em;
    // One statement: the key and, for an sdr key, whether its SDR (of the key's workspace) is
    // active. Two ORM lookups cost ~3 ms a request (bench/inbox.ts).
    const [key] = await sql<KeyRow>(
      em,
      `select k.id, k.workspace_id, k.role, k.sdr_id, k.revoked_at, k.last_used_at, s.active as sdr_active
         from api_keys k left join sdrs s on s.id = k.sdr_id and s.workspace_id = k.workspace_id
        where k.key_hash = ?`,
      [hashApiKey(m[1])],
      // Once per connection: a unique-index lookup, the same plan for every key.
      { name: 'mailgate_auth_key_v1' },
    );
    if (!key || key.revoked_at) throw new ApiError(401, 'authentication_failed', key ? 'API key has been revoked' : 'invalid API key');
    if (!key.workspace_id) throw new ApiError(404, 'workspace_not_found', 'the workspace of this API key no longer exists');
    if (access === 'admin' && key.role !== 'admin') throw new ApiError(403, 'forbidden', 'this endpoint needs an admin key');
    if (access === 'sdr') {
      if (key.role !== 'sdr' || !key.sdr_id) throw new ApiError(403, 'forbidden', 'this endpoint needs an SDR key');
      if (!key.sdr_active) throw new ApiError(403, 'forbidden', 'the SDR of this key is inactive');
    }
    const now = clock.now();
    if (!key.last_used_at || now.getTime() - toDate(key.last_used_at).getTime() > TOUCH_EVERY_MS) {
      await sql(em, 'update api_keys set last_used_at = ? where id = ?', [now, key.id]);
    }
    return { keyId: key.id, workspaceId: key.workspace_id, role: key.role, sdrId: key.sdr_id };
  };
}
