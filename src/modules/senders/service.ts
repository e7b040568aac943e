import type { EntityManager } from '@mikro-orm/postgresql';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { ApiError } from '../../shared/errors.ts';
import { newId } from '../../adapters/ids.ts';
import { addSenderWatch, senderWatches } from '../mailboxes/repository.ts';
import { parseMailUrl } from '../../adapters/mailurl.ts';
import type { Deps } from '../../deps.ts';
import type { SenderAccount, SenderStatus } from './entities.ts';
import {
  addPoolMember,
  findPool,
  findSender,
  insertPool,
  insertSender,
  isPoolMember,
  listPoolsWithUsage,
  listSenders,
  lockPoolRow,
  poolOfWorkspace,
  reloadSender,
  removePoolMember,
  senderOfWorkspace,
  senderWithCredentials,
  setSenderStatus,
  type PoolRow,
} from './repository.ts';
import { clearSenderHealth, logSenderTransition } from './health.ts';
import { normalizeEmail, isEmail } from '../../shared/email.ts';
import { requireName } from '../../shared/names.ts';
import { transaction } from '../../db/transaction.ts';
import { sql } from '../../db/sql.ts';

export interface AddSenderInput {
  workspaceId: string;
  email: string;
  name: string;
  smtpUrl: string;
  imapUrl?: string;
  poolId?: string;
  dailyLimit?: number;
  minIntervalMs?: number;
}

/** 400 invalid_request naming the field when `url` is not an smtp(s):// (imap(s)://) server URL. */
export function requireMailUrl(field: 'smtp' | 'imap', url: string): void {
  try {
    parseMailUrl(url, field);
  } catch (err) {
    throw ApiError.invalid(`${field}: ${(err as Error).message}`);
  }
}

export function senderView(s: SenderAccount, imapHealth: string | null = null) {
  return {
    id: s.id,
    email: s.email,
    name: s.name,
    status: s.status,
    health: s.health,
    healthError: s.health === 'ok' ? null : s.healthError,
    healthRetryAt: s.healthRetryAt ? s.healthRetryAt.toISOString() : null,
    imapHealth,
    dailyLimit: s.dailyLimit,
    minIntervalSeconds: s.minIntervalMs / 1000,
  };
}

export function poolView(p: PoolRow) {
  const remaining = Math.max(0, p.dailyCapacity - p.sentLast24h);
  return {
    id: p.id,
    name: p.name,
    dailyCapacity: p.dailyCapacity,
    remainingVolume: remaining,
    remainingToday: remaining,
    senderAccountIds: p.senderAccountIds,
    senderCount: p.senderAccountIds.length,
  };
}


export class SenderService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async add(input: AddSenderInput): Promise<SenderAccount> {
    const email = input.email.trim();
    if (!isEmail(email)) throw ApiError.invalid(`email: "${input.email}" is not a valid email address`);
    const name = requireName(input.name);
    requireMailUrl('smtp', input.smtpUrl);
    if (input.imapUrl !== undefined) requireMailUrl('imap', input.imapUrl);
    const now = this.deps.clock.now();
    const sender: SenderAccount = {
      id: newId('snd'),
      workspaceId: input.workspaceId,
      email,
      name,
      status: 'active',
      smtpUrlEnc: this.deps.crypto.encrypt(input.smtpUrl),
      imapUrlEnc: input.imapUrl ? this.deps.crypto.encrypt(input.imapUrl) : null,
      dailyLimit: input.dailyLimit ?? null,
      minIntervalMs: input.minIntervalMs ?? 0,
      health: 'unknown',
      healthError: null,
      healthCheckedAt: null,
      lastSentAt: null,
      createdAt: now,
      updatedAt: now,
    };
    try {
      await transaction(this.em, async (em) => {
        if (input.poolId) await this.requirePool(em, input.workspaceId, input.poolId);
        // Explicit inserts: the entities carry plain foreign keys, so the order is ours to keep.
        await insertSender(em, sender);
        // Its mailbox is watched from now on: mail received from here is processed, older is not.
        if (input.imapUrl)
          await addSenderWatch(em, input.workspaceId, sender.id, now);
        if (input.poolId) await addPoolMember(em, { poolId: input.poolId, senderAccountId: sender.id, addedAt: now });
      });
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new ApiError(409, 'already_exists', `a sender account for ${email} already exists in this workspace`);
      throw err;
    }
    return sender;
  }

  async setStatus(id: string, status: SenderStatus): Promise<SenderAccount> {
    const sender = await findSender(this.em, id);
    if (!sender) throw ApiError.notFound('sender_account');
    await setSenderStatus(this.em, sender, status, this.deps.clock.now());
    // Resuming is how an operator says "try this account again" after an auth failure, an
    // unreachable server or throttling: it is tried at the next claim.
    if (status === 'active') {
      const cleared = await clearSenderHealth(this.em, id, this.deps.clock.now());
      if (cleared) {
        logSenderTransition(this.deps.log, cleared, 'operator resume');
        await reloadSender(this.em, sender);
      }
    }
    return sender;
  }

  /**
   * Changes an account's daily limit (null: none), minimum interval or SMTP URL. Taken at the
   * next claim: a limit lowered below what the account sent in the last 24 hours stops it until
   * the window moves on (nothing already sent is undone). The update waits for a claim holding
   * the account's row lock (messages/claim.ts), so no claim decides on a mix of old and new
   * limits. A new SMTP URL (a rotated password) clears a failing health back to `unknown`, as a
   * resume does: the account is tried with it at the next claim (each URL has its own
   * transport, adapters/smtp.ts, so nothing goes out with the old one after the claim).
   */
  async update(workspaceId: string, id: string, changes: { dailyLimit?: number | null; minIntervalMs?: number; smtpUrl?: string }): Promise<void> {
    if (changes.smtpUrl !== undefined) requireMailUrl('smtp', changes.smtpUrl);
    const now = this.deps.clock.now();
    const cleared = await transaction(this.em, async (em) => {
      const sender = await this.requireSender(em, workspaceId, id);
      if (changes.dailyLimit !== undefined) sender.dailyLimit = changes.dailyLimit;
      if (changes.minIntervalMs !== undefined) sender.minIntervalMs = changes.minIntervalMs;
      sender.updatedAt = now;
      await em.flush();
      if (changes.smtpUrl === undefined) return null;
      await sql(em, 'update sender_accounts set smtp_url_enc = ? where id = ?', [this.deps.crypto.encrypt(changes.smtpUrl), id]);
      return clearSenderHealth(em, id, now);
    });
    if (cleared) logSenderTransition(this.deps.log, cleared, 'new SMTP settings');
    // The caller's copy of the account (loaded before this transaction) reads the new row.
    const sender = await findSender(this.em, id);
    if (sender) await reloadSender(this.em, sender);
  }

  /** Changes a pool's rolling 24-hour capacity; taken at its next claim (below what it sent: it sends nothing until the window moves on). */
  async setPoolCapacity(workspaceId: string, poolId: string, dailyCapacity: number): Promise<void> {
    if (!Number.isInteger(dailyCapacity) || dailyCapacity < 0) throw ApiError.invalid('dailyCapacity: must be a whole number >= 0');
    await transaction(this.em, async (em) => {
      const pool = await this.requirePool(em, workspaceId, poolId);
      pool.dailyCapacity = dailyCapacity;
      await em.flush();
    });
  }

  /** `sender test`: logs in to the account's SMTP and IMAP servers now (both at once: each may wait for its server's timeout). */
  async testConnection(id: string) {
    // The credentials are lazy properties: loaded only when asked for.
    const sender = await senderWithCredentials(this.em, id);
    if (!sender) throw ApiError.notFound('sender_account', `sender account ${id} not found`);
    const [smtp, imap] = await Promise.all([
      this.deps.mailProbe.smtp(this.deps.crypto.decrypt(sender.smtpUrlEnc)),
      sender.imapUrlEnc ? this.deps.mailProbe.imap(this.deps.crypto.decrypt(sender.imapUrlEnc)) : Promise.resolve(null),
    ]);
    return { id: sender.id, email: sender.email, smtp, imap };
  }

  async list(workspaceId: string): Promise<SenderAccount[]> {
    return listSenders(this.em, workspaceId);
  }

  /** Accounts with the health of their IMAP connection (null: no mailbox watched). */
  async listWithMailboxes(workspaceId: string) {
    const senders = await this.list(workspaceId);
    const watches = await senderWatches(this.em, workspaceId);
    const byId = new Map(watches.map((w) => [w.sender_account_id, w.status]));
    return senders.map((s) => senderView(s, byId.get(s.id) ?? null));
  }

  async createPool(workspaceId: string, name: string, dailyCapacity: number, senderIds: string[] = []) {
    name = requireName(name);
    if (!Number.isInteger(dailyCapacity) || dailyCapacity < 0) throw ApiError.invalid('dailyCapacity: must be a whole number >= 0');
    const now = this.deps.clock.now();
    const id = newId('pool');
    await transaction(this.em, async (em) => {
      await insertPool(em, { id, workspaceId, name, dailyCapacity, createdAt: now });
      for (const sid of new Set(senderIds)) {
        await this.requireSender(em, workspaceId, sid);
        await addPoolMember(em, { poolId: id, senderAccountId: sid, addedAt: now });
      }
    });
    return { id, name, dailyCapacity };
  }

  async addToPool(poolId: string, senderId: string) {
    return transaction(this.em, async (em) => {
      const pool = await findPool(em, poolId);
      if (!pool) throw ApiError.notFound('sender_pool');
      await this.requireSender(em, pool.workspaceId, senderId);
      if (!(await isPoolMember(em, poolId, senderId))) await addPoolMember(em, { poolId, senderAccountId: senderId, addedAt: this.deps.clock.now() });
      const [row] = await listPoolsWithUsage(em, pool.workspaceId, this.deps.clock.now(), poolId);
      return { id: poolId, senderAccountIds: row.senderAccountIds };
    });
  }

  /**
   * Takes an account out of a pool (a no-op when it is not a member). Decided under the pool's
   * row lock, as its claims are: a claim in progress finishes first, and from the commit on no
   * claim of the pool gives the account a message. What it already claimed finishes (the send's
   * guard asks the account's status, not its pools), and still counts in the pool's capacity,
   * as everything it sent through the pool does. The leads it was sending a sequence to (their
   * sticky account) get their next steps from the pool's other accounts, as when it is paused
   * (sending/capacity.ts pickAccount), threaded on the earlier messages (docs/decisions.md).
   */
  async removeFromPool(poolId: string, senderId: string) {
    return transaction(this.em, async (em) => {
      const pool = await findPool(em, poolId);
      if (!pool) throw ApiError.notFound('sender_pool');
      await this.requireSender(em, pool.workspaceId, senderId);
      await lockPoolRow(em, poolId);
      await removePoolMember(em, poolId, senderId);
      const [row] = await listPoolsWithUsage(em, pool.workspaceId, this.deps.clock.now(), poolId);
      return { id: poolId, senderAccountIds: row.senderAccountIds };
    });
  }

  /** The workspace of a pool the CLI names by id alone. */
  async workspaceOfPool(poolId: string): Promise<string> {
    const pool = await findPool(this.em, poolId);
    if (!pool) throw ApiError.notFound('sender_pool', `sender pool ${poolId} not found`);
    return pool.workspaceId;
  }

  /** The workspace of an account the CLI names by id alone. */
  async workspaceOfSender(id: string): Promise<string> {
    const sender = await findSender(this.em, id);
    if (!sender) throw ApiError.notFound('sender_account', `sender account ${id} not found`);
    return sender.workspaceId;
  }

  async listPools(workspaceId: string) {
    return (await listPoolsWithUsage(this.em, workspaceId, this.deps.clock.now())).map(poolView);
  }

  private async requirePool(em: EntityManager, workspaceId: string, poolId: string) {
    const pool = await poolOfWorkspace(em, workspaceId, poolId);
    if (!pool) throw ApiError.notFound('sender_pool', `sender pool ${poolId} not found in this workspace`);
    return pool;
  }

  private async requireSender(em: EntityManager, workspaceId: string, senderId: string) {
    const sender = await senderOfWorkspace(em, workspaceId, senderId);
    if (!sender) throw ApiError.notFound('sender_account', `sender account ${senderId} not found in this workspace`);
    return sender;
  }
}
