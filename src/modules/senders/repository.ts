import { sql } from '../../db/sql.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { toDate } from '../../shared/time.ts';
import { tallyWindow, usedSql } from '../messages/tallies.ts';
import { SenderAccountSchema, SenderPoolSchema, PoolMemberSchema, type PoolMember, type SenderAccount, type SenderPool, type SenderStatus } from './entities.ts';
import type { PoolMemberRow, SenderAccountRow, SenderPoolRow } from './rows.ts';

// The owner of `sender_accounts`, `sender_pools` and `pool_members`: ordinary CRUD through the
// ORM entities, the pools' usage and the claim's bookkeeping as hand-written SQL; the health
// transitions are in health.ts.

export async function insertSender(em: EntityManager, sender: SenderAccount): Promise<void> {
  await em.insert(SenderAccountSchema, sender);
}

/** An account by id (any workspace: the CLI names accounts by id), or null. */
export async function findSender(em: EntityManager, id: string): Promise<SenderAccount | null> {
  return em.findOne(SenderAccountSchema, { id });
}

/** An account of the workspace, or null. */
export async function senderOfWorkspace(em: EntityManager, workspaceId: string, id: string): Promise<SenderAccount | null> {
  return em.findOne(SenderAccountSchema, { id, workspaceId });
}

/** An account with its encrypted SMTP and IMAP URLs loaded (lazy properties), for a live test. */
export async function senderWithCredentials(em: EntityManager, id: string): Promise<SenderAccount | null> {
  return em.findOne(SenderAccountSchema, { id }, { populate: ['smtpUrlEnc', 'imapUrlEnc'] });
}

/** The workspace's accounts, oldest first. */
export async function listSenders(em: EntityManager, workspaceId: string): Promise<SenderAccount[]> {
  return em.find(SenderAccountSchema, { workspaceId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

/** The account's id if its address is at `domain` (case-insensitive), else null. */
export async function senderOfDomain(em: EntityManager, id: string, domain: string): Promise<string | null> {
  // sender_accounts primary key
  const [a] = await sql<{ id: string }>(em, `select id from sender_accounts where id = ? and lower(split_part(email, '@', 2)) = lower(?)`, [id, domain]);
  return a?.id ?? null;
}

/** Whether the address is one of the workspace's sender accounts' own (case-insensitive). */
export async function isSenderAddress(em: EntityManager, workspaceId: string, address: string): Promise<boolean> {
  // sender_accounts_workspace_email_key (workspace_id, lower(email))
  const rows = await sql(em, `select 1 from sender_accounts where workspace_id = ? and lower(email) = lower(?) limit 1`, [workspaceId, address]);
  return rows.length > 0;
}

/** Pauses or resumes an account read by findSender. */
export async function setSenderStatus(em: EntityManager, sender: SenderAccount, status: SenderStatus, now: Date): Promise<void> {
  sender.status = status;
  sender.updatedAt = now;
  await em.flush();
}

/** Reloads an account read by findSender (after a statement changed its row). */
export async function reloadSender(em: EntityManager, sender: SenderAccount): Promise<void> {
  await em.refresh(sender);
}

export async function insertPool(em: EntityManager, pool: SenderPool): Promise<void> {
  await em.insert(SenderPoolSchema, pool);
}

/** A pool by id (any workspace), or null. */
export async function findPool(em: EntityManager, id: string): Promise<SenderPool | null> {
  return em.findOne(SenderPoolSchema, { id });
}

/** A pool of the workspace, or null. */
export async function poolOfWorkspace(em: EntityManager, workspaceId: string, id: string): Promise<SenderPool | null> {
  return em.findOne(SenderPoolSchema, { id, workspaceId });
}

/** The workspace's oldest pool (a new campaign's default), or undefined. */
export async function firstPool(em: EntityManager, workspaceId: string): Promise<SenderPool | undefined> {
  const [pool] = await em.find(SenderPoolSchema, { workspaceId }, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: 1 });
  return pool;
}

export async function isPoolMember(em: EntityManager, poolId: string, senderAccountId: string): Promise<boolean> {
  return (await em.findOne(PoolMemberSchema, { poolId, senderAccountId })) !== null;
}

/** Adds a member; one that is already there stays as it was (two requests adding it at once included). */
export async function addPoolMember(em: EntityManager, member: PoolMember): Promise<void> {
  await sql(em, `insert into pool_members (pool_id, sender_account_id, added_at) values (?, ?, ?) on conflict (pool_id, sender_account_id) do nothing`, [
    member.poolId,
    member.senderAccountId,
    member.addedAt,
  ]);
}

/** Removes a member; an account that is not one stays out (two requests removing it at once included). */
export async function removePoolMember(em: EntityManager, poolId: string, senderAccountId: string): Promise<void> {
  // pool_members primary key
  await sql(em, `delete from pool_members where pool_id = ? and sender_account_id = ?`, [poolId, senderAccountId]);
}

/**
 * Locks a pool's row as its claim does (messages/claim.ts lockPool, FOR NO KEY UPDATE) until the
 * caller's commit: a claim of the pool in progress (which read its members) commits first, and
 * the pool's next claim reads what the caller wrote.
 */
export async function lockPoolRow(em: EntityManager, poolId: string): Promise<void> {
  await sql(em, `select 1 from sender_pools where id = ? for no key update`, [poolId]);
}

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
  // sender_pools_workspace_idx for the pools; the rolling window count as the claim reads it
  // (messages/tallies.ts: the pool's sent tallies, outbound_pool_sent_idx for the bucket the
  // window cuts); pool_members primary key for the members.
  const w = tallyWindow(now);
  const rows = await sql<Pick<SenderPoolRow, 'id' | 'name' | 'daily_capacity' | 'created_at'> & { sent: string; members: PoolMemberRow['sender_account_id'][] }>(em, 
    `select p.id, p.name, p.daily_capacity, p.created_at,
            ${usedSql('p.id', 'pool_id')} as sent,
            coalesce((select array_agg(pm.sender_account_id order by pm.added_at, pm.seq)
                        from pool_members pm where pm.pool_id = p.id), '{}') as members
       from sender_pools p
      where p.workspace_id = ? ${poolId ? 'and p.id = ?' : ''}
      order by p.created_at, p.id`,
    [w.edgeEnd, w.since, w.edgeEnd, workspaceId, ...(poolId ? [poolId] : [])],
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
  await sql(em, `update sender_accounts set last_sent_at = ? where id = any(?::text[])`, [now, accountIds], { name: 'claim.note_accounts' });
}

/** The identity and SMTP credentials (encrypted) of one account, for a one-off send. */
export async function accountForSending(em: EntityManager, id: string) {
  const [account] = await sql<Pick<SenderAccountRow, 'email' | 'name' | 'smtp_url_enc'>>(em, `select email, name, smtp_url_enc from sender_accounts where id = ?`, [id]);
  return account;
}

/** The pools of each sender account of the workspace (pool_members_sender_idx), in the order they joined. */
export async function poolsOfAccounts(em: EntityManager, workspaceId: string): Promise<Map<string, string[]>> {
  const rows = await sql<{ id: string; pools: string[] }>(
    em,
    `select a.id,
            coalesce((select array_agg(pm.pool_id order by pm.added_at, pm.seq) from pool_members pm where pm.sender_account_id = a.id), '{}') as pools
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
