import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { normalizeEmail } from '../../shared/email.ts';
import { toIso } from '../../shared/time.ts';
import { likeSubstring } from '../../shared/text.ts';

// suppressions: workspace-wide, primary key (workspace_id, email_key). Owned here; the claim
// guard and enrollment read it (messages/), nothing else writes it; the dashboard lists it here.

export type SuppressionReason = 'manual' | 'hard_bounce' | 'unsubscribe' | 'reply_unsubscribe' | 'complaint';

/**
 * Adds addresses to the workspace's suppression list, in the caller's transaction; returns how
 * many were new. Already suppressed addresses and duplicates inside one call are not counted.
 */
export async function suppress(em: EntityManager, workspaceId: string, emails: string[], reason: SuppressionReason, source: string | null, now: Date): Promise<number> {
  const byKey = new Map<string, string>();
  // The first spelling of an address in the call is the one kept for display (decisions.md).
  for (const e of emails) {
    const k = normalizeEmail(e);
    if (!byKey.has(k)) byKey.set(k, e.trim());
  }
  if (byKey.size === 0) return 0;
  // One statement for the whole batch through unnest(); the primary key (workspace_id,
  // email_key) makes repeats no-ops. In key order: two batches sharing addresses then take
  // their rows in one order; in the request's order, two requests listing the same addresses
  // the other way round deadlocked (each inserted one the other then waited for).
  const rows = await sql<{ email_key: string }>(em,
    `insert into suppressions (workspace_id, email_key, email, reason, source, created_at)
     select ?, k, e, ?, ?, ? from unnest(?::text[], ?::text[]) as t(k, e)
      order by k collate "C"
     on conflict (workspace_id, email_key) do nothing
     returning email_key`,
    [workspaceId, reason, source, now, [...byKey.keys()], [...byKey.values()]],
  );
  return rows.length;
}

/** Takes addresses off the workspace's list, in the caller's transaction; returns the keys that were on it. */
export async function unsuppress(em: EntityManager, workspaceId: string, emails: string[]): Promise<string[]> {
  const keys = [...new Set(emails.map(normalizeEmail))];
  const rows = await sql<{ email_key: string }>(
    em,
    `delete from suppressions where workspace_id = ? and email_key = any(?::text[]) returning email_key`,
    [workspaceId, keys],
  );
  return rows.map((r) => r.email_key);
}

export async function isSuppressed(em: EntityManager, workspaceId: string, email: string): Promise<boolean> {
  const rows = await sql(em, `select 1 from suppressions where workspace_id = ? and email_key = ?`, [workspaceId, normalizeEmail(email)]);
  return rows.length > 0;
}

/** Those of `emails` on the workspace's list, as given (the suppressions primary key). */
export async function suppressedAmong(em: EntityManager, workspaceId: string, emails: string[]): Promise<string[]> {
  if (!emails.length) return [];
  const rows = await sql<{ email_key: string }>(em, `select email_key from suppressions where workspace_id = ? and email_key = any(?::text[])`, [
    workspaceId,
    [...new Set(emails.map(normalizeEmail))],
  ]);
  const keys = new Set(rows.map((r) => r.email_key));
  return emails.filter((e) => keys.has(normalizeEmail(e)));
}

/** The suppression list as the dashboard pages and searches it, newest first. Scope first. */
export async function listSuppressions(em: EntityManager, workspaceId: string, opts: { q?: string; reason?: string; limit: number; offset: number }) {
  const where = ['workspace_id = ?'];
  const params: unknown[] = [workspaceId];
  // email_key is the lower-cased, trimmed address: suppressions_email_search_idx, on
  // lower(email_key) so that no lookup of one address can go through it (migration 0034),
  // answers the substring.
  if (opts.q) {
    where.push(`lower(email_key) like ? escape '\\'`);
    params.push(likeSubstring(opts.q.trim().toLowerCase()));
  }
  if (opts.reason) {
    where.push('reason = ?');
    params.push(opts.reason);
  }
  const rows = await sql<{ email: string; reason: string; source: string | null; created_at: Date | string }>(
    em,
    `select email, reason, source, created_at from suppressions where ${where.join(' and ')} order by created_at desc, email_key limit ? offset ?`,
    [...params, opts.limit, opts.offset],
  );
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from suppressions where ${where.join(' and ')}`, params);
  const total = Number(n);
  return {
    data: rows.map((r) => ({ email: r.email, reason: r.reason, source: r.source, createdAt: toIso(r.created_at) })),
    total,
    hasMore: opts.offset + rows.length < total,
  };
}
