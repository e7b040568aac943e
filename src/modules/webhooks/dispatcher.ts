import type { Deps } from '../../deps.ts';
import type { RecurringJob } from '../../jobs/agenda.ts';
import { PreparedStatements } from '../../db/statements.ts';
import { WebhookHttpClient, describeRequestError, type PostOutcome, type Resolver } from '../../adapters/http-client.ts';
import type { ClaimedDelivery, DeliveryState, FanOutLease } from './entities.ts';
import { envelope, deliveryHeaders } from './payload.ts';
import { DeliveryRound, type WebhookChange, type WebhookRoundResult } from './round.ts';
import { ChannelListener } from '../../db/listener.ts';
import {
  fanOut,
  hasPendingEvents,
  claimDue,
  releaseClaims,
  recordOutcomes,
  retakeFanOuts,
  releaseFanOuts,
  WEBHOOK_CHANNEL,
  type AttemptOutcome,
  type Statements,
} from './repository.ts';

export interface WebhookDispatchOptions {
  /** Attempts in flight at once in this process (default 16). */
  concurrency?: number;
  /** Extra trusted CA (PEM) for in-process tests; production uses NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer;
  /** Host name resolution (tests); default the system resolver. */
  resolve?: Resolver;
  /**
   * Deliveries a round keeps leased beyond its slots, waiting for one (default 6 x
   * concurrency). Fan-out and claims take work in batches of half of it to all of it; a longer
   * queue means larger batches but longer leases on fan-out batches (see leaseFor).
   */
  queue?: number;
  /** How long an attempt's outcome may wait to be written with others (default 20 ms). */
  outcomeWaitMs?: number;
  /** A round stops claiming after this long (default 25 s); what it holds finishes. */
  maxRoundMs?: number;
  /** An idle round keeps looking for work this long before it ends (default 20 s; tests: 0). */
  lingerMs?: number;
  /** How often a round looks for new work when nothing wakes it (default 100 ms). */
  pollMs?: number;
  /** The registered worker's id (WorkerRegistry): the owner named by this dispatcher's leases. */
  owner?: string;
}

export type { WebhookRoundResult };

/** Runs a writer's callback; a throw there (a logger failing, say) must not stop the writer. */
function settle(done: (err: unknown, moved: boolean) => void, err: unknown, moved: boolean): void {
  try {
    done(err, moved);
  } catch {
    // nothing left to tell it to
  }
}

/**
 * Writes attempt outcomes in batches, one statement each: a batch goes out once `minBatch`
 * outcomes wait or the oldest has waited `maxWaitMs`, and outcomes that arrive while a write
 * is running go together in the next one (group commit). Fewer, larger statements cost both
 * sides less than one per few outcomes; the wait only delays the record (leases last seconds),
 * never the next attempt, whose slot frees at the receiver's answer. A batch that fails is
 * written again row by row, so one bad row cannot take the others with it.
 */
class DeliveryOutcomeWriter {
  private queue: Array<{ outcome: AttemptOutcome; done: (err: unknown, moved: boolean) => void }> = [];
  private writing = false;
  private full: (() => void) | null = null;

  constructor(
    private readonly deps: Deps,
    private readonly db: Statements,
    private readonly minBatch: number,
    private readonly maxWaitMs: number,
  ) {}

  /** Queues an outcome; `done` gets the write's error, or whether the outcome moved its delivery on. */
  record(outcome: AttemptOutcome, done: (err: unknown, moved: boolean) => void): void {
    this.queue.push({ outcome, done });
    if (!this.writing) void this.drain();
    else if (this.full && this.queue.length >= this.minBatch) this.full();
  }

  /** Resolves when `minBatch` outcomes wait or after `maxWaitMs`. */
  private gather(): Promise<void> {
    if (this.queue.length >= this.minBatch || this.maxWaitMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.full?.(), this.maxWaitMs);
      this.full = () => {
        clearTimeout(timer);
        this.full = null;
        resolve();
      };
    });
  }

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.queue.length) {
        await this.gather();
        const batch = this.queue.splice(0, 500);
        // A fan-out batch whose last outcome is in this write goes with it, unless one of its
        // deliveries will not be written (then its lease runs out and it is taken again).
        const finished: FanOutLease[] = [];
        for (const b of batch) {
          const f = b.outcome.fresh?.fanOut;
          if (f && --f.unwritten === 0 && !f.broken) finished.push(f);
        }
        let moved: boolean[] | null = null;
        try {
          moved = await recordOutcomes(this.db, batch.map((b) => b.outcome), this.deps.clock.now(), finished);
        } catch {
          // Written one by one, each batch of fan-out it belongs to stays for its lease to run out.
          for (const b of batch) if (b.outcome.fresh) b.outcome.fresh.fanOut.broken = true;
          for (const b of batch) {
            let one: boolean;
            try {
              [one] = await recordOutcomes(this.db, [b.outcome], this.deps.clock.now());
            } catch (err) {
              settle(b.done, err, false);
              continue;
            }
            settle(b.done, null, one);
          }
        }
        if (moved) for (let i = 0; i < batch.length; i++) settle(batch[i].done, null, moved[i]);
      }
    } finally {
      this.writing = false;
    }
  }
}

/**
 * Delivers the events outbox to webhooks. A round fans new events out (a leased batch of
 * first attempts, whose deliveries are written with their outcomes), takes again batches whose
 * lease ran out, claims due deliveries (FOR UPDATE SKIP LOCKED and a lease, so any number of
 * workers share the work and none attempts a delivery another holds), POSTs each signed
 * envelope with bounded concurrency and records every attempt. A failure is retried on
 * MAILGATE_WEBHOOK_RETRY_DELAYS; after the last, the delivery is failed. All state is in the
 * database: a restarted worker carries on where a dead one stopped (its batches and claimed
 * deliveries once their lease runs out, or at once when the heartbeat finds it dead).
 *
 * The claim, outcome and fan-out statements run on the dispatcher's own small pool with
 * asynchronous commit. Only a crash of PostgreSQL itself can lose one of them, and then a
 * delivery is merely attempted again: the events are committed durably by their producers.
 */
export class WebhookDispatcher {
  private readonly http: WebhookHttpClient;
  private readonly db: PreparedStatements;
  private readonly writer: DeliveryOutcomeWriter;
  private readonly concurrency: number;
  /** Deliveries a round holds at once: the slots and the queue beside them. */
  private readonly capacity: number;
  /** Decrypted signing secrets by ciphertext (a rotation makes a new ciphertext). */
  private readonly secrets = new Map<string, string>();
  private readonly attemptCounters = new Map<string, { inc(): void }>();
  /** Fan-out batches with claims given back by a stopping round, released when it has settled. */
  private readonly givenBack = new Set<FanOutLease>();
  /** The rounds running (one at a time under the job; tests may run more). */
  private readonly rounds = new Set<DeliveryRound>();
  private listener?: ChannelListener;
  private stopping = false;
  private perEvent = 1;
  private closed?: Promise<void>;

  constructor(
    private readonly deps: Deps,
    private readonly opts: WebhookDispatchOptions = {},
  ) {
    this.concurrency = opts.concurrency ?? 16;
    this.capacity = this.concurrency + (opts.queue ?? 6 * this.concurrency);
    this.http = new WebhookHttpClient({
      timeoutMs: deps.config.webhookTimeout,
      allowPrivate: deps.config.webhookAllowPrivate,
      ca: opts.ca,
      resolve: opts.resolve,
      maxSockets: this.concurrency,
    });
    this.db = new PreparedStatements(deps.orm.config.getClientUrl(), 3, { asyncCommit: true, indexPathsOnly: true });
    this.writer = new DeliveryOutcomeWriter(deps, this.db, 4 * this.concurrency, opts.outcomeWaitMs ?? 20);
  }

  /**
   * The lease of a claim that starts at once or next: it waits at most one attempt for a slot,
   * then takes at most one attempt (the timeout bounds it), then is recorded.
   */
  get leaseMs(): number {
    return this.leaseFor(0);
  }

  /**
   * The lease of a delivery with `ahead` others queued before it in this worker: the slots
   * free at least one attempt (one timeout) at a time, so it starts within
   * floor(ahead / concurrency) + 1 timeouts and ends one timeout later; 5 s of margin.
   */
  leaseFor(ahead: number): number {
    return (Math.floor(ahead / this.concurrency) + 2) * this.deps.config.webhookTimeout + 5_000;
  }

  /** Stop claiming; attempts in flight finish and are recorded, waiting claims are given back. */
  stop(): void {
    this.stopping = true;
  }

  /**
   * Listens for webhook changes (notifyWebhookChanges, sent by the API's transactions on
   * commit, from any process): attempts this worker holds and has not started then stop at
   * once, or use the webhook's new URL and secret (changed). Without it they go out as they
   * were read, until the queue drains (at worst a queue's lease); a notification missed while
   * the connection is reopened falls back to that.
   */
  async listen(): Promise<void> {
    this.listener ??= new ChannelListener(this.deps.orm.config.getClientUrl(), WEBHOOK_CHANNEL, (p) => this.changed(p), this.deps.log, 'webhook change');
    await this.listener.start();
  }

  /** Closes connections (after the last round); safe to call twice. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      await this.listener?.stop();
      this.http.close();
      await this.db.close();
    })();
    return this.closed;
  }

  /**
   * A webhook changed (its notification's payload): its attempts not started yet are brought up
   * to date in every round running. Active: they take its URL and secret as they are now.
   * Disabled or deleted: they are given back (DeliveryRound.changed says where they go).
   * Notifications come in commit order, so the last one heard is the webhook as it is.
   */
  private changed(payload: string): void {
    let change: WebhookChange & { status: string };
    try {
      change = changeOf(JSON.parse(payload));
    } catch (err) {
      // (the payload carries the secret's ciphertext: not logged)
      this.deps.log.warn({ err }, 'a webhook change notification could not be read; ignored');
      return;
    }
    if (!this.rounds.size) return; // nothing held between rounds
    let reached = 0;
    for (const round of this.rounds) reached += round.changed(change);
    // Changes are rare: one line per change a running worker hears, saying what it did.
    this.deps.log.info(
      { webhookId: change.webhookId, status: change.status, attempts: reached },
      change.status === 'active'
        ? 'webhook changed: its attempts waiting in this worker take its URL and secret as they are now'
        : 'webhook disabled or deleted: its attempts waiting in this worker are taken out (held, or nothing, as its other deliveries)',
    );
  }

  /**
   * One round. Slots hold HTTP attempts only: a finished attempt frees its slot at once and
   * starts the next waiting delivery, and its outcome is written in the background, batched with
   * others. Beside the slots the round keeps a queue of leased deliveries (up to `queue`),
   * filled in the background from the outbox by the fan-out, which leases the batch it takes
   * to this worker, and by the claim, which takes expired batches, due retries and expired leases
   * (checked at most once per poll unless it came back full). An idle round keeps polling for `lingerMs`, so a new event goes out within
   * `pollMs` instead of at the next Agenda tick.
   */
  async runRound(): Promise<WebhookRoundResult> {
    const round = new DeliveryRound(
      {
        stopping: () => this.stopping,
        claim: (limit, ahead) => this.claim(limit, ahead),
        fanOut: (limit, ahead, probe) => this.fanOut(limit, ahead, probe),
        attempt: (c, result, answered, written) => this.attempt(c, result, answered, written),
        giveBack: (claims) => this.giveBack(claims),
        settled: () => this.releaseGivenBack(),
      },
      {
        concurrency: this.concurrency,
        capacity: this.capacity,
        pollMs: this.opts.pollMs ?? 100,
        maxRoundMs: this.opts.maxRoundMs ?? 25_000,
        lingerMs: this.opts.lingerMs ?? 20_000,
      },
    );
    this.rounds.add(round);
    try {
      return await round.run();
    } finally {
      this.rounds.delete(round);
    }
  }

  /**
   * Fans out up to `limit` events as a batch leased to this worker (its lease: that of its last
   * pair in the queue); `ahead` is how many leased deliveries wait for a slot before them
   * (negative: slots are free).
   */
  private async fanOut(limit: number, ahead: number, probe: boolean): Promise<{ events: number; claims: ClaimedDelivery[] }> {
    try {
      // An outbox found empty costs one cheap read per poll rather than a locking statement.
      if (probe && !(await hasPendingEvents(this.db))) {
        this.pollWorked('fanning out webhook events');
        return { events: 0, claims: [] };
      }
      const now = this.deps.clock.now();
      const t = now.getTime();
      const r = await fanOut(this.db, now, limit, (i) => new Date(t + this.leaseFor(Math.max(0, ahead + i))), this.perEvent, this.opts.owner ?? null);
      // Deliveries per event lately: how many ids the next batch brings along.
      if (r.events) this.perEvent = Math.max(1, Math.min(r.deliveries / r.events, 64));
      this.pollWorked('fanning out webhook events');
      return r;
    } catch (err) {
      this.pollFailed('fanning out webhook events', err);
      return { events: 0, claims: [] };
    }
  }

  /**
   * Due deliveries (retries, and those of workers that died), after any fan-out batch whose
   * lease ran out: a batch taken again comes first, whatever its size, leased as if it filled
   * the whole queue, or for its last pair's place when it holds more (events with several
   * webhooks each).
   */
  private async claim(limit: number, ahead: number): Promise<ClaimedDelivery[]> {
    const now = this.deps.clock.now();
    const owner = this.opts.owner ?? null;
    let retaken: ClaimedDelivery[] = [];
    try {
      const t = now.getTime();
      retaken = await retakeFanOuts(this.db, now, (i) => new Date(t + this.leaseFor(Math.max(0, ahead + Math.max(i, this.capacity - 1)))), owner);
      if (retaken.length >= limit) {
        this.pollWorked('claiming webhook deliveries');
        return retaken;
      }
      // One lease for the batch: that of its last delivery.
      const rest = limit - retaken.length;
      const due = await claimDue(this.db, now, new Date(now.getTime() + this.leaseFor(Math.max(0, ahead + retaken.length + rest - 1))), rest, owner);
      this.pollWorked('claiming webhook deliveries');
      return retaken.length ? [...retaken, ...due] : due;
    } catch (err) {
      // A batch taken again is this worker's (its lease committed): attempted now, not left
      // until that lease runs out because the due deliveries' claim after it failed.
      this.pollFailed('claiming webhook deliveries', err);
      return retaken;
    }
  }

  /** The polls (fan-out, claim) failing now, by what they do. */
  private readonly pollsFailing = new Set<string>();

  /**
   * A poll failed. Logged at error once, then at debug until it works again: a round polls every
   * `pollMs` (100 ms), and with the database down each poll logged an error, 18 lines a second
   * for the two polls (2026-11-29).
   */
  private pollFailed(what: string, err: unknown): void {
    if (this.pollsFailing.has(what)) return void this.deps.log.debug({ err }, `${what} failed again`);
    this.pollsFailing.add(what);
    this.deps.log.error({ err }, `${what} failed; retrying on the next poll (logged again once it has worked)`);
  }

  private pollWorked(what: string): void {
    if (this.pollsFailing.delete(what)) this.deps.log.info(`${what} works again`);
  }

  /**
   * Claims a stopping worker will not attempt: due deliveries are released at once (due again).
   * The fan-out batches of fresh ones are marked unfinished, and their leases end once the
   * round's last outcome is written (releaseGivenBack): another worker then takes them again
   * and attempts what has no delivery, never a first attempt this worker was still making.
   */
  private async giveBack(claims: ClaimedDelivery[]): Promise<void> {
    const due: ClaimedDelivery[] = [];
    for (const c of claims) {
      if (c.fresh) {
        c.fresh.fanOut.broken = true;
        this.givenBack.add(c.fresh.fanOut);
      } else due.push(c);
    }
    try {
      await releaseClaims(this.db, due, this.deps.clock.now());
    } catch (err) {
      this.deps.log.warn({ err }, 'could not give back webhook claims; they return when their lease runs out');
    }
  }

  /** Ends the leases of the batches given back (DeliveryRound, once its outcomes are written). */
  private async releaseGivenBack(): Promise<void> {
    if (!this.givenBack.size) return;
    const batches = [...this.givenBack];
    this.givenBack.clear();
    try {
      await releaseFanOuts(this.db, batches, this.deps.clock.now());
    } catch (err) {
      this.deps.log.warn({ err }, 'could not give back webhook fan-out batches; they return when their lease runs out');
    }
  }

  /**
   * One HTTP attempt: the signed POST, then its outcome to the writer. `answered` runs when the
   * receiver has answered (or there is no answer), `written` when the outcome is written or
   * given up on (DeliveryRound). Callbacks, not promises: this runs for every delivery.
   */
  private attempt(c: ClaimedDelivery, result: WebhookRoundResult, answered: () => void, written: () => void): void {
    const number = c.attemptCount + 1;
    const at = this.deps.clock.now();
    const request = this.request(c, at, number);
    if ('error' in request) {
      this.answer(c, at, number, { statusCode: null, error: request.error, durationMs: 0 }, result, answered, written);
      return;
    }
    let called = false;
    try {
      this.http.postThen(c.url, request.body, request.headers, (r) => {
        called = true;
        this.answer(c, at, number, r, result, answered, written);
      });
    } catch (err) {
      // Not known to happen (the client reports its failures through the callback); if it does,
      // the attempt fails with the reason like any other.
      if (!called) this.answer(c, at, number, { ...describeRequestError(err as Error), durationMs: 0 }, result, answered, written);
    }
  }

  /** The receiver's answer (or why there is none) as the attempt's outcome, handed to the writer. */
  private answer(
    c: ClaimedDelivery,
    at: Date,
    number: number,
    r: PostOutcome,
    result: WebhookRoundResult,
    answered: () => void,
    written: () => void,
  ): void {
    let outcome: AttemptOutcome;
    try {
      const ok = r.statusCode !== null && r.statusCode >= 200 && r.statusCode < 300;
      let error = r.error;
      if (!ok && r.statusCode !== null)
        error = r.statusCode >= 300 && r.statusCode < 400 ? `receiver answered ${r.statusCode}, a redirect (redirects are not followed)` : `receiver answered ${r.statusCode}`;
      const delays = this.deps.config.webhookRetryDelays;
      const state: DeliveryState = ok ? 'delivered' : number > delays.length ? 'failed' : 'pending';
      outcome = {
        deliveryId: c.id,
        leaseUntil: c.leaseUntil,
        attemptCount: c.attemptCount,
        attempt: { at, statusCode: r.statusCode, error, durationMs: r.durationMs },
        state,
        nextAttemptAt: state === 'pending' ? new Date(this.deps.clock.now().getTime() + delays[number - 1]) : null,
        fresh: c.fresh,
      };
    } catch (err) {
      if (c.fresh) c.fresh.fanOut.broken = true;
      this.deps.log.error({ err, deliveryId: c.id }, 'a webhook attempt could not be completed; the delivery is retried when its claim runs out');
      answered();
      written();
      return;
    }
    answered();
    this.writer.record(outcome, (err, moved) => {
      try {
        if (err) this.deps.log.error({ err, deliveryId: c.id }, 'a webhook attempt could not be recorded; the delivery is retried when its claim runs out');
        else this.recorded(c, outcome, moved, result);
      } finally {
        written();
      }
    });
  }

  /**
   * The signed request of an attempt, or why it could not be made (its signing secret does not
   * decrypt under this MAILGATE_SECRET_KEY, say): then the attempt fails with that reason like
   * any other, so its retries run out and the delivery ends `failed` instead of coming back at
   * every lease expiry without ever being recorded.
   */
  private request(c: ClaimedDelivery, at: Date, attempt: number): { body: Buffer; headers: Record<string, string> } | { error: string | null } {
    try {
      const secret = this.secret(c.signingSecretEnc);
      const body = envelope({ eventId: c.eventId, event: c.event, eventCreatedAt: c.eventCreatedAt, webhookId: c.webhookId, data: c.data });
      return { body, headers: deliveryHeaders({ secret, body, eventId: c.eventId, at, attempt }) };
    } catch (err) {
      this.deps.log.error({ err, webhookId: c.webhookId, deliveryId: c.id }, 'a webhook request could not be prepared; the attempt is recorded as failed');
      const e = err as Error & { code?: string };
      const reason = err instanceof Error ? `${e.code ? `${e.code}: ` : ''}${e.message}` : String(err);
      return { error: describeRequestError(new Error(`the request could not be prepared: ${reason}`)).error };
    }
  }

  private secret(enc: string): string {
    let s = this.secrets.get(enc);
    if (s === undefined) {
      if (this.secrets.size >= 1_000) this.secrets.clear();
      this.secrets.set(enc, (s = this.deps.crypto.decrypt(enc)));
    }
    return s;
  }

  /** The attempts counter's series for an outcome, looked up once (not per attempt). */
  private attemptsCounted(outcome: 'delivered' | 'retry' | 'dead'): { inc(): void } {
    let child = this.attemptCounters.get(outcome);
    if (!child) this.attemptCounters.set(outcome, (child = this.deps.metrics.webhookAttempts.labels(outcome)));
    return child;
  }

  private recorded(c: ClaimedDelivery, o: AttemptOutcome, moved: boolean, result: WebhookRoundResult): void {
    if (!moved) {
      this.deps.log.warn(
        { deliveryId: c.id, attempt: c.attemptCount + 1 },
        c.fresh
          ? 'first webhook attempt not written as its delivery: another worker wrote the delivery meanwhile (the attempt is logged on it), or the webhook was deleted'
          : 'webhook attempt logged, but its claim had run out or the delivery changed meanwhile; the delivery was left as it was',
      );
      return;
    }
    if (o.state === 'delivered') result.delivered++;
    else if (o.state === 'pending') result.retrying++;
    else result.failed++;
    this.attemptsCounted(o.state === 'delivered' ? 'delivered' : o.state === 'pending' ? 'retry' : 'dead').inc();
    if (o.state === 'delivered') {
      const lag = o.attempt.at.getTime() + o.attempt.durationMs - Date.parse(c.eventCreatedAt);
      this.deps.metrics.webhookLag.observe(Math.max(0, lag) / 1000);
      return;
    }
    const log = { webhookId: c.webhookId, deliveryId: c.id, eventId: c.eventId, attempt: c.attemptCount + 1, statusCode: o.attempt.statusCode, error: o.attempt.error };
    if (o.state === 'failed') this.deps.log.warn(log, 'webhook delivery failed for good: its retries are used up');
    else this.deps.log.info({ ...log, nextAttemptAt: o.nextAttemptAt }, 'webhook attempt failed; retrying later');
  }
}

/**
 * A change notification's payload as the round applies it: an active webhook's attempts take
 * its URL and secret; a disabled or deleted one's are given back.
 */
function changeOf(p: { id?: unknown; status?: unknown; url?: unknown; secret?: unknown }): WebhookChange & { status: string } {
  if (typeof p.id !== 'string' || typeof p.status !== 'string') throw new Error('no webhook id or status');
  const { id: webhookId, status } = p;
  if (status !== 'active') return { webhookId, status, keep: () => false };
  if (typeof p.url !== 'string' || typeof p.secret !== 'string') throw new Error('an active webhook without its url and secret');
  const { url, secret } = p;
  return {
    webhookId,
    status,
    keep: (c) => {
      c.url = url;
      c.signingSecretEnc = secret;
      return true;
    },
  };
}

/** The recurring job of the worker role: a thin wrapper around one dispatcher round. */
export function webhookDispatchJob(dispatcher: WebhookDispatcher): RecurringJob {
  return {
    name: 'webhooks.dispatch',
    every: '1 second',
    // A dead worker's Agenda lock holds the job this long; a live round keeps touching it.
    lockLifetimeMs: 10_000,
    async run(job) {
      const touching = setInterval(() => job.touch().catch(() => {}), 3_000);
      try {
        const r = await dispatcher.runRound();
        return r.fannedOut + r.claimed;
      } finally {
        clearInterval(touching);
      }
    },
  };
}
