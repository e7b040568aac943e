import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';
import { isEmail } from '../../shared/email.ts';
import type { Deps } from '../../deps.ts';
import type { ProbeOutcome } from '../../adapters/mailprobe.ts';
import { accountEmailTaken, poolExists, poolsOfAccounts } from '../senders/repository.ts';
import { requireMailUrl } from '../senders/service.ts';
import { sentLast24hByAccount } from '../messages/activity.ts';
import { mailUrl, type MailServerInput } from './mail-servers.ts';
import { probeFailed } from '../mailboxes/probe-failure.ts';
import type { DashboardOwners } from './owners.ts';

export interface AddSenderBody {
  email: string;
  name: string;
  smtp: MailServerInput;
  imap?: MailServerInput;
  poolId?: string;
  dailyLimit?: number;
  minIntervalSeconds?: number;
}

function probeView(o: ProbeOutcome) {
  return o.ok ? { ok: true } : { ok: false, kind: o.kind, error: o.error };
}

/**
 * Sender accounts and pools as the dashboard manages them (docs/dashboard.md): the CLI's
 * SenderService, scoped to the caller's workspace, with the live probe before an account is
 * saved and the rolling 24-hour usage in the listing.
 */
export class DashboardSenderService {
  private readonly senders: ReturnType<DashboardOwners['senders']>;

  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    owners: DashboardOwners,
  ) {
    this.senders = owners.senders(em);
  }

  /** The accounts with their IMAP health, rolling 24-hour sends and pools. */
  async list(workspaceId: string) {
    const now = this.deps.clock.now();
    const [accounts, pools] = await Promise.all([this.senders.listWithMailboxes(workspaceId), poolsOfAccounts(this.em, workspaceId)]);
    const sent = await sentLast24hByAccount(this.em, accounts.map((a) => a.id), now);
    return accounts.map((a) => ({ ...a, sentLast24h: sent.get(a.id) ?? 0, poolIds: pools.get(a.id) ?? [] }));
  }

  private async one(workspaceId: string, id: string) {
    const found = (await this.list(workspaceId)).find((a) => a.id === id);
    if (!found) throw ApiError.notFound('sender_account', `sender account ${id} not found`);
    return found;
  }

  /** SMTP, then IMAP when given: the same probe `mailgate sdr connect-mail` uses. Saves nothing. */
  async probe(input: { smtp: MailServerInput; imap?: MailServerInput }) {
    const smtp = await this.deps.mailProbe.smtp(mailUrl('smtp', input.smtp));
    const imap = input.imap ? await this.deps.mailProbe.imap(mailUrl('imap', input.imap)) : null;
    return { ok: smtp.ok && (imap === null || imap.ok), smtp: probeView(smtp), imap: imap && probeView(imap) };
  }

  /**
   * Adds an account once its servers accept the login: 422 mail_probe_failed (nothing saved)
   * otherwise. A bad or taken address or an unknown pool is refused before the servers are asked.
   */
  async add(workspaceId: string, body: AddSenderBody) {
    if (!isEmail(body.email.trim())) throw ApiError.invalid(`body email: "${body.email.slice(0, 320)}" is not a valid email address`, { errors: [{ field: 'email', message: 'not a valid email address' }] });
    if (await accountEmailTaken(this.em, workspaceId, body.email.trim())) throw new ApiError(409, 'already_exists', `a sender account for ${body.email.trim()} already exists in this workspace`);
    if (body.poolId && !(await poolExists(this.em, workspaceId, body.poolId)))
      throw ApiError.notFound('sender_pool', `sender pool ${body.poolId} not found in this workspace`);
    const smtpUrl = mailUrl('smtp', body.smtp);
    const imapUrl = body.imap ? mailUrl('imap', body.imap) : undefined;
    const smtp = await this.deps.mailProbe.smtp(smtpUrl);
    if (!smtp.ok) throw probeFailed('smtp', smtp);
    if (imapUrl) {
      const imap = await this.deps.mailProbe.imap(imapUrl);
      if (!imap.ok) throw probeFailed('imap', imap);
    }
    const sender = await this.senders.add({
      workspaceId,
      email: body.email,
      name: body.name,
      smtpUrl,
      imapUrl,
      poolId: body.poolId,
      dailyLimit: body.dailyLimit,
      minIntervalMs: body.minIntervalSeconds === undefined ? undefined : Math.round(body.minIntervalSeconds * 1000),
    });
    return this.one(workspaceId, sender.id);
  }

  async setStatus(workspaceId: string, id: string, status: 'active' | 'paused') {
    await this.one(workspaceId, id);
    await this.senders.setStatus(id, status);
    return this.one(workspaceId, id);
  }

  /** Changes an account's limits or SMTP settings, the servers given as the form's fields (updateAccount). */
  async update(workspaceId: string, id: string, body: { dailyLimit?: number | null; minIntervalSeconds?: number; smtp?: MailServerInput }) {
    return this.updateAccount(workspaceId, id, {
      dailyLimit: body.dailyLimit,
      minIntervalSeconds: body.minIntervalSeconds,
      smtpUrl: body.smtp ? mailUrl('smtp', body.smtp) : undefined,
    });
  }

  /**
   * Changes an account's limits or SMTP settings (`mailgate sender update` gives the server as
   * its URL). New SMTP settings (a rotated password) are probed first, as when the account was
   * added: a refusal is 422 mail_probe_failed and nothing is changed.
   */
  async updateAccount(workspaceId: string, id: string, changes: { dailyLimit?: number | null; minIntervalSeconds?: number; smtpUrl?: string }) {
    await this.one(workspaceId, id);
    const { smtpUrl } = changes;
    if (smtpUrl !== undefined) {
      requireMailUrl('smtp', smtpUrl);
      const smtp = await this.deps.mailProbe.smtp(smtpUrl);
      if (!smtp.ok) throw probeFailed('smtp', smtp);
    }
    await this.senders.update(workspaceId, id, {
      dailyLimit: changes.dailyLimit,
      minIntervalMs: changes.minIntervalSeconds === undefined ? undefined : Math.round(changes.minIntervalSeconds * 1000),
      smtpUrl,
    });
    return this.one(workspaceId, id);
  }

  async setPoolCapacity(workspaceId: string, poolId: string, dailyCapacity: number) {
    await this.senders.setPoolCapacity(workspaceId, poolId, dailyCapacity);
    return this.pool(workspaceId, poolId);
  }

  async createPool(workspaceId: string, body: { name: string; dailyCapacity: number; senderAccountIds?: string[] }) {
    const pool = await this.senders.createPool(workspaceId, body.name, body.dailyCapacity, body.senderAccountIds ?? []);
    return this.pool(workspaceId, pool.id);
  }

  async addMember(workspaceId: string, poolId: string, senderAccountId: string) {
    await this.pool(workspaceId, poolId);
    await this.senders.addToPool(poolId, senderAccountId);
    return this.pool(workspaceId, poolId);
  }

  /** Takes an account out of a pool (a no-op when it is not a member): SenderService.removeFromPool says what becomes of its leads. */
  async removeMember(workspaceId: string, poolId: string, senderAccountId: string) {
    await this.pool(workspaceId, poolId);
    await this.senders.removeFromPool(poolId, senderAccountId);
    return this.pool(workspaceId, poolId);
  }

  private async pool(workspaceId: string, poolId: string) {
    const found = (await this.senders.listPools(workspaceId)).find((p) => p.id === poolId);
    if (!found) throw ApiError.notFound('sender_pool', `sender pool ${poolId} not found`);
    return found;
  }
}
