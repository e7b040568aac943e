import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../shared/errors.ts';
import type { Crypto } from '../adapters/crypto.ts';
import { toDate } from '../shared/time.ts';
import type { Role } from '../modules/workspaces/entities.ts';
import { findSession, touchSession } from '../modules/dashboard/session-repository.ts';
import { noteKeyUsed } from '../modules/workspaces/api-keys-repository.ts';

// Dashboard sessions (docs/dashboard.md): an opaque random token in an HttpOnly, SameSite=Strict
// cookie, stored only as its SHA-256. The CSRF token is derived from the session token with the
// secret key, so it needs no storage and cannot be computed from what the database holds.

export const SESSION_COOKIE = 'mailgate_session';
export const CSRF_HEADER = 'x-csrf-token';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
// last_seen_at drives the idle expiry; writing it at most once a minute keeps reads read-only.
// With a short idle time it is written more often (a tenth of it), so a session in use never
// expires early by more than that tenth (a 1m idle time: 6 s).
const TOUCH_EVERY_MS = 60_000;
const touchEvery = (idleMs: number) => Math.min(TOUCH_EVERY_MS, idleMs / 10);

export function hashSessionToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function csrfTokenFor(crypto: Crypto, sessionToken: string): string {
  return crypto.digest('dashboard csrf', sessionToken).toString('base64url');
}

/** The session token of the request's cookie, or null. Only well-formed tokens count. */
export function readSessionToken(ctx: Context): string | null {
  const value = ctx.cookies.get(SESSION_COOKIE);
  return value && /^[A-Za-z0-9_-]{43}$/.test(value) ? value : null;
}

export function setSessionCookie(ctx: Context, token: string) {
  ctx.cookies.set(SESSION_COOKIE, token, { httpOnly: true, sameSite: 'strict', secure: ctx.secure, path: '/', overwrite: true });
}

export function clearSessionCookie(ctx: Context) {
  ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'strict', secure: ctx.secure, path: '/', overwrite: true, expires: new Date(0) });
}

/**
 * A request that states its origin must come from this origin (the host it was sent to, with
 * the scheme the proxy reports). Browsers send Origin on every cross-origin request and on
 * same-origin non-GET requests; a request without one (curl, tests) passes here and still needs
 * the CSRF token.
 */
export function checkOrigin(ctx: Context) {
  const origin = ctx.get('origin');
  if (!origin) return;
  // Koa 3's ctx.origin is the Origin header itself: this origin is built from scheme and host.
  if (origin !== `${ctx.protocol}://${ctx.host}`) throw new ApiError(403, 'csrf_failed', `requests from ${origin.slice(0, 200)} are refused: the dashboard accepts requests from its own origin only`);
}

/** CSRF protection of a state-changing request authenticated by the session cookie. */
export function checkCsrf(ctx: Context, crypto: Crypto, sessionToken: string) {
  if (SAFE_METHODS.has(ctx.method)) return;
  checkOrigin(ctx);
  const given = ctx.get(CSRF_HEADER);
  if (!given) throw new ApiError(403, 'csrf_failed', 'missing X-CSRF-Token header: a state-changing request of a dashboard session must carry the csrfToken of GET /dashboard/api/session');
  const a = Buffer.from(given);
  const b = Buffer.from(csrfTokenFor(crypto, sessionToken));
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw new ApiError(403, 'csrf_failed', 'the X-CSRF-Token header does not match this session');
}

export interface SessionKey {
  tokenHash: string;
  keyId: string;
  workspaceId: string;
  role: Role;
  sdrId: string | null;
  /** null when the key has no SDR, or its SDR is gone or of another workspace. */
  sdrActive: boolean | null;
  lastUsedAt: Date | null;
  /** last_seen_at is over a minute (or a tenth of the idle time) old: moved forward when the request succeeds (touchSession). */
  touch: boolean;
}

/**
 * The session of `token` with its API key: 401 authentication_failed when there is none, it
 * was idle longer than `idleMs`, or its key was revoked.
 */
export async function lookupSession(em: EntityManager, token: string, now: Date, idleMs: number): Promise<SessionKey> {
  const row = await findSession(em, hashSessionToken(token));
  if (!row || !row.workspace_id) throw new ApiError(401, 'authentication_failed', 'not signed in (or the session has ended): sign in with an API key');
  if (row.revoked_at) throw new ApiError(401, 'authentication_failed', 'the API key of this session has been revoked: sign in again with another key');
  const seen = toDate(row.last_seen_at);
  if (now.getTime() - seen.getTime() > idleMs) throw new ApiError(401, 'authentication_failed', 'the session expired after a period without use: sign in again');
  return {
    touch: now.getTime() - seen.getTime() > touchEvery(idleMs),
    tokenHash: row.token_hash,
    keyId: row.key_id,
    workspaceId: row.workspace_id,
    role: row.role,
    sdrId: row.sdr_id,
    sdrActive: row.sdr_active,
    lastUsedAt: row.last_used_at ? toDate(row.last_used_at) : null,
  };
}

/**
 * Marks the request's session, and its API key, as used once the request has succeeded: a
 * refused request writes nothing, not even this (at most once a minute per session, and per
 * key as a bearer request notes it). Without the key's, the key list showed a key in use through
 * the dashboard as unused since its sign-in.
 */
export function noteSessionUse(ctx: Context, session: SessionKey, now: Date) {
  if (session.touch) ctx.state.sessionUsed = session.tokenHash;
  if (!session.lastUsedAt || now.getTime() - session.lastUsedAt.getTime() > TOUCH_EVERY_MS) ctx.state.sessionKeyUsed = session.keyId;
}

/** Middleware: after a successful answer, moves the used session's last_seen_at and its key's last_used_at forward. */
export function touchSessions(now: () => Date) {
  return async (ctx: Context, next: () => Promise<void>) => {
    await next();
    if (ctx.status >= 400) return;
    const tokenHash = ctx.state.sessionUsed as string | undefined;
    const keyId = ctx.state.sessionKeyUsed as string | undefined;
    if (tokenHash) await touchSession(ctx.state.em as EntityManager, tokenHash, now());
    if (keyId) await noteKeyUsed(ctx.state.em as EntityManager, keyId, now());
  };
}
