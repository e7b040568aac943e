import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../adapters/ids.ts';
import type { SendOutcome } from '../../adapters/smtp.ts';
import { recordEvent } from '../events/outbox.ts';
import { messageBounced } from '../events/catalogue.ts';
import { suppress } from '../suppression/repository.ts';
import type { Deps } from '../../deps.ts';
import type { PreparedStatements } from '../../db/statements.ts';
import { transaction, transientConflict } from '../../db/transaction.ts';
import { bounce, fail, markSent, requeueAfterAccountFailure, requeueForRetry } from '../messages/transitions.ts';
import { recordSenderFailure, logSenderTransition, type HealthTransition } from '../senders/health.ts';

/** A claimed message as the queue knows it, before it is rendered. */
export interface ClaimedMessage {
  id: string;
  workspaceId: string;
  campaignId: string;
  enrollmentId: string;
  leadId: string;
  stepIndex: number;
  toEmail: string;
  senderAccountId: string;
}

export interface SentMessage extends ClaimedMessage {
  messageIdHeader: string;
  /** The rendered headers, recorded with the outcome. */
  subject: string;
  inReplyTo: string | null;
  references: string | null;
}

/** A message between the end of its data and its server's answer (SendOutcomeRecorder.gather). */
export interface DataEnding {
  accountId: string;
  /** performance.now() as the data ended. */
  at: number;
}

/** The weight of an account's newest answer time in its moving average. */
const ANSWER_WEIGHT = 0.2;
/** Accounts whose answer times are kept at most (the map is emptied past it; they are learnt again). */
const ANSWER_TIMES_KEPT = 10_000;

interface PendingGuard {
  id: string;
  workerId: string;
  resolve: (go: boolean) => void;
  reject: (err: unknown) => void;
}

interface PendingAccepted {
  m: SentMessage;
  response: string;
  at: Date;
  workerId: string;
  resolve: (recorded: boolean) => void;
  reject: (err: unknown) => void;
}


/**
 * Records what the SMTP server answered: the message's state and the server's reply, the
 * enrollment, the next step, counters and the event, in one transaction. Accepted messages (the
 * hot path) are group-committed: those that finish while a write runs share the next one, a
 * write waits a moment for the answers of data already ended (`gather`), and the same
 * statement answers the guards asked meanwhile (`guard`). Postal's habit: every path ends in a
 * recorded outcome.
 */
export class SendOutcomeRecorder {
  private readonly maxBatch: number;
  private readonly gatherMs: number;

  constructor(
    private readonly deps: Deps,
    private readonly retryDelaysMs: number[],
    private readonly stmts: PreparedStatements,
    opts: {
      /** Accepted outcomes per statement at most (default 64). */
      maxBatch?: number;
      /** How long a write waits for the answers of data already ended (default 2 ms; 0: never). */
      gatherMs?: number;
    } = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 64;
    this.gatherMs = opts.gatherMs ?? 2;
  }

  /** Messages whose data has ended (dataEnding) and whose answer has not come back (dataEnded). */
  private readonly ending = new Set<DataEnding>();
  /**
   * How long each account's server takes to answer the end of the data, in ms: a moving
   * average of its recent answers (ANSWER_WEIGHT for the newest). Unknown until one came back.
   */
  private readonly answerMs = new Map<string, number>();
  /** Answers come back so far. */
  private answered = 0;
  /** The write waiting for answers (gather): it goes once `answered` reaches `until`. */
  private gathering: { until: number; go: () => void } | null = null;

  /**
   * A message's data is about to end (its place and its guard are given): its answer, and
   * if accepted its outcome, comes within the server's acceptance time. The dispatcher calls
   * dataEnded with what this returns once the transaction has returned, whatever it returned.
   */
  dataEnding(accountId: string): DataEnding {
    const e = { accountId, at: performance.now() };
    this.ending.add(e);
    return e;
  }

  dataEnded(e: DataEnding): void {
    if (!this.ending.delete(e)) return;
    const took = performance.now() - e.at;
    const known = this.answerMs.get(e.accountId);
    if (known === undefined && this.answerMs.size >= ANSWER_TIMES_KEPT) this.answerMs.clear();
    this.answerMs.set(e.accountId, known === undefined ? took : known + ANSWER_WEIGHT * (took - known));
    this.answered++;
    const g = this.gathering;
    // On the next turn: an accepted outcome is handed to record in the same turn as this call.
    if (g && this.answered >= g.until) setImmediate(g.go);
  }

  /**
   * Before a write of accepted outcomes: when other messages' data has ended and their answers
   * are due within `gatherMs`, waits (at most that long) for them, so that their outcomes share
   * this write. Each connection holds one acceptance place until its outcome commits, so the
   * outcomes of a worker's connections come in waves, one per connection, a fraction of a
   * millisecond apart; written as they came, the first went alone and the rest shared the next
   * statement, 1.5 outcomes per statement at 3 connections, each statement a commit
   * (docs/benchmarks.md, session 37). An answer is due at its data's end plus its account's
   * answer time (unknown: due now), so a write does not wait for a slow server's answers, due
   * long after the wait would have ended (a real server answers in tens to hundreds of ms).
   * Bounded either way: a server slower than it was holds the others' outcomes no longer.
   */
  private gather(): Promise<void> {
    if (this.gatherMs <= 0 || this.ending.size === 0 || this.pending.length >= this.maxBatch) return Promise.resolve();
    const by = performance.now() + this.gatherMs;
    let due = 0;
    for (const e of this.ending) if (e.at + (this.answerMs.get(e.accountId) ?? 0) <= by) due++;
    if (due === 0) return Promise.resolve();
    this.gatherWaits++;
    return new Promise((resolve) => {
      const g = {
        until: this.answered + due,
        go: () => {
          if (this.gathering !== g) return;
          clearTimeout(timer);
          this.gathering = null;
          resolve();
        },
      };
      const timer = setTimeout(g.go, this.gatherMs);
      this.gathering = g;
    });
  }

  /** Writes of accepted outcomes that waited for other answers (gather). */
  gatherWaits = 0;

  private pending: PendingAccepted[] = [];
  private guards: PendingGuard[] = [];
  private flushing = false;
  private scheduled = false;
  /** Outcome statements run so far for accepted messages (a test looks at the batching). */
  acceptedStatements = 0;

  /** `em` makes the EntityManager for the rare paths (the accepted path needs none). */
  async record(em: () => EntityManager, m: SentMessage, outcome: SendOutcome, workerId: string): Promise<'sent' | 'hard_bounce' | 'retry' | 'soft_bounce' | 'account_failed' | 'lost'> {
    const now = this.deps.clock.now();
    if (outcome.kind === 'accepted') return (await this.accepted(m, outcome.response, workerId, now)) ? 'sent' : 'lost';
    let transition: HealthTransition | null = null;
    // Run again when PostgreSQL aborts it in a deadlock (or a serialization failure), as every
    // API transaction is (db/transaction.ts): it only writes the database, and an outcome not
    // written left the message `sending` until its lease ran out, its bounce never recorded.
    const recorded = await transaction(em(), async (tx) => {
      transition = null;
      switch (outcome.kind) {
        case 'rejected':
          return (await this.bounced(tx, m, 'hard', outcome.response, workerId, now)) ? 'hard_bounce' : 'lost';
        case 'temporary': {
          const next = await requeueForRetry(tx, m.id, workerId, outcome.response, now, this.retryDelaysMs);
          if (next !== 'exhausted') return next;
          return (await this.bounced(tx, m, 'soft', outcome.response, workerId, now)) ? 'soft_bounce' : 'lost';
        }
        case 'auth_failed':
        case 'unreachable':
        case 'rate_limited': {
          // Not the message's failure: the account is unhealthy (backed off, or stopped until
          // cleared) and the message goes back to the queue as it was, for another account of
          // the pool; no attempt is counted against the lead.
          transition = await recordSenderFailure(tx, m.senderAccountId, outcome.kind, outcome.response, now);
          await requeueAfterAccountFailure(tx, m.id, workerId, outcome.response, now);
          return 'account_failed';
        }
      }
    });
    // Logged once committed: a rolled-back change is never logged.
    if (transition) logSenderTransition(this.deps.log, transition);
    return recorded;
  }

  /**
   * A message that failed for a reason of its own (rendering or composing it threw): no SMTP
   * transaction happened, so it is neither sent nor bounced and the address is not suppressed.
   * Like a permanent rejection it is final: the message is `failed` with the reason, it leaves
   * `queued`, and the lead's sequence ends (`completed`, last event `failed`), in one transaction.
   * No event: the webhook catalogue has none for it (the log and the leads view show it).
   */
  async failed(em: () => EntityManager, m: ClaimedMessage, reason: string, workerId: string): Promise<boolean> {
    const now = this.deps.clock.now();
    return em().transactional((tx) => fail(tx, m, reason, workerId, now));
  }

  /**
   * The guard of a message about to end its data (messages/send.ts GUARD_PASSES): asked when
   * its SMTP transaction starts, answered by this recorder's next statement, together with the
   * accepted outcomes waiting then (or alone when none waits). Resolves true when the message
   * may be sent.
   */
  guard(id: string, workerId: string): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.guards.push({ id, workerId, resolve, reject });
      this.schedule();
    });
  }

  /**
   * The hot path, group-committed: accepted outcomes wait (while a previous write runs) and are
   * written together, one statement and one commit for all that are waiting (at most
   * `maxBatch`). Resolves once this message's outcome is committed.
   */
  private accepted(m: SentMessage, response: string, workerId: string, at: Date): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.pending.push({ m, response, at, workerId, resolve, reject });
      // One write at a time: outcomes that finish meanwhile wait and share the next one (and
      // this worker's writes never queue on each other's campaign counter row).
      this.schedule();
    });
  }

  /**
   * Starts the writer on the event loop's next turn, not at once: an accepted outcome is
   * recorded in the same turn as its connection starts the next message, whose guard is asked
   * a moment later; started at once, the write would hold the outcome alone and the guard would
   * wait for it and then for a write of its own.
   */
  private schedule(): void {
    if (this.flushing || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.pending.length || this.guards.length) {
        // Outcomes wait for the answers of the data ended beside them (gather); guards alone never do.
        if (this.pending.length) await this.gather();
        const batch = this.pending.splice(0, this.maxBatch);
        const guards = this.guards.splice(0);
        try {
          const done = await this.writeRetrying(batch, guards);
          for (const p of batch) p.resolve(done.sent.has(p.m.id));
          for (const g of guards) g.resolve(done.go.has(g.id));
        } catch (err) {
          // One bad row must not take the others with it: the guards alone, then each outcome on its own.
          if (guards.length) {
            try {
              const done = await this.writeRetrying([], guards);
              for (const g of guards) g.resolve(done.go.has(g.id));
            } catch (e) {
              for (const g of guards) g.reject(e);
            }
          }
          if (batch.length === 1 && guards.length === 0) {
            batch[0].reject(err);
            continue;
          }
          for (const p of batch) {
            try {
              p.resolve((await this.writeRetrying([p], [])).sent.has(p.m.id));
            } catch (e) {
              p.reject(e);
            }
          }
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /** Two workers' batches (or a batch and an enrollment ending) can deadlock: run it again. */
  private async writeRetrying(batch: PendingAccepted[], guards: PendingGuard[]): Promise<{ sent: Set<string>; go: Set<string> }> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.writeAccepted(batch, guards);
      } catch (err) {
        if (!transientConflict(err) || attempt >= 4) throw err;
      }
    }
  }

  /** Accepted outcomes and guards as one statement and one transaction (messages/transitions.ts markSent). */
  private async writeAccepted(batch: PendingAccepted[], guards: PendingGuard[]): Promise<{ sent: Set<string>; go: Set<string> }> {
    if (batch.length) this.acceptedStatements++;
    const workerIds = [...new Set([...batch.map((p) => p.workerId), ...guards.map((g) => g.workerId)])];
    if (workerIds.length > 1) throw new Error('one outcome batch per worker');
    const started = performance.now();
    const done = await markSent(
      this.stmts,
      batch.map((p) => ({
        id: p.m.id,
        at: p.at,
        response: p.response,
        messageIdHeader: p.m.messageIdHeader,
        subject: p.m.subject,
        inReplyTo: p.m.inReplyTo,
        references: p.m.references,
        nextId: newId('msg'),
        eventId: newId('evt'),
      })),
      workerIds[0],
      guards.map((g) => g.id),
    );
    // Committed: how long the acceptance places of its messages waited for it (metrics.ts).
    if (batch.length) {
      this.deps.metrics.outcomeWrite.observe((performance.now() - started) / 1000);
      this.deps.metrics.outcomeWriteMessages.observe(batch.length);
    }
    return done;
  }

  private async bounced(tx: EntityManager, m: SentMessage, type: 'hard' | 'soft', reason: string, workerId: string, now: Date): Promise<boolean> {
    // A hard bounce's suppression under the enrollment's lock, before the counters (BeforeEnding).
    const suppressHard = type === 'hard' ? (em: EntityManager) => suppress(em, m.workspaceId, [m.toEmail], 'hard_bounce', m.id, now) : undefined;
    if (!(await bounce(tx, m, type, reason, workerId, now, suppressHard))) return false;
    await recordEvent(tx, m.workspaceId, messageBounced(m, { type, reason, at: now }), now);
    return true;
  }
}
