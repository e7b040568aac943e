import { randomBytes } from 'node:crypto';
import type { Deps } from '../../deps.ts';
import type { Messenger, OutgoingMail, SendOutcome } from '../../adapters/smtp.ts';
import { publicUrl } from '../../config/index.ts';
import { bumpCounters } from '../campaigns/repository.ts';
import { endEnrollments } from './lifecycle.ts';
import { inWindow } from './schedule.ts';
import { renderHtml, renderSubject, renderText, withOpenPixel, replySubject, type LeadValues } from './render.ts';
import { OutcomeRecorder, type ClaimedMessage, type SentMessage } from './outcomes.ts';
import {
  runningCampaigns,
  promoteDue,
  releaseExpired,
  claimPlans,
  lockPool,
  lockAccounts,
  dueMessages,
  markClaimed,
  loadForSending,
  guard,
  renewLeases,
  guardState,
  release,
  cancelQueued,
  type AccountSlot,
  type Candidate,
  type PreparedRow,
} from './repository.ts';
import { toDate } from '../../shared/time.ts';
import { PreparedStatements } from '../../db/statements.ts';
import { recordSenderSuccess, logSenderTransition } from '../senders/health.ts';


interface Prepared {
  message: SentMessage;
  mail: OutgoingMail;
  smtpUrl: string;
  /** performance.now() when the claim committed (the claim-to-send lag metric). */
  claimedAt?: number;
}

/** Counts waiters so each sender account never has more SMTP transactions than connections. */
class Semaphore {
  private waiting: Array<() => void> = [];
  constructor(private free: number) {}
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

export interface RoundResult {
  promoted: number;
  released: number;
  claimed: number;
  sent: number;
  bounced: number;
  retried: number;
}

/**
 * The sending engine: one round promotes due follow-ups, recovers expired claims, then for each
 * pool with running campaigns claims batches of due messages (pool capacity, account limits,
 * intervals and stickiness decided under the pool's row lock) and sends them, each through a
 * guard at the moment of sending and each outcome recorded in its own transaction.
 */
export class Dispatcher {
  /** The owner named by this dispatcher's claims: the process's registered worker id (modules/workers). */
  readonly workerId: string;
  private readonly outcomes: OutcomeRecorder;
  private readonly statements: PreparedStatements;
  private readonly guardStatements: PreparedStatements;
  private readonly semaphores = new Map<string, Semaphore>();
  private readonly acceptable = new Map<string, Semaphore>();
  /** Messages this worker has claimed and not yet recorded or released: their lease is renewed. */
  private readonly held = new Set<string>();
  private renewer?: NodeJS.Timeout;
  private renewing?: Promise<void>;
  private stopping = false;
  /** The round `wake` started, if it is running; `wokenAgain` asks for one more after it. */
  private woken?: Promise<void>;
  private wokenAgain = false;

  constructor(
    private readonly deps: Deps,
    private readonly messenger: Messenger,
    private readonly opts: {
      maxConnections: number;
      retryDelaysMs: number[];
      leaseMs?: number;
      batchSize?: number;
      maxRoundMs?: number;
      statementPool?: number;
      /** The registered worker's id (WorkerRegistry), so a dead process's claims are reclaimed by owner. */
      workerId?: string;
    },
  ) {
    this.workerId = opts.workerId ?? `${process.pid}.${randomBytes(4).toString('hex')}`;
    const url = deps.orm.config.getClientUrl();
    // Every statement here finds messages by id (index paths only: a prepared statement's
    // generic plan made while the queue was small would otherwise read whole tables).
    this.statements = new PreparedStatements(url, opts.statementPool ?? 6, { indexPathsOnly: true });
    // The guard sits on every message's critical path: its own connections, never queued
    // behind an outcome write.
    this.guardStatements = new PreparedStatements(url, opts.statementPool ?? 6, { indexPathsOnly: true });
    this.outcomes = new OutcomeRecorder(deps, opts.retryDelaysMs, this.statements);
  }

  /** Outcome statements written for accepted messages so far (group commit: fewer than messages). */
  get acceptedStatements(): number {
    return this.outcomes.acceptedStatements;
  }

  /**
   * Runs a round now, outside the job's schedule: messages were just queued (a campaign started,
   * see wakeup.ts). One such round at a time; woken while it runs, it runs once more after it
   * (it reads the running campaigns when it starts). Rounds may overlap: claims are row-locked.
   */
  wake(): void {
    if (this.stopping) return;
    if (this.woken) {
      this.wokenAgain = true;
      return;
    }
    this.woken = (async () => {
      do {
        this.wokenAgain = false;
        await this.runRound().catch((err) => this.deps.log.error({ err }, 'a sending round started by a notification failed'));
      } while (this.wokenAgain && !this.stopping);
    })().finally(() => (this.woken = undefined));
  }

  /**
   * Waits (at most `timeoutMs`) for a round `wake` started to finish its messages: at shutdown,
   * after `stop` and before the messenger closes (the job runner drains its own rounds).
   */
  async drain(timeoutMs: number): Promise<void> {
    if (!this.woken) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.woken, new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }

  /** Releases the dispatcher's own connections (after the last round). */
  async close(): Promise<void> {
    await this.woken;
    if (this.renewer) clearInterval(this.renewer);
    await this.renewing;
    await this.statements.close();
    await this.guardStatements.close();
  }

  /**
   * Claimed messages keep their lease while this worker holds them (waiting for a connection,
   * in their SMTP transaction, or waiting for their outcome's commit): renewed every third of
   * the lease, so only the claims of a worker that died (or stalled for a whole lease) expire.
   */
  private hold(ids: string[]): void {
    for (const id of ids) this.held.add(id);
    if (this.renewer) return;
    this.renewer = setInterval(() => {
      if (!this.held.size) {
        clearInterval(this.renewer);
        this.renewer = undefined;
        return;
      }
      if (this.renewing) return;
      const until = new Date(this.deps.clock.now().getTime() + this.leaseMs);
      this.renewing = renewLeases(this.statements, [...this.held], this.workerId, until)
        .then(() => undefined)
        .catch((err) => this.deps.log.error({ err }, 'renewing the lease of claimed messages failed'))
        .finally(() => (this.renewing = undefined));
    }, Math.max(50, Math.floor(this.leaseMs / 3)));
    this.renewer.unref();
  }

  private get leaseMs(): number {
    return this.opts.leaseMs ?? 10 * 60_000;
  }

  /** Stop claiming; messages already claimed finish. */
  stop(): void {
    this.stopping = true;
  }

  private em() {
    return this.deps.orm.em.fork();
  }

  async runRound(): Promise<RoundResult> {
    const result: RoundResult = { promoted: 0, released: 0, claimed: 0, sent: 0, bounced: 0, retried: 0 };
    const started = Date.now();
    const now = this.deps.clock.now();
    await this.em().transactional(async (em) => {
      const promoted = await promoteDue(em, now);
      for (const p of promoted) {
        await bumpCounters(em, p.campaign_id, { scheduled: -Number(p.n), queued: Number(p.n) });
        result.promoted += Number(p.n);
      }
    });
    const expired = await releaseExpired(this.em(), now);
    result.released = expired.released;
    if (expired.released) this.deps.log.warn(expired, 'requeued messages of an expired claim (a worker stopped mid-batch)');

    const campaigns = (await runningCampaigns(this.em())).filter((c) => c.sender_pool_id && inWindow(c.schedule, now));
    const byPool = new Map<string, string[]>();
    for (const c of campaigns) byPool.set(c.sender_pool_id!, [...(byPool.get(c.sender_pool_id!) ?? []), c.id]);

    for (const [poolId, campaignIds] of byPool) {
      const inflight: Array<Promise<void>> = [];
      while (!this.stopping && Date.now() - started < (this.opts.maxRoundMs ?? 25_000)) {
        const batch = await this.claim(poolId, campaignIds);
        if (!batch.length) break;
        result.claimed += batch.length;
        inflight.push(this.sendAll(batch, result));
        // Two batches in flight: the next claim overlaps the current sends.
        if (inflight.length >= 2) await inflight.shift();
      }
      await Promise.all(inflight);
    }
    return result;
  }

  /** Claims a batch for one pool under its row lock; returns the rendered messages. */
  private async claim(poolId: string, campaignIds: string[]): Promise<Prepared[]> {
    const now = this.deps.clock.now();
    const claimed = await this.em().transactional(async (em) => {
      await claimPlans(em);
      const pool = await lockPool(em, poolId, now);
      if (!pool) return [];
      let poolLeft = pool.dailyCapacity - pool.used - pool.inFlight;
      if (poolLeft <= 0) return [];
      const accounts = await lockAccounts(em, poolId, now);
      if (!accounts.length) return [];
      const slots = new Map(accounts.map((a) => [a.id, this.slotOf(a, now)]));
      const batchSize = Math.min(this.opts.batchSize ?? 100, poolLeft);
      const candidates = await dueMessages(em, campaignIds, now, batchSize * 2);
      const claims: Array<{ id: string; enrollmentId: string; accountId: string }> = [];
      const order = accounts.map((a) => a.id);
      let cursor = 0;
      for (const c of candidates) {
        if (claims.length >= batchSize || poolLeft <= 0) break;
        // Still held here under an earlier claim that lost its lease (this process stalled for
        // a whole lease): claimed again under the same owner, the old copy would pass its guard
        // too and the message would go out twice. The old copy finds it queued and lets it go.
        if (this.held.has(c.id)) continue;
        const accountId = this.pickAccount(c, slots, order, cursor);
        if (!accountId) continue;
        cursor = (order.indexOf(accountId) + 1) % order.length;
        slots.get(accountId)!.left--;
        if (slots.get(accountId)!.intervalMs > 0) slots.get(accountId)!.readyAt = Infinity;
        poolLeft--;
        claims.push({ id: c.id, enrollmentId: c.enrollment_id, accountId });
      }
      if (claims.length) await markClaimed(em, claims, poolId, this.workerId, now, new Date(now.getTime() + this.leaseMs));
      return claims;
    });
    if (!claimed.length) return [];
    const claimedAt = performance.now();
    this.hold(claimed.map((c) => c.id));
    const rows = await loadForSending(this.statements, claimed.map((c) => c.id));
    const prepared: Prepared[] = [];
    for (const row of rows) {
      if (row.step_subject === null || row.step_body === null) {
        // The step was removed while the campaign was paused: the sequence ends here.
        await this.em().transactional(async (em) => {
          await release(em, row.id, this.workerId, now);
          await endEnrollments(em, [row.enrollment_id], 'completed', 'completed', now);
        });
        this.held.delete(row.id);
        continue;
      }
      // The account's credentials are not this message's: a failure to read them is not caught here.
      const smtpUrl = this.deps.crypto.decrypt(row.smtp_url_enc);
      try {
        prepared.push({ ...this.render(row, smtpUrl), claimedAt });
      } catch (err) {
        await this.failMessage(claimedOf(row), 'rendering', err);
      }
    }
    return prepared;
  }

  private slotOf(a: AccountSlot, now: Date) {
    const left = a.daily_limit === null ? Infinity : a.daily_limit - Number(a.used) - Number(a.in_flight);
    const last = a.last_sent_at ? toDate(a.last_sent_at).getTime() : 0;
    const readyAt = a.min_interval_ms > 0 ? last + a.min_interval_ms : 0;
    return { left, readyAt, intervalMs: a.min_interval_ms, now: now.getTime() };
  }

  /**
   * The sticky account while it is usable (it may just be busy: then the message waits), else
   * the next account of the pool in rotation that has room.
   */
  private pickAccount(c: Candidate, slots: Map<string, ReturnType<Dispatcher['slotOf']>>, order: string[], cursor: number): string | null {
    const canTake = (id: string) => {
      const s = slots.get(id)!;
      return s.left > 0 && s.readyAt <= s.now;
    };
    if (c.sticky && slots.has(c.sticky)) return canTake(c.sticky) ? c.sticky : null;
    for (let i = 0; i < order.length; i++) {
      const id = order[(cursor + i) % order.length];
      if (canTake(id)) return id;
    }
    return null;
  }

  private render(row: PreparedRow, smtpUrl: string): Prepared {
    const lead: LeadValues = { email: row.email, firstName: row.first_name, lastName: row.last_name, company: row.company, jobTitle: row.job_title, custom: row.custom ?? {} };
    const base = publicUrl(this.deps.config);
    const unsubscribeUrl = `${base}/u/${this.deps.crypto.sign(`u.${row.id}`)}`;
    const extra = { unsubscribeUrl };
    const previous = row.previous ?? [];
    const last = previous[previous.length - 1];
    let subject = renderSubject(row.step_subject!, lead, extra);
    if (!subject && last) subject = replySubject(last.subject);
    let html = renderHtml(row.step_body!, lead, extra);
    const text = renderText(row.step_body!, lead, extra);
    if (row.track_opens) html = withOpenPixel(html, `${base}/t/o/${this.deps.crypto.sign(`o.${row.id}`)}`);
    const domain = row.from_email.split('@')[1] ?? 'mailgate.local';
    const messageIdHeader = `<${row.id}.${randomBytes(6).toString('hex')}@${domain}>`;
    const references = previous.map((p) => p.mid);
    const mail: OutgoingMail = {
      from: { name: row.from_name, address: row.from_email },
      to: row.to_email,
      subject,
      html,
      text,
      messageId: messageIdHeader,
      inReplyTo: last?.mid,
      references: references.length ? references : undefined,
      headers: {
        'List-Unsubscribe': `<${unsubscribeUrl}>, <mailto:${row.from_email}?subject=unsubscribe>`,
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      },
    };
    return {
      message: {
        ...claimedOf(row),
        messageIdHeader,
        subject,
        inReplyTo: last?.mid ?? null,
        references: references.length ? references.join(' ') : null,
      },
      mail,
      smtpUrl,
    };
  }

  private semaphore(accountId: string): Semaphore {
    let s = this.semaphores.get(accountId);
    if (!s) this.semaphores.set(accountId, (s = new Semaphore(this.opts.maxConnections)));
    return s;
  }

  /**
   * Bounds the messages of an account that the server may have accepted while their outcome is
   * not committed, which are those a crash can send twice: one per connection, so a crash
   * repeats at most as many messages as there are SMTP transactions in flight (the contract's
   * promise). A message takes its place just before the end of its data (Messenger `beforeEnd`)
   * and gives it back once its outcome is committed: the next message of a connection crosses
   * the wire (guard, envelope, body) while the previous outcome is written, and only its final
   * CRLF.CRLF waits for that commit. When PostgreSQL stalls, sending stops here.
   */
  private acceptanceLimit(accountId: string): Semaphore {
    let s = this.acceptable.get(accountId);
    if (!s) this.acceptable.set(accountId, (s = new Semaphore(this.opts.maxConnections)));
    return s;
  }

  private async sendAll(batch: Prepared[], result: RoundResult): Promise<void> {
    const healthy = new Set<string>();
    await Promise.all(batch.map((p) => this.sendOne(p, result, healthy)));
    // Accounts whose server accepted mail are healthy (once per batch, off the hot path).
    const recovered = await recordSenderSuccess(this.em(), [...healthy], this.deps.clock.now());
    for (const t of recovered) logSenderTransition(this.deps.log, t);
  }

  private async sendOne(p: Prepared, result: RoundResult, healthy: Set<string>): Promise<void> {
    // The slot covers the guard and the SMTP transaction: at most maxConnections messages of an
    // account are in SMTP at once. The acceptance place is taken inside the transaction, before
    // its end, and held until the outcome is committed (or the transaction failed without it).
    const limit = this.acceptanceLimit(p.message.senderAccountId);
    type Place = 'none' | 'waiting' | 'held' | 'done';
    const place: { state: Place } = { state: 'none' };
    const beforeEnd = async () => {
      place.state = 'waiting';
      await limit.acquire();
      // The transaction failed while it waited (its connection dropped): nothing to hold.
      if ((place.state as Place) === 'done') limit.release();
      else place.state = 'held';
    };
    try {
      await this.sendGuarded(p, result, healthy, beforeEnd);
    } finally {
      if (place.state === 'held') limit.release();
      place.state = 'done';
      this.held.delete(p.message.id);
    }
  }

  private async sendGuarded(p: Prepared, result: RoundResult, healthy: Set<string>, beforeEnd: () => Promise<void>): Promise<void> {
    const sem = this.semaphore(p.message.senderAccountId);
    await sem.acquire();
    let outcome: SendOutcome | { kind: 'threw'; err: unknown };
    try {
      if (this.stopping) {
        await release(this.em(), p.message.id, this.workerId, this.deps.clock.now());
        return;
      }
      if (!(await guard(this.guardStatements, p.message.id, this.workerId))) {
        await this.notSent(p, this.deps.clock.now());
        return;
      }
      // The messenger answers every transport failure with an outcome (retried or a bounce);
      // what it throws is this message's own failure (it could not be composed).
      const started = performance.now();
      if (p.claimedAt !== undefined) this.deps.metrics.claimToSend.observe((started - p.claimedAt) / 1000);
      outcome = await this.messenger.send({ id: p.message.senderAccountId, smtpUrl: p.smtpUrl }, p.mail, beforeEnd).catch((err: unknown) => ({ kind: 'threw' as const, err }));
      const kind = outcome.kind === 'threw' ? 'error' : outcome.kind;
      this.deps.metrics.smtpOutcomes.inc({ outcome: kind });
      this.deps.metrics.smtpDuration.observe({ outcome: kind }, (performance.now() - started) / 1000);
    } catch (err) {
      this.deps.log.error({ err, messageId: p.message.id }, 'sending a message failed unexpectedly; it stays claimed until its lease expires');
      return;
    } finally {
      sem.release();
    }
    if (outcome.kind === 'threw') {
      await this.failMessage(p.message, 'sending', outcome.err);
      return;
    }
    try {
      const recorded = await this.outcomes.record(() => this.em(), p.message, outcome, this.workerId);
      if (outcome.kind === 'accepted') healthy.add(p.message.senderAccountId);
      if (recorded === 'sent') {
        result.sent++;
        this.deps.metrics.sent.inc();
      } else if (recorded === 'hard_bounce' || recorded === 'soft_bounce') {
        result.bounced++;
        this.deps.metrics.bounces.inc({ type: recorded === 'hard_bounce' ? 'hard' : 'soft' });
      }
      else if (recorded === 'retry' || recorded === 'account_failed') result.retried++;
    } catch (err) {
      this.deps.log.error({ err, messageId: p.message.id }, 'recording an SMTP outcome failed; the message stays claimed until its lease expires');
    }
  }

  /**
   * Rendering or sending this message threw for a reason of its own: it ends `failed` with the
   * reason and the lead's sequence ends (OutcomeRecorder.failed); the rest of the batch goes on.
   */
  private async failMessage(m: ClaimedMessage, what: 'rendering' | 'sending', err: unknown): Promise<void> {
    const reason = `${what} the message failed: ${err instanceof Error ? err.message : String(err)}`;
    const log = { err, messageId: m.id, campaignId: m.campaignId, enrollmentId: m.enrollmentId };
    try {
      const recorded = await this.outcomes.failed(() => this.em(), m, reason, this.workerId);
      this.deps.log.error(log, recorded ? `${what} a message failed: it is failed and its lead's sequence ends` : `${what} a message failed; it was no longer this worker's`);
    } catch (e) {
      this.deps.log.error({ ...log, recordErr: e }, `${what} a message failed and recording it failed too; it stays claimed until its lease expires`);
    } finally {
      this.held.delete(m.id);
    }
  }

  /** The guard said no: find out why and record it (Postal: never a silent skip). */
  private async notSent(p: Prepared, now: Date): Promise<void> {
    await this.em().transactional(async (em) => {
      const g = await guardState(em, p.message.id);
      if (!g || g.state !== 'sending' || g.claimed_by !== this.workerId) return; // no longer ours
      await release(em, p.message.id, this.workerId, now);
      if (g.enrollment_status === 'active' && g.suppressed) {
        // Suppressed after it was queued: the enrollment ends as suppressed (which cancels it).
        await endEnrollments(em, [p.message.enrollmentId], 'suppressed', 'suppressed', now);
      } else if (g.enrollment_status !== 'active') {
        // The enrollment ended meanwhile (reply, bounce, unsubscribe).
        if (await cancelQueued(em, p.message.id, g.enrollment_status, now)) await bumpCounters(em, p.message.campaignId, { queued: -1 });
      }
      // Otherwise the campaign was paused: the message is back in the queue as it was.
    });
  }
}

function claimedOf(row: PreparedRow): ClaimedMessage {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    campaignId: row.campaign_id,
    enrollmentId: row.enrollment_id,
    leadId: row.lead_id,
    stepIndex: row.step_index,
    toEmail: row.to_email,
    senderAccountId: row.sender_account_id,
  };
}
