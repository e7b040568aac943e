import type { Context } from 'koa';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../shared/errors.ts';
import type { Role } from '../modules/workspaces/entities.ts';
import { findKey, noteKeyUsed } from '../modules/workspaces/api-keys-repository.ts';
import { toDate } from '../shared/time.ts';
import type { Clock } from '../adapters/clock.ts';
import type { Crypto } from '../adapters/crypto.ts';
import { checkCsrf, lookupSession, noteSessionUse, readSessionToken, type SessionKey } from './session.ts';

/** Who may call a route: an admin key, an SDR key, or anyone (tracking links, health). */
export type Access = 'admin' | 'sdr' | 'none';

export interface AuthContext {
  keyId: string;
  workspaceId: string;
  role: Role;
  /** Set for sdr keys: the SDR the key acts for. */
  sdrId: string | null;
  /** How the request was authenticated: an API key, or a dashboard session (docs/dashboard.md). */
  via: 'bearer' | 'session';
}

/** What the session cookie needs besides the clock (docs/dashboard.md). */
export interface SessionOptions {
  crypto: Crypto;
  /** A session unused for this long is over. */
  idleMs: number;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
// last_used_at is informative; writing it at most once a minute keeps reads read-only.
const TOUCH_EVERY_MS = 60_000;

/**
 * The role rules (contract §3) for a key: 403 forbidden for the wrong role or an inactive SDR.
 */
export function checkRole(access: Access, key: { role: Role; sdrId: string | null; sdrActive: boolean | null }) {
  if (access === 'admin' && key.role !== 'admin') throw new ApiError(403, 'forbidden', 'this endpoint needs an admin key');
  if (access === 'sdr') {
    if (key.role !== 'sdr' || !key.sdrId) throw new ApiError(403, 'forbidden', 'this endpoint needs an SDR key');
    if (!key.sdrActive) throw new ApiError(403, 'forbidden', 'the SDR of this key is inactive');
  }
}

/**
 * Bearer auth and roles (contract §3): 401 authentication_failed for a missing, malformed,
 * unknown or revoked key; 404 workspace_not_found when the key's workspace is gone; 403
 * forbidden for the wrong role or an inactive SDR. Without an Authorization header, a
 * dashboard session cookie authenticates the request with its key's role; a state-changing
 * request then needs the session's CSRF token (403 csrf_failed).
 */
export function authorizer(clock: Clock, session?: SessionOptions) {
  return async (ctx: Context, access: Access): Promise<AuthContext> => {
    if (access === 'none') return undefined as unknown as AuthContext;
    const header = ctx.get('authorization');
    const em: EntityManager = ctx.state.em;
    if (!header && session) {
      const token = readSessionToken(ctx);
      if (token) {
        const s = await lookupSession(em, token, clock.now(), session.idleMs);
        checkCsrf(ctx, session.crypto, token);
        checkRole(access, s);
        noteSessionUse(ctx, s, clock.now());
        return { keyId: s.keyId, workspaceId: s.workspaceId, role: s.role, sdrId: s.sdrId, via: 'session' };
      }
    }
    const m = BEARER.exec(header);
    if (!m) throw new ApiError(401, 'authentication_failed', header ? 'malformed Authorization header; expected "Bearer <API key>"' : 'missing Authorization header');
    const key = await findKey(em, m[1]);
    if (!key || key.revoked_at) throw new ApiError(401, 'authentication_failed', key ? 'API key has been revoked' : 'invalid API key');
    if (!key.workspace_id) throw new ApiError(404, 'workspace_not_found', 'the workspace of this API key no longer exists');
    checkRole(access, { role: key.role, sdrId: key.sdr_id, sdrActive: key.sdr_active });
    const now = clock.now();
    if (!key.last_used_at || now.getTime() - toDate(key.last_used_at).getTime() > TOUCH_EVERY_MS) {
      await noteKeyUsed(em, key.id, now);
    }
    return { keyId: key.id, workspaceId: key.workspace_id, role: key.role, sdrId: key.sdr_id, via: 'bearer' };
  };
}

/**
 * Authorization of a dashboard-only route (docs/dashboard.md): a signed-in dashboard session
 * with its CSRF token on writes, never an API key (403 forbidden, so a key cannot reach the
 * flows the spec keeps out of the API); `admin` routes need an admin session.
 */
export function dashboardAuthorizer(clock: Clock, session: SessionOptions) {
  return (need: 'admin' | 'any' | 'sign-in' | 'sign-out') =>
    async (ctx: Context): Promise<AuthContext> => {
      if (need === 'sign-in') return undefined as unknown as AuthContext;
      if (ctx.get('authorization'))
        throw new ApiError(403, 'forbidden', 'this endpoint is served only to signed-in dashboard sessions, never to an API key (sign in at the dashboard)');
      const token = readSessionToken(ctx);
      if (!token) throw new ApiError(401, 'authentication_failed', 'not signed in: sign in to the dashboard with an API key');
      const lookup = () => lookupSession(ctx.state.em, token, clock.now(), session.idleMs);
      let s: SessionKey;
      if (need === 'sign-out') {
        // The CSRF token is derived from the cookie, so it is checked without the session. A
        // session that has ended already (idle, its key revoked, signed out in another tab) is
        // signed out: the route still clears its cookie, which would otherwise stay behind.
        checkCsrf(ctx, session.crypto, token);
        const found = await lookup().catch((err: unknown) => {
          if (err instanceof ApiError && err.status === 401) return null;
          throw err;
        });
        if (!found) return undefined as unknown as AuthContext;
        s = found;
      } else {
        s = await lookup();
        checkCsrf(ctx, session.crypto, token);
      }
      if (need === 'admin') checkRole('admin', s);
      else if (need === 'any' && s.role === 'sdr') checkRole('sdr', s);
      noteSessionUse(ctx, s, clock.now());
      return { keyId: s.keyId, workspaceId: s.workspaceId, role: s.role, sdrId: s.sdrId, via: 'session' };
    };
}
