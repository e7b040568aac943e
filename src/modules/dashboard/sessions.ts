import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import { checkRole } from '../../http/auth.ts';
import { csrfTokenFor, hashSessionToken } from '../../http/session.ts';
import type { Role } from '../workspaces/entities.ts';
import { findKey, noteKeyUsed } from '../workspaces/api-keys-repository.ts';
import { workspaceName } from '../workspaces/repository.ts';
import { deleteSession, insertSession, sweepIdleSessions } from './session-repository.ts';
import { transaction } from '../../db/transaction.ts';

export interface SessionView {
  role: Role;
  workspaceId: string;
  workspaceName: string;
  sdrId: string | null;
  keyId: string;
  csrfToken: string;
  idleTimeoutSeconds: number;
}

/** Dashboard sign-in and sign-out (docs/dashboard.md); the lookup is http/session.ts's. */
export class DashboardSessionService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  /**
   * Exchanges an API key for a new session: the key must be one a request could use (not
   * revoked, its workspace there, an SDR key's SDR active). Returns the cookie's token (shown
   * to nobody else) and what the front end needs. `previous` is the session cookie the request
   * came with, if any: the new session replaces it (it is ended in the same transaction), so
   * signing in again in a browser leaves no earlier session working behind the new cookie.
   */
  async signIn(apiKey: string, previous: string | null = null): Promise<{ token: string; view: SessionView }> {
    const key = await findKey(this.em, apiKey.trim());
    if (!key || key.revoked_at) throw new ApiError(401, 'authentication_failed', key ? 'this API key has been revoked' : 'invalid API key');
    if (!key.workspace_id) throw new ApiError(404, 'workspace_not_found', 'the workspace of this API key no longer exists');
    if (key.role === 'sdr') checkRole('sdr', { role: key.role, sdrId: key.sdr_id, sdrActive: key.sdr_active });
    const token = randomBytes(32).toString('base64url');
    const now = this.deps.clock.now();
    const workspaceId = key.workspace_id;
    await transaction(this.em, async (em) => {
      // Sessions idle past the limit are over; sign-in is where they are swept.
      await sweepIdleSessions(em, new Date(now.getTime() - this.deps.config.dashboardSessionIdle));
      if (previous) await deleteSession(em, hashSessionToken(previous));
      await insertSession(em, hashSessionToken(token), workspaceId, key.id, now);
      await noteKeyUsed(em, key.id, now);
    });
    return { token, view: await this.view(token, { keyId: key.id, workspaceId, role: key.role, sdrId: key.sdr_id }) };
  }

  async view(token: string, s: { keyId: string; workspaceId: string; role: Role; sdrId: string | null }): Promise<SessionView> {
    return {
      role: s.role,
      workspaceId: s.workspaceId,
      workspaceName: await workspaceName(this.em, s.workspaceId),
      sdrId: s.role === 'sdr' ? s.sdrId : null,
      keyId: s.keyId,
      csrfToken: csrfTokenFor(this.deps.crypto, token),
      idleTimeoutSeconds: Math.floor(this.deps.config.dashboardSessionIdle / 1000),
    };
  }

  async signOut(token: string): Promise<void> {
    await deleteSession(this.em, hashSessionToken(token));
  }
}
