import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import { sdrView } from '../sdrs/service.ts';
import { EARLIEST_INSTANT_MS, isoOrNull } from '../../shared/time.ts';
import type { Role } from '../workspaces/entities.ts';
import { getKey, listKeys } from '../workspaces/api-keys-repository.ts';
import { listSuppressions } from '../suppression/repository.ts';
import { campaignExists } from '../campaigns/repository.ts';
import { BUCKET_MS, campaignTimeline, type Bucket } from '../messages/activity.ts';
import { deleteSessionsOfKey } from './session-repository.ts';
import { mailUrl, type MailServerInput } from './mail-servers.ts';
import type { DashboardOwners } from './owners.ts';
import { transaction } from '../../db/transaction.ts';

export const MAX_BUCKETS = 1000;

/**
 * The flows the spec keeps out of the API (docs/dashboard.md): creating and revoking keys,
 * removing a suppressed address, connecting an SDR's mailbox. Each calls the service the CLI
 * command of the same flow calls (handed in by services.ts), scoped to the session's workspace.
 */
export class DashboardService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    private readonly owners: DashboardOwners,
  ) {}

  async createKey(workspaceId: string, input: { name: string; role: Role; sdrId?: string }) {
    const created = await this.owners.workspaces(this.em).createKey({ workspace: workspaceId, role: input.role, sdrId: input.sdrId, name: input.name });
    const view = (await getKey(this.em, workspaceId, created.id))!;
    return { id: created.id, key: created.key, keyPrefix: view.keyPrefix, name: view.name, role: view.role, sdrId: view.sdrId, createdAt: view.createdAt };
  }

  /** Revokes a key of the workspace and ends its dashboard sessions, in one transaction. */
  async revokeKey(workspaceId: string, keyId: string) {
    return transaction(this.em, async (em) => {
      if (!(await getKey(em, workspaceId, keyId))) throw ApiError.notFound('key', `API key ${keyId} not found`);
      await this.owners.workspaces(em).revokeKey(keyId);
      await deleteSessionsOfKey(em, keyId);
      const view = (await getKey(em, workspaceId, keyId))!;
      return { id: keyId, revoked: true as const, revokedAt: view.revokedAt! };
    });
  }

  listKeys(workspaceId: string, limit: number, offset: number) {
    return listKeys(this.em, workspaceId, limit, offset);
  }

  listSuppressions(workspaceId: string, opts: { q?: string; reason?: string; limit: number; offset: number }) {
    return listSuppressions(this.em, workspaceId, opts);
  }

  /**
   * The campaign's counts per UTC hour or day. Defaults: up to now, over the last 48 hours or
   * 30 days; at most MAX_BUCKETS buckets.
   */
  async timeline(workspaceId: string, campaignId: string, opts: { bucket: Bucket; from?: string; to?: string }) {
    if (!(await campaignExists(this.em, workspaceId, campaignId))) throw ApiError.notFound('campaign');
    const size = BUCKET_MS[opts.bucket];
    const floor = (d: Date) => new Date(Math.floor(d.getTime() / size) * size);
    const to = floor(opts.to ? new Date(opts.to) : this.deps.clock.now());
    // The default range stops at the first instant the API can name (year 0001, shared/time.ts).
    const from = floor(opts.from ? new Date(opts.from) : new Date(Math.max(EARLIEST_INSTANT_MS, to.getTime() - (opts.bucket === 'hour' ? 47 : 29) * size)));
    if (from > to) throw ApiError.invalid('query from: must not be after to', { errors: [{ field: 'from', message: 'must not be after to' }] });
    const buckets = (to.getTime() - from.getTime()) / size + 1;
    if (buckets > MAX_BUCKETS)
      throw ApiError.invalid(`query from: the range holds ${buckets} ${opts.bucket}s; at most ${MAX_BUCKETS} buckets (use bucket=day or a shorter range)`, {
        errors: [{ field: 'from', message: `at most ${MAX_BUCKETS} buckets` }],
      });
    return { bucket: opts.bucket, from: from.toISOString(), to: to.toISOString(), data: await campaignTimeline(this.em, campaignId, opts.bucket, from, to) };
  }

  async removeSuppression(workspaceId: string, email: string) {
    const removed = await this.owners.suppression(this.em).remove(workspaceId, [email]);
    if (removed === 0) throw ApiError.notFound('suppression', `${email.slice(0, 320)} is not on the suppression list`);
    return { removed };
  }

  /**
   * Tests the SDR's mailbox live (SMTP, then IMAP) and stores it only when both accept:
   * otherwise 422 mail_probe_failed and the SDR's connection stays as it was.
   */
  async connectSdrMail(workspaceId: string, sdrId: string, input: { email?: string; smtp: MailServerInput; imap: MailServerInput }) {
    const sdrs = this.owners.sdrs(this.em);
    const sdr = await sdrs.get(sdrId);
    if (sdr.workspaceId !== workspaceId) throw ApiError.notFound('sdr', `SDR ${sdrId} not found`);
    const { mailbox } = await sdrs.connectMail(sdrId, { smtpUrl: mailUrl('smtp', input.smtp), imapUrl: mailUrl('imap', input.imap), email: input.email }, true);
    const view = sdrView(sdr, mailbox);
    return { id: sdr.id, mailConnected: view.mailConnected, mailEmail: view.mailEmail, healthState: mailbox.healthState, lastSyncedAt: isoOrNull(mailbox.lastSyncedAt) };
  }
}
