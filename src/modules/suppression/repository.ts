import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { normalizeEmail } from '../../shared/email.ts';

// suppressions: workspace-wide, primary key (workspace_id, email_key). Owned here; the claim
// guard and enrollment read it (messages/), nothing else writes it.

export type SuppressionReason = 'manual' | 'hard_bounce' | 'unsubscribe' | 'reply_unsubscribe' | 'complaint';

/**
 * Adds addresses to the workspace's suppression list, in the caller's transaction; returns how
 * many were new. Already suppressed addresses and duplicates inside one call are not counted.
 */
export async function suppress(em: EntityManager, workspaceId: string, emails: string[], reason: SuppressionReason, source: string | null, now: Date): Promise<number> {
  const byKey = new Map<string, string>();
  for (const e of emails) byKey.set(normalizeEmail(e), e.trim());
  if (byKey.size === 0) return 0;
  // One statement for the whole batch through unnest(); the primary key (workspace_id,
  // email_key) makes repeats no-ops.
  const rows = await sql<{ email_key: string }>(em, 
    `insert into suppressions (workspace_id, email_key, email, reason, source, created_at)
     select ?, k, e, ?, ?, ? from unnest(?::text[], ?::text[]) as t(k, e)
     on conflict (workspace_id, email_key) do nothing
     returning email_key`,
    [workspaceId, reason, source, now, [...byKey.keys()], [...byKey.values()]],
  );
  return rows.length;
}

export async function unsuppress(em: EntityManager, workspaceId: string, emails: string[]): Promise<number> {
  const keys = [...new Set(emails.map(normalizeEmail))];
  const rows = await sql<{ email_key: string }>(em, 
    `delete from suppressions where workspace_id = ? and email_key = any(?::text[]) returning email_key`,
    [workspaceId, keys],
  );
  return rows.length;
}

export async function isSuppressed(em: EntityManager, workspaceId: string, email: string): Promise<boolean> {
  const rows = await sql(em, `select 1 from suppressions where workspace_id = ? and email_key = ?`, [workspaceId, normalizeEmail(email)]);
  return rows.length > 0;
}
