import { performance } from 'node:perf_hooks';
import type { ClaimedDelivery } from './entities.ts';

export interface WebhookRoundResult {
  fannedOut: number;
  claimed: number;
  delivered: number;
  retrying: number;
  failed: number;
}

/**
 * Wakes the round's loop when a slot frees or a fan-out pass ends, or after `ms`. A wake that
 * comes while the loop is busy is kept, so the next wait returns at once.
 */
export class RoundWaker {
  private wakeUp: (() => void) | null = null;
  private pending = false;
  wake(): void {
    if (this.wakeUp) this.wakeUp();
    else this.pending = true;
  }
  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      this.wakeUp = done;
    });
  }
}

/**
 * A change of one webhook heard while a round holds attempts of it (WebhookDispatcher.changed):
 * `keep` brings an attempt not started yet up to date (a new URL or secret) and returns true, or
 * returns false when it must not go out (the webhook was disabled or deleted).
 */
export interface WebhookChange {
  webhookId: string;
  keep(c: ClaimedDelivery): boolean;
}

/** What a round asks of its dispatcher: the database and HTTP work, and whether to stop. */
export interface RoundWork {
  stopping(): boolean;
  claim(limit: number, ahead: number): Promise<ClaimedDelivery[]>;
  fanOut(limit: number, ahead: number, probe: boolean): Promise<{ events: number; claims: ClaimedDelivery[] }>;
  /**
   * Starts one HTTP attempt. `answered` runs once when its slot is free again (the receiver
   * answered, or there is no answer), `written` once its outcome is written or given up on,
   * never before `answered`. Either may run before attempt returns.
   */
  attempt(c: ClaimedDelivery, result: WebhookRoundResult, answered: () => void, written: () => void): void;
  /** Gives back claims that will not be attempted (stopping, or their webhook changed). */
  giveBack(claims: ClaimedDelivery[]): Promise<void>;
  /** Runs once the round's last outcome is written or given up on. */
  settled(): Promise<void>;
}

export interface RoundLimits {
  /** HTTP attempts at once. */
  concurrency: number;
  /** Deliveries held at once: slots plus the queue waiting for one. */
  capacity: number;
  pollMs: number;
  maxRoundMs: number;
  lingerMs: number;
}

/**
 * The state of one webhook round (WebhookDispatcher.runRound): the deliveries waiting for a slot,
 * the attempts in flight, the outcome writes not yet done, and the background fetches (claims
 * and fan-outs) with the room they reserved. Slots hold HTTP attempts only: a finished attempt
 * frees its slot at once and starts the next waiting delivery, and its outcome is written in
 * the background, batched with others.
 */
export class DeliveryRound {
  readonly result: WebhookRoundResult = { fannedOut: 0, claimed: 0, delivered: 0, retrying: 0, failed: 0 };
  private readonly waker = new RoundWaker();
  private readonly waiting: ClaimedDelivery[] = [];
  /** Attempts in flight, and outcomes not yet written. */
  private inflight = 0;
  private writes = 0;
  private launching = false;
  /** What the loop is waiting for: room to fetch, writes to catch up, or the last attempts. */
  private waitingFor: 'room' | 'writes' | 'end' = 'room';
  private readonly started = performance.now();
  // Work is fetched in the background, up to two fetches at once, so one's round trip hides
  // behind the other's; each reserves the room it asks for. Fetched deliveries join the queue
  // in the order their fetches started, so a lease computed for a queue position (everything
  // queued or reserved before it) is never too short.
  private fetching = 0;
  private reserved = 0;
  private applied: Promise<void> = Promise.resolve();
  /** Per fetch under way, the webhook changes heard since it started (its rows may predate them). */
  private readonly fetches = new Set<WebhookChange[]>();
  /** Claims taken out by webhook changes, being given back. */
  private givingBack: Promise<void> = Promise.resolve();
  private claimedAt = -Infinity;
  private claimFull = false;
  private outboxCheckedAt = -Infinity;
  private outboxEmpty = false;
  private idleSince = this.started;

  constructor(
    private readonly work: RoundWork,
    private readonly limits: RoundLimits,
  ) {}

  // One pair of callbacks for every attempt (no closure per delivery).
  private readonly answered = (): void => {
    this.inflight--;
    this.launch();
    if (this.waitingFor === 'end' || (this.waitingFor === 'room' && this.fetching < 2 && this.room() >= this.enough())) this.waker.wake();
  };

  private readonly written = (): void => {
    this.writes--;
    if (this.waitingFor !== 'room') this.waker.wake();
  };

  /** Outcomes not yet written of attempts that have answered. */
  private behind(): number {
    return this.writes - this.inflight;
  }

  /** Deliveries the round could take on now. */
  private room(): number {
    return this.limits.capacity - this.inflight - this.waiting.length - this.reserved;
  }

  /**
   * Work comes in batches of at least half the queue, except when idle: a fan-out's cost is
   * mostly per statement (bench/webhooks.ts: batches of 8 cost twice as much per delivery as
   * batches of 64), and half a queue still waits behind the slots meanwhile.
   */
  private enough(): number {
    return this.inflight + this.waiting.length + this.reserved ? Math.max(1, (this.limits.capacity - this.limits.concurrency) >> 1) : 1;
  }

  private launch(): void {
    // An attempt that answers at once calls back into launch; the outer loop goes on instead.
    if (this.launching) return;
    this.launching = true;
    try {
      while (this.waiting.length && this.inflight < this.limits.concurrency && !this.work.stopping()) {
        this.inflight++;
        this.writes++;
        this.work.attempt(this.waiting.shift()!, this.result, this.answered, this.written);
      }
    } finally {
      this.launching = false;
    }
  }

  /**
   * Applies a webhook's change to its attempts not started: those queued now, and those of the
   * fetches under way when they arrive (a statement that started before the change committed
   * may have read the webhook as it was). Attempts that must not go out are given back: a
   * retry is released (due again, or held if its webhook is disabled; nothing if deleted), a
   * first attempt's batch is given back once the round has settled, and taken again then (its
   * pairs with no delivery are written held for a disabled webhook, attempted for an active one,
   * nothing for a deleted one). Attempts in flight finish. Returns how many queued attempts
   * it reached.
   */
  changed(change: WebhookChange): number {
    for (const seen of this.fetches) seen.push(change);
    return this.apply(this.waiting, [change]);
  }

  /** Applies changes to claims (in place: those given back leave the array); how many were of the webhooks. */
  private apply(claims: ClaimedDelivery[], changes: WebhookChange[]): number {
    const dropped: ClaimedDelivery[] = [];
    let reached = 0;
    let kept = 0;
    for (const c of claims) {
      let keep = true;
      for (const ch of changes) {
        if (ch.webhookId !== c.webhookId) continue;
        reached++;
        if (!ch.keep(c)) {
          keep = false;
          break;
        }
      }
      if (keep) claims[kept++] = c;
      else dropped.push(c);
    }
    claims.length = kept;
    if (dropped.length) {
      this.givingBack = this.givingBack.then(() => this.work.giveBack(dropped));
      this.waker.wake();
    }
    return reached;
  }

  private fetch(kind: 'claim' | 'fanout', limit: number): void {
    const ahead = this.inflight + this.waiting.length + this.reserved - this.limits.concurrency;
    const seen: WebhookChange[] = [];
    this.fetches.add(seen);
    this.fetching++;
    this.reserved += limit;
    const got =
      kind === 'claim'
        ? this.work.claim(limit, ahead).then((claims) => {
            this.claimFull = claims.length === limit;
            this.result.claimed += claims.length;
            return claims;
          })
        : this.work.fanOut(limit, ahead, this.outboxEmpty).then((f) => {
            // An event nobody subscribes to makes no delivery: a full batch of events means more wait.
            this.outboxEmpty = f.events < limit;
            this.result.fannedOut += f.events;
            return f.claims;
          });
    this.applied = this.applied
      .then(() => got)
      .then((claims) => {
        this.fetching--;
        this.reserved -= limit;
        this.fetches.delete(seen);
        if (seen.length) this.apply(claims, seen);
        this.waiting.push(...claims);
        if (claims.length) this.idleSince = performance.now();
        this.launch();
        this.waker.wake();
      });
  }

  /**
   * Fetches and attempts until the round's time is up, it is stopped, or it has been idle for
   * `lingerMs`; then finishes what it holds (giving back what has not started when stopping).
   */
  async run(): Promise<WebhookRoundResult> {
    const { concurrency: conc, pollMs } = this.limits;
    while (!this.work.stopping() && performance.now() - this.started < this.limits.maxRoundMs) {
      // Outcomes not yet written hold their leases: do not run far ahead of the database.
      if (this.behind() > 8 * conc) {
        this.waitingFor = 'writes';
        await this.waker.wait(pollMs);
        this.waitingFor = 'room';
        continue;
      }
      const room = this.room();
      if (this.fetching < 2 && room >= this.enough()) {
        if (this.claimFull || performance.now() - this.claimedAt >= pollMs) {
          this.claimedAt = performance.now();
          this.fetch('claim', room);
          continue;
        }
        if (!this.outboxEmpty || performance.now() - this.outboxCheckedAt >= pollMs) {
          this.outboxCheckedAt = performance.now();
          this.fetch('fanout', room);
          continue;
        }
      }
      if (this.fetching || this.inflight || this.waiting.length) this.idleSince = performance.now();
      else if (this.outboxEmpty && !this.claimFull && performance.now() - this.idleSince >= this.limits.lingerMs) break;
      await this.waker.wait(pollMs);
    }
    await this.applied;

    this.waitingFor = 'end';
    for (;;) {
      // Stopping: what has not started goes back at once rather than at lease expiry.
      if (this.work.stopping() && this.waiting.length) await this.work.giveBack(this.waiting.splice(0));
      this.launch();
      if (!this.inflight) break;
      await this.waker.wait(pollMs);
    }
    while (this.writes) await this.waker.wait(pollMs);
    await this.givingBack;
    await this.work.settled();
    return this.result;
  }
}
