import type { EntityManager } from '@mikro-orm/postgresql';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { ApiError } from '../../shared/errors.ts';
import { newId } from '../../adapters/ids.ts';
import { parseMailUrl } from '../../adapters/mailurl.ts';
import { isEmail } from '../../shared/email.ts';
import type { Deps } from '../../services.ts';
import { SdrSchema, SdrMailboxSchema, type Sdr, type SdrMailbox, type MailHealth } from './entities.ts';
import type { ProbeOutcome } from '../../adapters/mailprobe.ts';

export function sdrView(sdr: Sdr, mailbox: SdrMailbox | null) {
  const connected = !!mailbox && mailbox.healthState === 'active';
  return { id: sdr.id, name: sdr.name, email: sdr.email, mailConnected: connected, mailEmail: connected ? mailbox!.email : null };
}

function healthOf(outcome: ProbeOutcome): MailHealth {
  if (outcome.ok) return 'active';
  return outcome.kind === 'auth_failed' ? 'needs_reauth' : outcome.kind === 'rate_limited' ? 'rate_limited' : 'disconnected';
}

export class SdrService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async add(workspaceId: string, name: string, email: string): Promise<Sdr> {
    if (!name.trim()) throw ApiError.invalid('name: must not be empty');
    if (!isEmail(email)) throw ApiError.invalid(`email: "${email}" is not a valid email address`);
    const now = this.deps.clock.now();
    const sdr: Sdr = {
      id: newId('sdr'),
      workspaceId,
      name: name.trim(),
      email: email.trim(),
      active: true,
      tone: null,
      signature: null,
      calendarUrl: null,
      language: null,
      createdAt: now,
      updatedAt: now,
    };
    try {
      await this.em.insert(SdrSchema, sdr);
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new ApiError(409, 'already_exists', `an SDR with email ${email.trim()} already exists in this workspace`);
      throw err;
    }
    return sdr;
  }

  async get(id: string): Promise<Sdr> {
    const sdr = await this.em.findOne(SdrSchema, { id });
    if (!sdr) throw ApiError.notFound('sdr', `SDR ${id} not found`);
    return sdr;
  }

  /**
   * Connects the SDR's mailbox: the credentials are checked against the real SMTP and IMAP
   * servers and the outcome becomes the mailbox's health (active, needs_reauth, rate_limited
   * or disconnected). The connection is stored either way so it can be retried.
   */
  async connectMail(sdrId: string, input: { smtpUrl: string; imapUrl: string; email?: string }) {
    const sdr = await this.get(sdrId);
    for (const [field, url, proto] of [['smtp', input.smtpUrl, 'smtp'], ['imap', input.imapUrl, 'imap']] as const) {
      try {
        parseMailUrl(url, proto);
      } catch (err) {
        throw ApiError.invalid(`${field}: ${(err as Error).message}`);
      }
    }
    const email = (input.email ?? sdr.email).trim();
    if (!isEmail(email)) throw ApiError.invalid(`email: "${email}" is not a valid email address`);
    const smtp = await this.deps.mailProbe.smtp(input.smtpUrl);
    const imap = smtp.ok ? await this.deps.mailProbe.imap(input.imapUrl) : smtp;
    const now = this.deps.clock.now();
    const outcome = smtp.ok ? imap : smtp;
    const row: SdrMailbox = {
      sdrId: sdr.id,
      workspaceId: sdr.workspaceId,
      email,
      smtpUrlEnc: this.deps.crypto.encrypt(input.smtpUrl),
      imapUrlEnc: this.deps.crypto.encrypt(input.imapUrl),
      healthState: healthOf(outcome),
      lastSyncedAt: outcome.ok ? now : null,
      lastSyncError: outcome.ok ? null : `${smtp.ok ? 'IMAP' : 'SMTP'}: ${outcome.error}`,
      connectedAt: now,
      updatedAt: now,
    };
    await this.em.upsert(SdrMailboxSchema, row);
    return { sdr, mailbox: row };
  }

  async mailbox(sdrId: string): Promise<SdrMailbox | null> {
    return this.em.findOne(SdrMailboxSchema, { sdrId });
  }

  async setActive(sdrId: string, active: boolean): Promise<Sdr> {
    const sdr = await this.get(sdrId);
    sdr.active = active;
    sdr.updatedAt = this.deps.clock.now();
    await this.em.flush();
    return sdr;
  }

  /** Active SDRs of the workspace with their mail connection. */
  async listActive(workspaceId: string) {
    const sdrs = await this.em.find(SdrSchema, { workspaceId, active: true }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    const boxes = await this.em.find(SdrMailboxSchema, { sdrId: { $in: sdrs.map((s) => s.id) } });
    const byId = new Map(boxes.map((b) => [b.sdrId, b]));
    return sdrs.map((s) => sdrView(s, byId.get(s.id) ?? null));
  }
}
