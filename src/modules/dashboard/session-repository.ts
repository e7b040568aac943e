import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { ApiKeyRow } from '../workspaces/repository.ts';
import type { SdrRow } from '../sdrs/rows.ts';

// dashboard_sessions (0016): a signed-in browser, stored only as the SHA-256 of its cookie's
// token (hashing is http/session.ts's: every function here takes the hash). Written by sign-in
// and sign-out (sessions.ts), a key's revocation (service.ts) and the touch after a request
// (http/session.ts); sessions end with their workspace and key through foreign keys.

/** A session (dashboard_sessions' columns) with its key and whether the key's SDR is active. */
export type SessionRow = { token_hash: string; last_seen_at: Date | string } & Pick<ApiKeyRow, 'workspace_id' | 'role' | 'sdr_id' | 'revoked_at' | 'last_used_at'> & {
  key_id: ApiKeyRow['id'];
  sdr_active: SdrRow['active'] | null;
};

/** The session of a token hash with its API key and, for an sdr key, whether its SDR is active. */
export async function findSession(em: EntityManager, tokenHash: string): Promise<SessionRow | undefined> {
  const [row] = await sql<SessionRow>(
    em,
    `select s.token_hash, s.last_seen_at, k.id as key_id, k.workspace_id, k.role, k.sdr_id, k.revoked_at, k.last_used_at, d.active as sdr_active
       from dashboard_sessions s
       join api_keys k on k.id = s.key_id
       left join sdrs d on d.id = k.sdr_id and d.workspace_id = k.workspace_id
      where s.token_hash = ?`,
    [tokenHash],
    { name: 'mailgate_dashboard_session_v1' },
  );
  return row;
}

/** Ends the sessions idle since before `seenBefore` (dashboard_sessions_seen_idx). */
export async function sweepIdleSessions(em: EntityManager, seenBefore: Date): Promise<void> {
  await sql(em, 'delete from dashboard_sessions where last_seen_at < ?', [seenBefore]);
}

export async function insertSession(em: EntityManager, tokenHash: string, workspaceId: string, keyId: string, now: Date): Promise<void> {
  await sql(em, 'insert into dashboard_sessions (token_hash, workspace_id, key_id, created_at, last_seen_at) values (?, ?, ?, ?, ?)', [
    tokenHash,
    workspaceId,
    keyId,
    now,
    now,
  ]);
}

export async function deleteSession(em: EntityManager, tokenHash: string): Promise<void> {
  await sql(em, 'delete from dashboard_sessions where token_hash = ?', [tokenHash]);
}

/** Ends every session of a key (dashboard_sessions_key_idx). */
export async function deleteSessionsOfKey(em: EntityManager, keyId: string): Promise<void> {
  await sql(em, 'delete from dashboard_sessions where key_id = ?', [keyId]);
}

/** Moves the session's last use forward (the idle expiry counts from it). */
export async function touchSession(em: EntityManager, tokenHash: string, now: Date): Promise<void> {
  await sql(em, 'update dashboard_sessions set last_seen_at = ? where token_hash = ?', [now, tokenHash]);
}
