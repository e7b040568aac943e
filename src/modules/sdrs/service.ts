import type { EntityManager } from '@mikro-orm/postgresql';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { ApiError } from '../../shared/errors.ts';
import { newId } from '../../adapters/ids.ts';
import { parseMailUrl, sameMailbox } from '../../adapters/mailurl.ts';
import { isEmail } from '../../shared/email.ts';
import type { Deps } from '../../deps.ts';
import type { Sdr, SdrMailbox, MailHealth } from './entities.ts';
import type { ProbeOutcome } from '../../adapters/mailprobe.ts';
import {
  activeSdrs,
  currentImapUrlEnc,
  findMailbox,
  findSdr,
  icpCriteria,
  insertSdr,
  mailboxesOf,
  saveIcpCriteria,
  setSdrActive,
  updateProfile,
  upsertMailbox,
  type ProfileChanges,
} from './repository.ts';
import { deleteRule, insertRule, rulesOfWorkspace, type FollowupRuleRow } from './followup-repository.ts';
import { watchSdrMailbox } from '../mailboxes/repository.ts';
import { forgetMailboxUids } from '../inbound/repository.ts';
import { holdersOfReplies } from './thread-repository.ts';
import { isoOrNull, toIso } from '../../shared/time.ts';
import type { IcpCriteria } from './icp.ts';
import { probeFailed } from '../mailboxes/probe-failure.ts';
import { MAX_FOLLOWUP_ATTEMPTS } from './limits.ts';
import { requireName } from '../../shared/names.ts';
import { transaction } from '../../db/transaction.ts';

export interface ProfileInput {
  tone?: string;
  signature?: string;
  calendarUrl?: string;
  language?: string;
}

export function profileView(sdr: Sdr) {
  return { id: sdr.id, name: sdr.name, email: sdr.email, tone: sdr.tone, signature: sdr.signature, calendarUrl: sdr.calendarUrl, language: sdr.language };
}

const LANGUAGE_TAG = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/;
const FOLLOWUP_CATEGORIES = ['A', 'B', 'C'];


export function followupRuleView(r: FollowupRuleRow) {
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    name: r.name,
    afterMs: Number(r.after_ms),
    businessDays: r.business_days,
    categories: r.categories,
    maxAttempts: r.max_attempts,
    createdAt: toIso(r.created_at),
  };
}

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
    name = requireName(name);
    if (!isEmail(email)) throw ApiError.invalid(`email: "${email}" is not a valid email address`);
    const now = this.deps.clock.now();
    const sdr: Sdr = {
      id: newId('sdr'),
      workspaceId,
      name,
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
      await insertSdr(this.em, sdr);
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new ApiError(409, 'already_exists', `an SDR with email ${email.trim()} already exists in this workspace`);
      throw err;
    }
    return sdr;
  }

  async get(id: string): Promise<Sdr> {
    const sdr = await findSdr(this.em, id);
    if (!sdr) throw ApiError.notFound('sdr', `SDR ${id} not found`);
    return sdr;
  }

  /**
   * Connects the SDR's mailbox: the credentials are checked against the real SMTP and IMAP
   * servers and the outcome becomes the mailbox's health (active, needs_reauth, rate_limited
   * or disconnected). The connection is stored either way so it can be retried -- unless
   * `onlyIfWorking` (the dashboard's flow): then a refusal is 422 mail_probe_failed and nothing
   * is stored.
   */
  async connectMail(sdrId: string, input: { smtpUrl: string; imapUrl: string; email?: string }, onlyIfWorking = false) {
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
    if (onlyIfWorking && !outcome.ok) throw probeFailed(smtp.ok ? 'imap' : 'smtp', outcome);
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
    await transaction(this.em, async (em) => {
      const before = await currentImapUrlEnc(em, sdr.id);
      await upsertMailbox(em, row);
      // Its mailbox is watched from now on (a prospect's answer joins its thread); a reconnect
      // to the same mailbox (new password, other port) keeps the existing watch's cursor, one
      // to another server or user starts it afresh.
      const anotherMailbox = before !== null && !sameMailbox(this.deps.crypto.decrypt(before), input.imapUrl);
      await watchSdrMailbox(em, sdr.workspaceId, sdr.id, now, anotherMailbox);
      if (anotherMailbox) await forgetMailboxUids(em, sdr.id);
    });
    return { sdr, mailbox: row };
  }

  async mailbox(sdrId: string): Promise<SdrMailbox | null> {
    return findMailbox(this.em, sdrId);
  }

  async setActive(sdrId: string, active: boolean): Promise<Sdr> {
    const sdr = await this.get(sdrId);
    await setSdrActive(this.em, sdr, active, this.deps.clock.now());
    return sdr;
  }

  /** Active SDRs of the workspace with their mail connection. */
  /** Who holds each of these replies (GET /v1/replies' assignedTo). */
  async holdersOfReplies(workspaceId: string, replyIds: string[]) {
    return holdersOfReplies(this.em, workspaceId, replyIds);
  }

  async listActive(workspaceId: string) {
    const sdrs = await activeSdrs(this.em, workspaceId);
    const boxes = await mailboxesOf(this.em, sdrs.map((s) => s.id));
    const byId = new Map(boxes.map((b) => [b.sdrId, b]));
    return sdrs.map((s) => sdrView(s, byId.get(s.id) ?? null));
  }

  /**
   * Sets the SDR's profile fields (tone, signature, calendar URL, language). A field not given
   * is left as is; an empty (or blank) string clears it.
   */
  async setProfile(sdrId: string, input: ProfileInput): Promise<Sdr> {
    const sdr = await this.get(sdrId);
    const clean = (v: string | undefined): string | null | undefined => (v === undefined ? undefined : v.trim() === '' ? null : v);
    const tone = clean(input.tone);
    const signature = clean(input.signature);
    const calendarUrl = clean(input.calendarUrl);
    const language = clean(input.language);
    if (typeof tone === 'string' && tone.length > 500) throw ApiError.invalid('tone: at most 500 characters');
    if (typeof signature === 'string' && signature.length > 10_000) throw ApiError.invalid('signature: at most 10000 characters');
    if (typeof calendarUrl === 'string') {
      let u: URL | null = null;
      try {
        u = new URL(calendarUrl.trim());
      } catch {
        u = null;
      }
      if (!u || u.protocol !== 'https:') throw ApiError.invalid(`calendarUrl: "${calendarUrl}" is not an https URL`);
    }
    if (typeof language === 'string' && !LANGUAGE_TAG.test(language.trim())) throw ApiError.invalid(`language: "${language}" is not a language tag like en or pt-BR`);
    const changes: ProfileChanges = {};
    if (tone !== undefined) changes.tone = tone === null ? null : tone.trim();
    if (signature !== undefined) changes.signature = signature === null ? null : signature.replace(/\s+$/, '');
    if (calendarUrl !== undefined) changes.calendarUrl = calendarUrl === null ? null : calendarUrl.trim();
    if (language !== undefined) changes.language = language === null ? null : language.trim();
    await updateProfile(this.em, sdr, changes, this.deps.clock.now());
    return sdr;
  }

  /** Mail connection status of the SDR (spec §2): no mailbox reads as disconnected. */
  async mailStatus(sdrId: string) {
    const box = await this.mailbox(sdrId);
    if (!box) return { connected: false, email: null, healthState: 'disconnected' as MailHealth, lastSyncedAt: null, lastSyncError: null };
    return {
      connected: box.healthState === 'active',
      email: box.email,
      healthState: box.healthState,
      lastSyncedAt: isoOrNull(box.lastSyncedAt),
      lastSyncError: box.lastSyncError,
    };
  }

  /** Stores the workspace's ICP criteria (null for a dimension: everything passes). */
  async setIcp(workspaceId: string, criteria: IcpCriteria) {
    const now = this.deps.clock.now();
    const seniority = criteria.seniority && criteria.seniority.length ? [...criteria.seniority] : null;
    const employeeCounts = criteria.employeeCounts && criteria.employeeCounts.length ? [...criteria.employeeCounts] : null;
    await saveIcpCriteria(this.em, workspaceId, seniority, employeeCounts, now);
    return { workspaceId, seniority, employeeCount: employeeCounts, updatedAt: now.toISOString() };
  }

  /** The workspace's ICP criteria, or null when none were set. */
  async getIcp(workspaceId: string): Promise<IcpCriteria | null> {
    const row = await icpCriteria(this.em, workspaceId);
    return row ? { seniority: row.seniority, employeeCounts: row.employee_counts } : null;
  }

  async addFollowupRule(workspaceId: string, input: { name: string; afterMs: number; businessDays?: boolean; categories?: string[] | null; maxAttempts?: number }) {
    const name = requireName(input.name);
    if (!Number.isSafeInteger(input.afterMs) || input.afterMs <= 0) throw ApiError.invalid('after: must be a duration greater than zero');
    const maxAttempts = input.maxAttempts ?? 1;
    if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > MAX_FOLLOWUP_ATTEMPTS)
      throw ApiError.invalid(`maxAttempts: must be a whole number from 1 to ${MAX_FOLLOWUP_ATTEMPTS}`);
    let categories: string[] | null = null;
    if (input.categories && input.categories.length) {
      categories = [];
      for (const c of input.categories) {
        const v = c.trim().toUpperCase();
        if (!FOLLOWUP_CATEGORIES.includes(v)) throw ApiError.invalid(`category: "${c}" is not one of A, B, C`);
        if (!categories.includes(v)) categories.push(v);
      }
    }
    const row = await insertRule(this.em, { id: newId('fur'), workspaceId, name, afterMs: input.afterMs, businessDays: input.businessDays ?? false, categories, maxAttempts }, this.deps.clock.now());
    return followupRuleView(row);
  }

  async listFollowupRules(workspaceId: string) {
    const rows = await rulesOfWorkspace(this.em, workspaceId);
    return rows.map(followupRuleView);
  }

  async removeFollowupRule(id: string) {
    if (!(await deleteRule(this.em, id))) throw ApiError.notFound('followup_rule', `follow-up rule ${id} not found`);
    return { id, removed: true as const };
  }
}
