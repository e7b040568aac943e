import type { Context } from 'koa';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../shared/errors.ts';
import { hashApiKey } from '../adapters/crypto.ts';
import { ApiKeySchema, type Role } from '../modules/workspaces/entities.ts';
import { SdrSchema } from '../modules/sdrs/entities.ts';
import type { Clock } from '../adapters/clock.ts';
import type { Access } from './route.ts';

export interface AuthContext {
  keyId: string;
  workspaceId: string;
  role: Role;
  /** Set for sdr keys: the SDR the key acts for. */
  sdrId: string | null;
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
    const key = await em.findOne(ApiKeySchema, { keyHash: hashApiKey(m[1]) });
    if (!key || key.revokedAt) throw new ApiError(401, 'authentication_failed', key ? 'API key has been revoked' : 'invalid API key');
    if (!key.workspaceId) throw new ApiError(404, 'workspace_not_found', 'the workspace of this API key no longer exists');
    if (access === 'admin' && key.role !== 'admin') throw new ApiError(403, 'forbidden', 'this endpoint needs an admin key');
    if (access === 'sdr') {
      if (key.role !== 'sdr' || !key.sdrId) throw new ApiError(403, 'forbidden', 'this endpoint needs an SDR key');
      const sdr = await em.findOne(SdrSchema, { id: key.sdrId, workspaceId: key.workspaceId });
      if (!sdr || !sdr.active) throw new ApiError(403, 'forbidden', 'the SDR of this key is inactive');
    }
    const now = clock.now();
    if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() > TOUCH_EVERY_MS) {
      await em.nativeUpdate(ApiKeySchema, { id: key.id }, { lastUsedAt: now });
    }
    return { keyId: key.id, workspaceId: key.workspaceId, role: key.role, sdrId: key.sdrId };
  };
}
