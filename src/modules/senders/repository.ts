import { sql } from '../../db/sql.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { toDate } from '../../shared/time.ts';

export interface PoolRow {
  id: string;
  name: string;
  dailyCapacity: number;
  sentLast24h: number;
  senderAccountIds: string[];
  createdAt: Date;
}

/** Pools with their member ids and rolling 24-hour usage, in one statement. */
export async function listPoolsWithUsage(em: EntityManager, workspaceId: string, now: Date, poolId?: string): Promise<PoolRow[]> {
  // sender_pools_workspace_idx for the pools; outbound_pool_sent_idx (pool_id, sent_at) for the
  // rolling window count; pool_members primary key for the members.
  const rows = await sql<{ id: string; name: string; daily_capacity: number; created_at: Date | string; sent: string; members: string[] }>(em, 
    `select p.id, p.name, p.daily_capacity, p.created_at,
            (select count(*) from outbound_messages m
              where m.pool_id = p.id and m.sent_at is not null and m.sent_at > ?::timestamptz - interval '24 hours') as sent,
            coalesce((select array_agg(pm.sender_account_id order by pm.added_at, pm.sender_account_id)
                        from pool_members pm where pm.pool_id = p.id), '{}') as members
       from sender_pools p
      where p.workspace_id = ? ${poolId ? 'and p.id = ?' : ''}
      order by p.created_at, p.id`,
    poolId ? [now, workspaceId, poolId] : [now, workspaceId],
  );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    dailyCapacity: r.daily_capacity,
    sentLast24h: Number(r.sent),
    senderAccountIds: r.members,
    createdAt: toDate(r.created_at),
  }));
}

/** The accounts a claim just gave messages to: their minimum interval counts from now. */
export async function noteClaimed(em: EntityManager, accountIds: string[], now: Date): Promise<void> {
  await sql(em, `update sender_accounts set last_sent_at = ? where id = any(?::text[])`, [now, accountIds]);
}

/** The identity and SMTP credentials (encrypted) of one account, for a one-off send. */
export async function accountForSending(em: EntityManager, id: string) {
  const [account] = await sql<{ email: string; name: string; smtp_url_enc: string }>(em, `select email, name, smtp_url_enc from sender_accounts where id = ?`, [id]);
  return account;
}

/** The pools of each sender account of the workspace (pool_members_sender_idx), in the order they joined. */
export async function poolsOfAccounts(em: EntityManager, workspaceId: string): Promise<Map<string, string[]>> {
  const rows = await sql<{ id: string; pools: string[] }>(
    em,
    `select a.id,
            coalesce((select array_agg(pm.pool_id order by pm.added_at, pm.pool_id) from pool_members pm where pm.sender_account_id = a.id), '{}') as pools
       from sender_accounts a
      where a.workspace_id = ?`,
    [workspaceId],
  );
  return new Map(rows.map((r) => [r.id, r.pools]));
}

/** Whether the workspace has an account for this address (compared case-insensitively). */
export async function accountEmailTaken(em: EntityManager, workspaceId: string, email: string): Promise<boolean> {
  return (await sql(em, 'select 1 from sender_accounts where workspace_id = ? and lower(email) = lower(?)', [workspaceId, email])).length > 0;
}

/** Whether the workspace has this pool. */
export async function poolExists(em: EntityManager, workspaceId: string, poolId: string): Promise<boolean> {
  return (await sql(em, 'select 1 from sender_pools where workspace_id = ? and id = ?', [workspaceId, poolId])).length > 0;
}
