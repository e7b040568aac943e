import { randomBytes } from 'node:crypto';
import type { Deps } from '../../deps.ts';
import type { Messenger, SendOutcome } from '../../adapters/smtp.ts';
import { PreparedStatements } from '../../db/statements.ts';
import { inWindow } from './schedule.ts';
import { SendOutcomeRecorder, type ClaimedMessage, type DataEnding } from './outcomes.ts';
import { claimForPool } from './capacity.ts';
import { composeMessage, claimedOf, type ReadyMessage } from './compose.ts';
import { HeldMessages, PerAccount, ConnectionLimits, CONNECTION_RECOVERY_MS } from './in-flight.ts';
import { runningCampaigns } from '../campaigns/repository.ts';
import type { Schedule } from '../campaigns/entities.ts';
import { backlogCampaigns, promoteDue, writeBacklogChunk } from '../messages/queue.ts';
import { loadForSending, guardState } from '../messages/send.ts';
import { requeue, requeueClaimed, requeueExpired, cancel } from '../messages/transitions.ts';
import { endEnrollments, lockEnrollment } from '../messages/enrollments.ts';
import { recordSenderSuccess, logSenderTransition } from '../senders/health.ts';
import { databaseUnreachable } from '../../db/sql.ts';
import { journalUnrecorded } from './unrecorded.ts';

/** Outcomes that are the account's failure, not the message's (sending/outcomes.ts). */
const ACCOUNT_FAILURES = new Set(['unreachable', 'rate_limited', 'auth_failed']);

/**
 * Delays between writes of an accepted message's outcome while the database cannot be reached
 * (record), and between tries to give back a message that did not go out (giveBack).
 */
const RECORD_RETRY_MS = [250, 500, 1_000, 2_000, 5_000];

/** How many pools one round sends for at once. */
const POOLS_AT_ONCE = 4;

/** Thrown before the end of a message's data when its guard refused it: the transaction is abandoned. */
class NotSendable extends Error {
  constructor() {
    super('the guard refused the message before the end of its data');
  }
}

/**
 * The guard could not be answered (its statement failed): the reason the message's transaction
 * is dropped before the end of its data. A new error, not the guard's own: nodemailer rewrites
 * the error it is given in place (its code becomes ESTREAM), and the guard's error, read again
 * after the transaction, must still say whether the database was unreachable (a connection
 * reset says so only by its code; taken for our own failure, the message stayed claimed until
 * its lease ran out).
 */
class GuardUnanswered extends Error {
  constructor(cause: unknown) {
    super('the guard of the message could not be answered before the end of its data', { cause });
  }
}

/** An accepted message's outcome was not written by the shutdown's deadline (record; giveUp logs it). */
class Unrecorded extends Error {
  constructor(cause: unknown) {
    super('the outcome of an accepted message could not be written before the shutdown deadline', { cause });
  }
}

/** An accepted message whose outcome the database could not take yet (record). */
interface UnrecordedAccepted {
  p: ReadyMessage;
  response: string;
  /** When the first write failed: about when the server accepted it. */
  at: Date;
  /** Logged at error (and journaled) as not recorded: giveUp did it. */
  givenUp: boolean;
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
 * guard at the moment of sending (answered before the end of its data) and each outcome
 * recorded, group-committed, before more messages than connections can be accepted.
 */
export class SendDispatcher {
  /** The owner named by this dispatcher's claims: the process's registered worker id (modules/workers). */
  readonly workerId: string;
  private readonly outcomes: SendOutcomeRecorder;
  private readonly statements: PreparedStatements;
  /** The accepted outcomes' writes and the guards (one statement at a time, group-committed): planned once. */
  private readonly outcomeStatements: PreparedStatements;
  /** SMTP transactions per account: at most maxConnections at once (fewer while `connections` lowers it). */
  private readonly slots: PerAccount;
  /** The acceptance limit per account (see sendOne): as many as the connections. */
  private readonly acceptable: PerAccount;
  /** The connections used per account, lowered for an account whose server refused one as one too many. */
  private readonly connections: ConnectionLimits;
  /** This worker's messages in an SMTP transaction now, per account: the connections open to its server. */
  private readonly inSmtp = new Map<string, number>();
  /** Messages this worker has claimed and not yet recorded or released: their lease is renewed (in-flight.ts). */
  private readonly held: HeldMessages;
  private stopping = false;
  /** Until when (Date.now()) an accepted outcome's write is retried once stopping: the shutdown's deadline (stop). */
  private retryUntil = Infinity;
  /** Accepted messages whose outcome the database could not take yet, by id (record). */
  private readonly unrecorded = new Map<string, UnrecordedAccepted>();
  /** Called once `unrecorded` is empty (drain waits for it). */
  private recordedWaiters: Array<() => void> = [];
  /** Messages that did not go out, waiting for the database to take them back (giveBack), and how many it took back since. */
  private readonly givingBack = new Set<string>();
  private givenBack = 0;
  /** The loop writing first steps from campaigns' backlogs (writeBacklog), while it runs. */
  private backlog?: Promise<void>;
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
      /**
       * Messages per claim (default 50). Two batches are held at once (claimed, rendered,
       * waiting for a slot), and what a worker holds longer than two young-generation
       * collections is promoted to V8's old space and stays until a full collection: at 100
       * the worker's heap grew by ~8 KB per message sent, at 50 a batch is mostly sent before
       * it ages (benchmark peak RSS medians 242 -> 197 MB at 3 connections, 235 -> 230 MB at 5;
       * docs/benchmarks.md, issue 20, session 11).
       */
      batchSize?: number;
      maxRoundMs?: number;
      statementPool?: number;
      /** The registered worker's id (WorkerRegistry), so a dead process's claims are reclaimed by owner. */
      workerId?: string;
      /** How long a connection limit lowered for an account holds before it is raised by one (in-flight.ts ConnectionLimits). */
      connectionRecoveryMs?: number;
      /**
       * The data directory (MAILGATE_DATA_DIR), where a stopping worker journals the accepted
       * messages whose outcome the database could not take before its deadline (unrecorded.ts);
       * without it they are only logged.
       */
      dataDir?: string;
      /** How long an outcome write waits for the answers of other data already ended (outcomes.ts gather; default 2 ms). */
      outcomeGatherMs?: number;
    },
  ) {
    this.workerId = opts.workerId ?? `${process.pid}.${randomBytes(4).toString('hex')}`;
    const url = deps.orm.config.getClientUrl();
    // Every statement here finds messages by id (index paths only: a prepared statement's
    // generic plan made while the queue was small would otherwise read whole tables).
    this.statements = new PreparedStatements(url, opts.statementPool ?? 6, { indexPathsOnly: true });
    // The accepted outcome's statement is planned once (generic plan): with the default plan
    // cache mode PostgreSQL planned its nine CTEs again on every run (custom plans, 0.43 ms per
    // run, more than it took to execute), a third of PostgreSQL's CPU per message (benchmarks.md).
    this.outcomeStatements = new PreparedStatements(url, 2, { indexPathsOnly: true, genericPlans: true });
    this.outcomes = new SendOutcomeRecorder(deps, opts.retryDelaysMs, this.outcomeStatements, { gatherMs: opts.outcomeGatherMs });
    this.slots = new PerAccount(opts.maxConnections);
    this.acceptable = new PerAccount(opts.maxConnections);
    this.connections = new ConnectionLimits(opts.maxConnections, opts.connectionRecoveryMs ?? CONNECTION_RECOVERY_MS, () => deps.clock.now().getTime());
    this.held = new HeldMessages(this.statements, this.workerId, this.leaseMs, deps.clock, deps.log);
  }

  /** Outcome statements written for accepted messages so far (group commit: fewer than messages). */
  get acceptedStatements(): number {
    return this.outcomes.acceptedStatements;
  }

  /** Writes of accepted outcomes that waited for other messages' answers (outcomes.ts gather). */
  get gatherWaits(): number {
    return this.outcomes.gatherWaits;
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
   * Waits (at most `timeoutMs`) for a round `wake` started to finish its messages, and for every
   * accepted message's outcome to be written (record retries it while the database cannot be
   * reached, whichever round sent it): at shutdown, after `stop` and before the messenger
   * closes (the job runner drains its own rounds, but gives up on them when it cannot reach the
   * database).
   */
  async drain(timeoutMs: number): Promise<void> {
    const recorded = this.unrecorded.size ? new Promise<void>((r) => this.recordedWaiters.push(r)) : undefined;
    if (!this.woken && !recorded) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([this.woken, recorded]), new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }

  /**
   * Releases the dispatcher's own connections (after the last round, at the shutdown's
   * deadline). Accepted messages whose outcome is still not written are given up first (giveUp):
   * a round may be stuck in a write on a connection that does not answer.
   */
  async close(): Promise<void> {
    this.retryUntil = Math.min(this.retryUntil, Date.now());
    for (const u of this.unrecorded.values()) this.giveUp(u);
    await this.woken;
    await this.backlog;
    await this.held.close();
    await this.statements.close();
    await this.outcomeStatements.close();
  }

  /** When (performance.now()) each account last failed as an account, to release its other claimed messages. */
  private readonly accountFailedAt = new Map<string, number>();

  /** Running campaigns' schedules, as of the latest round (null: any time). */
  private readonly schedules = new Map<string, Schedule | null>();

  private get leaseMs(): number {
    return this.opts.leaseMs ?? 10 * 60_000;
  }

  /**
   * Stop claiming; messages already claimed finish. An accepted message whose outcome the
   * database cannot take is written again until `retryUntil` (Date.now(), the shutdown's
   * deadline; by default now): the database may be back within it (a restart, a failover).
   */
  stop(retryUntil = Date.now()): void {
    this.stopping = true;
    this.retryUntil = retryUntil;
    if (this.unrecorded.size) {
      this.deps.log.warn(
        { messageIds: [...this.unrecorded.keys()], until: new Date(retryUntil).toISOString() },
        'stopping with accepted messages whose outcome the database cannot take yet: their writes are retried until the shutdown deadline',
      );
    }
  }

  private em() {
    return this.deps.orm.em.fork();
  }

  /**
   * Writes the first steps a large start left to the workers (messages/queue.ts
   * writeBacklogChunk), chunk after chunk, campaign after campaign, beside the rounds: a round
   * starts it when it is not running (so the start's notification, and after a worker's death
   * the next round anywhere, set it going), and it ends when no backlog is left or the rest is
   * held (by another worker, or by a transaction on its campaign). Each chunk is a transaction
   * of its own; a chunk that fails is logged and its campaign left to the next round, and the
   * loop goes on with the others.
   */
  private writeBacklog(): void {
    if (this.backlog || this.stopping) return;
    this.backlog = (async () => {
      const failed = new Set<string>();
      let wrote = true;
      while (wrote && !this.stopping) {
        wrote = false;
        for (const campaignId of await backlogCampaigns(this.em())) {
          if (this.stopping) break;
          if (failed.has(campaignId)) continue;
          try {
            const n = await this.em().transactional((em) => writeBacklogChunk(em, campaignId, this.deps.clock.now()));
            if (n !== null) wrote = true;
          } catch (err) {
            failed.add(campaignId);
            this.deps.log.error({ err, campaignId }, "writing a chunk of a campaign's first steps from its backlog failed; the next round tries again");
          }
        }
      }
    })()
      .catch((err: unknown) => this.deps.log.error({ err }, "reading the campaigns' first-step backlogs failed; the next round tries again"))
      .finally(() => (this.backlog = undefined));
  }

  async runRound(): Promise<RoundResult> {
    const result: RoundResult = { promoted: 0, released: 0, claimed: 0, sent: 0, bounced: 0, retried: 0 };
    const started = Date.now();
    const now = this.deps.clock.now();
    this.writeBacklog();
    result.promoted = await this.em().transactional((em) => promoteDue(em, now));
    const expired = await requeueExpired(this.em(), now);
    result.released = expired.released;
    if (expired.released) this.deps.log.warn(expired, 'requeued messages of an expired claim (a worker stopped mid-batch)');

    const running = (await runningCampaigns(this.em())).filter((c) => c.sender_pool_id);
    for (const c of running) this.schedules.set(c.id, c.schedule);
    const campaigns = running.filter((c) => inWindow(c.schedule, now));
    const byPool = new Map<string, string[]>();
    for (const c of campaigns) byPool.set(c.sender_pool_id!, [...(byPool.get(c.sender_pool_id!) ?? []), c.id]);

    const runPool = async (poolId: string, campaignIds: string[]) => {
      // A batch's failure (the database gone while its last writes ran) is logged, not thrown:
      // a claim failing meanwhile ends the loop, and a batch left to reject unawaited was an
      // unhandled rejection, which ends the process. Every exit waits for the batches in flight.
      const inflight: Array<Promise<void>> = [];
      try {
        while (!this.stopping && Date.now() - started < (this.opts.maxRoundMs ?? 25_000)) {
          // A window that closed during the round: its campaign's messages are not claimed now.
          const open = campaignIds.filter((id) => inWindow(this.schedules.get(id) ?? null, this.deps.clock.now()));
          if (!open.length) break;
          const batch = await this.claim(poolId, open);
          if (!batch.length) break;
          result.claimed += batch.length;
          inflight.push(
            this.sendAll(batch, result).catch((err: unknown) =>
              this.deps.log.error({ err, poolId }, 'a batch failed in the database; its messages not recorded stay claimed until their lease expires'),
            ),
          );
          // Two batches in flight: the next claim overlaps the current sends.
          if (inflight.length >= 2) await inflight.shift();
        }
      } finally {
        await Promise.all(inflight);
      }
    };
    // Pools side by side (at most POOLS_AT_ONCE): a pool whose server hangs holds its own lane,
    // not every other pool's mail until its connections time out.
    const pools = [...byPool];
    const lanes = Array.from({ length: Math.min(POOLS_AT_ONCE, pools.length) }, async () => {
      for (let next = pools.shift(); next; next = pools.shift()) await runPool(next[0], next[1]);
    });
    await Promise.all(lanes);
    return result;
  }

  /** Claims a batch for one pool under its row lock (capacity.ts); returns the rendered messages. */
  private async claim(poolId: string, campaignIds: string[]): Promise<ReadyMessage[]> {
    const now = this.deps.clock.now();
    const claimed = await this.em().transactional((em) =>
      claimForPool(em, {
        poolId,
        campaignIds,
        now,
        batchSize: this.opts.batchSize ?? 50,
        workerId: this.workerId,
        leaseUntil: new Date(now.getTime() + this.leaseMs),
        held: this.held.set,
      }),
    );
    if (!claimed.length) return [];
    const claimedAt = performance.now();
    const ids = claimed.map((c) => c.id);
    this.held.hold(ids);
    try {
      const rows = await loadForSending(this.statements, ids);
      const ready: ReadyMessage[] = [];
      // The batch's messages share a few accounts: each account's credentials are decrypted once.
      const urls = new Map<string, string>();
      for (const row of rows) {
        if (row.step_subject === null || row.step_body === null) {
          // The step was removed while the campaign was paused: the sequence ends here.
          await this.em().transactional(async (em) => {
            // The enrollment, then its messages (the lock order everywhere).
            await lockEnrollment(em, row.enrollment_id);
            await requeue(em, row.id, this.workerId, now);
            const ended = await endEnrollments(em, [row.enrollment_id], 'completed', 'completed', now);
            // An enrollment that had ended already (the lead answered while this message waited
            // for an SMTP retry) keeps its status and leaves its message alone: cancelled here,
            // or it was claimed and put back by every round for ever.
            if (!ended.length) await cancel(em, row.id, row.campaign_id, (await guardState(em, row.id))?.enrollment_status ?? 'completed', now);
          });
          this.held.delete(row.id);
          continue;
        }
        // The account's credentials are not this message's: a failure to read them is not caught here.
        let smtpUrl = urls.get(row.smtp_url_enc);
        if (smtpUrl === undefined) urls.set(row.smtp_url_enc, (smtpUrl = this.deps.crypto.decrypt(row.smtp_url_enc)));
        try {
          ready.push({ ...composeMessage(row, smtpUrl, this.deps), claimedAt });
        } catch (err) {
          await this.failMessage(claimedOf(row), 'rendering', err);
        }
      }
      return ready;
    } catch (err) {
      // Nothing of the batch reached SMTP. Held, its leases were renewed for as long as the
      // process ran, and the messages stayed `sending`: they go back to the queue now, or, if the
      // database refuses that too, when their leases run out.
      for (const id of ids) this.held.delete(id);
      await requeueClaimed(this.em(), ids, this.workerId, this.deps.clock.now()).catch((e: unknown) =>
        this.deps.log.error({ err: e }, 'could not give back a claimed batch; it returns to the queue when its lease runs out'),
      );
      throw err;
    }
  }

  private async sendAll(batch: ReadyMessage[], result: RoundResult): Promise<void> {
    const healthy = new Set<string>();
    const batchStarted = performance.now();
    // Campaigns of this batch with a message its guard refused (paused, most often) or could
    // not answer (the database unreachable): their other messages wait for their guard before
    // starting a transaction, instead of each starting one only to drop its connection before
    // the end of its data.
    const refused = new Set<string>();
    await Promise.all(batch.map((p) => this.sendOne(p, result, healthy, refused)));
    // Accounts whose server accepted mail are healthy (once per batch, off the hot path).
    // An account that failed during the batch stays failed: another message's success must not
    // cancel its back-off (a throttling server was retried every second).
    const recovered = await recordSenderSuccess(this.em(), [...healthy].filter((id) => (this.accountFailedAt.get(id) ?? -Infinity) < batchStarted), this.deps.clock.now());
    for (const t of recovered) logSenderTransition(this.deps.log, t);
  }

  private async sendOne(p: ReadyMessage, result: RoundResult, healthy: Set<string>, refused: Set<string>): Promise<void> {
    // The slot covers the SMTP transaction: at most maxConnections messages of an account are in
    // SMTP at once. The acceptance place is taken inside the transaction, before its end, and
    // held until the outcome is committed (or the transaction failed without it).
    const limit = this.acceptable.of(p.message.senderAccountId);
    type Place = 'none' | 'waiting' | 'held' | 'done';
    const place: { state: Place } = { state: 'none' };
    const takePlace = async () => {
      place.state = 'waiting';
      await limit.acquire();
      // The transaction failed while it waited (its connection dropped): nothing to hold.
      if ((place.state as Place) === 'done') limit.release();
      else place.state = 'held';
    };
    try {
      await this.sendGuarded(p, result, healthy, refused, takePlace);
    } finally {
      if (place.state === 'held') limit.release();
      place.state = 'done';
      this.held.delete(p.message.id);
    }
  }

  /**
   * One message through its account's SMTP connection. Its guard (messages/send.ts
   * GUARD_PASSES) is asked when the transaction starts and answered by the outcome writer's next
   * statement while the envelope and the data cross the wire; the end of the data (after which
   * the server may accept the message) waits for an acceptance place and for the guard. A message
   * the guard refuses never ends its data: its connection is dropped mid-DATA, so the server
   * discards it (RFC 5321 3.8: a connection closed without QUIT cancels the pending transaction), and it
   * goes back to the queue or is cancelled (notSent) as before.
   */
  private async sendGuarded(p: ReadyMessage, result: RoundResult, healthy: Set<string>, refused: Set<string>, takePlace: () => Promise<void>): Promise<void> {
    const accountId = p.message.senderAccountId;
    const sem = this.slots.of(accountId);
    this.limitConnections(accountId, this.connections.of(accountId));
    await sem.acquire();
    let outcome: SendOutcome | { kind: 'threw'; err: unknown };
    let go: Promise<boolean>;
    let abandoned = false;
    let ending: DataEnding | null = null;
    /** Refused as one connection too many while others of the account worked: back to the queue as it was. */
    let spare = false;
    try {
      if (this.stopping) {
        await requeue(this.em(), p.message.id, this.workerId, this.deps.clock.now());
        return;
      }
      // Its account failed (unreachable, throttled, refused) after this message was claimed: it
      // goes back to the queue at once, for another account at the next claim, instead of
      // waiting out the same server's timeout message after message.
      const failedAt = this.accountFailedAt.get(p.message.senderAccountId);
      if (failedAt !== undefined && p.claimedAt !== undefined && failedAt >= p.claimedAt) {
        await requeue(this.em(), p.message.id, this.workerId, this.deps.clock.now());
        result.retried++;
        return;
      }
      // The campaign's sending window closed after the claim (a slow server, a long batch): the
      // message goes back to the queue as it was, for the next window (contract §4).
      if (!inWindow(this.schedules.get(p.message.campaignId) ?? null, this.deps.clock.now())) {
        await requeue(this.em(), p.message.id, this.workerId, this.deps.clock.now());
        return;
      }
      go = this.outcomes.guard(p.message.id, this.workerId);
      go.catch(() => {}); // awaited below; a failure is handled there
      if (refused.has(p.message.campaignId) && !(await go)) {
        await this.notSent(p, this.deps.clock.now());
        return;
      }
      const beforeEnd = async () => {
        await takePlace();
        // A guard that could not be answered (the database unreachable) stops the data too: the
        // message is not sent, and the dropped connection is not its account's failure.
        const allowed = await go.catch((err: unknown) => {
          abandoned = true;
          refused.add(p.message.campaignId);
          throw new GuardUnanswered(err);
        });
        if (allowed) {
          // The data ends now: its answer comes within the server's acceptance time, and the
          // outcome writer waits for it beside the others (outcomes.ts gather).
          ending = this.outcomes.dataEnding(accountId);
          return;
        }
        abandoned = true;
        refused.add(p.message.campaignId);
        throw new NotSendable();
      };
      // The messenger answers every transport failure with an outcome (retried or a bounce);
      // what it throws is this message's own failure (it could not be composed).
      const started = performance.now();
      if (p.claimedAt !== undefined) this.deps.metrics.claimToSend.observe((started - p.claimedAt) / 1000);
      // The account's other transactions as this one starts: nodemailer's pool opens a new
      // connection only when its others are busy, so these are the connections it already had.
      const othersAtStart = this.inSmtp.get(accountId) ?? 0;
      this.inSmtp.set(accountId, othersAtStart + 1);
      try {
        const account = { id: accountId, smtpUrl: p.smtpUrl, connections: this.connections.of(accountId) };
        outcome = await this.messenger.send(account, p.mail, beforeEnd).catch((err: unknown) => ({ kind: 'threw' as const, err }));
      } finally {
        if (ending) this.outcomes.dataEnded(ending);
        this.inSmtp.set(accountId, this.inSmtp.get(accountId)! - 1);
      }
      // Decided before the slot is released, so the account's next message waits for a working connection.
      if (!abandoned && outcome.kind === 'rate_limited' && outcome.tooManyConnections) spare = this.oneConnectionTooMany(accountId, othersAtStart, outcome.response);
      const kind = abandoned ? 'abandoned' : spare ? 'too_many_connections' : outcome.kind === 'threw' ? 'error' : outcome.kind;
      // Known before the slot is released, so the account's next message sees it.
      if (!abandoned && !spare && ACCOUNT_FAILURES.has(outcome.kind)) this.accountFailedAt.set(accountId, performance.now());
      this.deps.metrics.smtpOutcomes.inc({ outcome: kind });
      this.deps.metrics.smtpDuration.observe({ outcome: kind }, (performance.now() - started) / 1000);
    } catch (err) {
      // Before the end of any data (the transaction's own failures are outcomes): not sent.
      // Returned, not awaited: the slot is released (finally) while giveBack waits.
      if (databaseUnreachable(err)) return this.giveBack(p, err);
      this.deps.log.error({ err, messageId: p.message.id }, 'sending a message failed unexpectedly; it stays claimed until its lease expires');
      return;
    } finally {
      sem.release();
    }
    // An accepted message went out, whatever its guard said (a messenger that ends its data
    // without waiting is still recorded, never sent twice). Any other outcome: a message the
    // guard refused is not sent, and its transaction's answer (the dropped connection's error,
    // or a refusal of its envelope) is not its outcome.
    if (outcome.kind !== 'accepted') {
      let allowed: boolean;
      try {
        allowed = await go;
      } catch (err) {
        // Its data never ended: not sent.
        if (databaseUnreachable(err)) return this.giveBack(p, err);
        this.deps.log.error({ err, messageId: p.message.id }, 'the guard of a message failed; it stays claimed until its lease expires');
        return;
      }
      if (!allowed) {
        await this.notSent(p, this.deps.clock.now());
        return;
      }
    }
    if (spare) {
      // Not an attempt and not the account's failure: the message is due as it was, and the next
      // claim gives it to a connection that works (this worker now opens fewer).
      await requeue(this.em(), p.message.id, this.workerId, this.deps.clock.now()).catch((err: unknown) =>
        databaseUnreachable(err)
          ? this.giveBack(p, err)
          : this.deps.log.error({ err, messageId: p.message.id }, 'requeueing a message refused as one connection too many failed; it stays claimed until its lease expires'),
      );
      result.retried++;
      return;
    }
    if (outcome.kind === 'threw') {
      await this.failMessage(p.message, 'sending', outcome.err);
      return;
    }
    try {
      const recorded = await this.record(p, outcome);
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
      // Not written by the shutdown's deadline: giveUp logs it (once) and journals it.
      if (err instanceof Unrecorded) return;
      this.deps.log.error({ err, messageId: p.message.id }, 'recording an SMTP outcome failed; the message stays claimed until its lease expires');
    }
  }

  /**
   * Records a message's outcome. An accepted message's outcome is written again while
   * PostgreSQL cannot be reached (a restart, a failover: the connection refused or cut), until
   * it is written or, once the worker is stopping, until the shutdown's deadline (stop): left
   * unwritten, the message stayed `sending`, no longer held, and once its lease ran out (or its
   * stopped worker was taken for dead) another round sent the lead a second copy, although this
   * worker knew the server had the first. Meanwhile the message keeps its acceptance place and
   * its lease (renewed as soon as the database answers), so its account's next message does not
   * end its data either: sending waits for the database, as it does for a stalled one. Past the
   * deadline Unrecorded is thrown, and giveUp has logged it and journaled it.
   */
  private async record(p: ReadyMessage, outcome: SendOutcome) {
    for (let attempt = 0; ; attempt++) {
      try {
        const recorded = await this.outcomes.record(() => this.em(), p.message, outcome, this.workerId);
        if (attempt) this.deps.log.info({ messageId: p.message.id, attempts: attempt + 1 }, 'the outcome of an accepted message was written once the database was back');
        if (this.unrecorded.delete(p.message.id) && !this.unrecorded.size) for (const r of this.recordedWaiters.splice(0)) r();
        return recorded;
      } catch (err) {
        let u = this.unrecorded.get(p.message.id);
        // Given up at the deadline (close): whatever this write met, it is logged and journaled.
        if (u?.givenUp) throw new Unrecorded(err);
        if (outcome.kind !== 'accepted' || !databaseUnreachable(err)) throw err;
        if (!u) this.unrecorded.set(p.message.id, (u = { p, response: outcome.response, at: this.deps.clock.now(), givenUp: false }));
        const delay = Math.min(RECORD_RETRY_MS[Math.min(attempt, RECORD_RETRY_MS.length - 1)], this.retryUntil - Date.now());
        if (delay <= 0) {
          this.giveUp(u);
          throw new Unrecorded(err);
        }
        if (!attempt) this.deps.log.warn({ err, messageId: p.message.id, retryInMs: delay }, 'the server accepted a message but the database cannot be reached to record it; retrying until it can');
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  /**
   * An accepted message whose outcome the database did not take by the shutdown's deadline: the
   * other workers would send it again (its claim runs out, or its stopped worker is taken for
   * dead). Logged once at error with what reconciling it needs, and journaled in the data
   * directory (unrecorded.ts), from which the next start of a worker with that directory
   * records it sent. Left in `unrecorded`: a write under way that succeeds after all removes it.
   */
  private giveUp(u: UnrecordedAccepted): void {
    if (u.givenUp) return;
    u.givenUp = true;
    const m = u.p.message;
    const entry = {
      messageId: m.id,
      workerId: this.workerId,
      senderAccountId: m.senderAccountId,
      acceptedAt: u.at.toISOString(),
      response: u.response,
      messageIdHeader: m.messageIdHeader,
      subject: m.subject,
      inReplyTo: m.inReplyTo,
      references: m.references,
    };
    let journal: string | null = null;
    let journalError: unknown;
    if (this.opts.dataDir) {
      try {
        journal = journalUnrecorded(this.opts.dataDir, entry);
      } catch (err) {
        journalError = err;
      }
    }
    this.deps.log.error(
      { messageId: m.id, campaignId: m.campaignId, enrollmentId: m.enrollmentId, senderAccountId: m.senderAccountId, messageIdHeader: m.messageIdHeader, acceptedAt: entry.acceptedAt, response: u.response, journal, journalError },
      journal
        ? 'the server accepted a message but its outcome could not be written before the shutdown deadline (the database cannot be reached): journaled, the next start of a worker with this data directory records it sent'
        : 'the server accepted a message but its outcome could not be written before the shutdown deadline (the database cannot be reached), nor journaled: another worker may send it again; reconcile it by its messageId',
    );
  }

  /**
   * A message that did not go out (its data never ended) and could not be given back to the
   * queue because the database could not be reached (its guard's statement or its requeue
   * failed). It is given back as soon as the database answers, as it was and without counting an
   * attempt, instead of waiting for its lease to run out (10 minutes by default). It stays held
   * meanwhile (its lease renewed when the database answers). A stopping worker stops trying: its
   * deregistration gives back what it still holds, or the other workers do once it is taken for
   * dead.
   */
  private async giveBack(p: ReadyMessage, err: unknown): Promise<void> {
    // Logged once for all the messages of an outage (a batch's worth at once), each at debug.
    if (!this.givingBack.size) this.deps.log.warn({ err }, 'messages that did not go out cannot be given back to the queue while the database cannot be reached; retrying until it can');
    this.givingBack.add(p.message.id);
    this.deps.log.debug({ messageId: p.message.id }, 'a message that did not go out waits for the database to take it back');
    try {
      for (let attempt = 0; !this.stopping; attempt++) {
        await new Promise((r) => setTimeout(r, RECORD_RETRY_MS[Math.min(attempt, RECORD_RETRY_MS.length - 1)]));
        try {
          await requeue(this.em(), p.message.id, this.workerId, this.deps.clock.now());
          this.givenBack++;
          return;
        } catch (e) {
          if (databaseUnreachable(e)) continue;
          this.deps.log.error({ err: e, messageId: p.message.id }, 'giving back a message that did not go out failed; it stays claimed until its lease expires');
          return;
        }
      }
    } finally {
      this.givingBack.delete(p.message.id);
      if (!this.givingBack.size && this.givenBack) {
        this.deps.log.info({ messages: this.givenBack }, 'messages that did not go out during the database outage are back in the queue');
        this.givenBack = 0;
      }
    }
  }

  /**
   * The account's server refused a connection as one too many (adapters/smtp.ts
   * `tooManyConnections`). With other connections of this worker to it open, the account works
   * and only had a connection more than its server allows (Microsoft 365 allows 3 per mailbox;
   * other workers' connections count too): this worker uses as many as were open (at least 1)
   * and the refused message is not the account's failure (true returned). Alone, the account
   * cannot be reached at all: its failure, backed off as any throttle (false).
   *
   * Open: the account's other transactions when this one started or now, whichever is more. A
   * refusal comes after the connection's setup (smtp-server answers 100 ms after the connect,
   * Microsoft 365 after the login), and meanwhile the pool's other connections may have carried
   * the rest of the batch and be idle (open, not counted in flight); or the others may have
   * started after this one. Connections still being set up count too (they may be refused in
   * turn): each refusal lowers the limit by at least one (ConnectionLimits), so a server
   * refusing every connection still comes down to a lone refused connection, the back-off.
   */
  private oneConnectionTooMany(accountId: string, othersAtStart: number, response: string): boolean {
    const open = Math.max(othersAtStart, this.inSmtp.get(accountId) ?? 0);
    // Down to one connection already, this worker found the account's server takes no more
    // than that one from it: refused, the account cannot be reached now.
    if (open === 0 || this.connections.of(accountId) === 1) return false;
    const limit = this.connections.refused(accountId, open);
    this.limitConnections(accountId, limit);
    this.deps.log.info(
      { senderAccountId: accountId, connections: limit, response, recoveryMinutes: (this.opts.connectionRecoveryMs ?? CONNECTION_RECOVERY_MS) / 60_000 },
      'the SMTP server refused a connection as one too many: this worker uses fewer connections for the account',
    );
    return true;
  }

  /** The account's SMTP transactions and acceptance places at once follow its connection limit. */
  private limitConnections(accountId: string, limit: number): void {
    this.slots.of(accountId).resize(limit);
    this.acceptable.of(accountId).resize(limit);
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
  private async notSent(p: ReadyMessage, now: Date): Promise<void> {
    await this.em().transactional(async (em) => {
      const g = await guardState(em, p.message.id);
      if (!g || g.state !== 'sending' || g.claimed_by !== this.workerId) return; // no longer ours
      await requeue(em, p.message.id, this.workerId, now);
      if (g.enrollment_status === 'active' && g.suppressed) {
        // Suppressed after it was queued: the enrollment ends as suppressed (which cancels it).
        await endEnrollments(em, [p.message.enrollmentId], 'suppressed', 'suppressed', now);
      } else if (g.enrollment_status !== 'active') {
        // The enrollment ended meanwhile (reply, bounce, unsubscribe).
        await cancel(em, p.message.id, p.message.campaignId, g.enrollment_status, now);
      }
      // Otherwise the campaign was paused: the message is back in the queue as it was.
    });
  }
}
