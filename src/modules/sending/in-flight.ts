import type { PreparedStatements } from '../../db/statements.ts';
import type { Logger } from '../../adapters/logger.ts';
import type { Clock } from '../../adapters/clock.ts';
import { renewLeases } from '../messages/send.ts';

// Concurrency and leases of the messages a worker holds: SMTP slots per account, the
// acceptance limit per account, the connections per account (lowered when a server refuses one
// as one too many), and the lease renewal of claimed messages.

/**
 * Counts waiters so each sender account never has more SMTP transactions than connections. Its
 * limit can be lowered and raised while it is in use (ConnectionLimits): lowered, the
 * transactions already running finish and no new one starts until fewer than the limit run.
 */
export class Semaphore {
  private waiting: Array<() => void> = [];
  /** Holders now (transactions running, or places held). */
  inUse = 0;
  constructor(private limit: number) {}
  async acquire(): Promise<void> {
    if (this.inUse < this.limit) {
      this.inUse++;
      return;
    }
    // The place is handed over by release or resize, already counted.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    this.inUse--;
    this.wake();
  }
  /** A new limit; raised, the waiters it makes room for start at once. */
  resize(limit: number): void {
    if (limit === this.limit) return;
    this.limit = limit;
    this.wake();
  }
  private wake(): void {
    while (this.inUse < this.limit && this.waiting.length) {
      this.inUse++;
      this.waiting.shift()!();
    }
  }
}

/** One semaphore per sender account, made on first use. */
export class PerAccount {
  private readonly map = new Map<string, Semaphore>();
  constructor(private readonly size: number) {}
  of(accountId: string): Semaphore {
    let s = this.map.get(accountId);
    if (!s) this.map.set(accountId, (s = new Semaphore(this.size)));
    return s;
  }
}

/** How long a lowered connection limit holds before it is raised by one (and again after as long). */
export const CONNECTION_RECOVERY_MS = 10 * 60_000;

/**
 * The connections this worker uses per sender account, below `max` for an account whose server
 * refused a connection as one too many ("421 4.3.2 ... concurrent server connections", a server
 * limiting each account's connections): lowered to the connections that were open when the
 * refusal came (at least 1), then raised by one for each `recoveryMs` without another such
 * refusal, back to `max`. A server that allows more again (another worker's connections gone)
 * gets them back; one that does not refuses the extra connection again, one refused connection
 * per `recoveryMs`. Only accounts below `max` are kept, so the common case is one map lookup.
 */
export class ConnectionLimits {
  private readonly lowered = new Map<string, { limit: number; since: number }>();
  constructor(
    private readonly max: number,
    private readonly recoveryMs: number,
    private readonly now: () => number,
  ) {}

  /** The account's limit now, raised by the recovery steps that have passed since its last change. */
  of(accountId: string): number {
    const l = this.lowered.get(accountId);
    if (!l) return this.max;
    const steps = Math.floor((this.now() - l.since) / this.recoveryMs);
    if (steps > 0) {
      l.limit = Math.min(this.max, l.limit + steps);
      l.since += steps * this.recoveryMs;
      if (l.limit >= this.max) {
        this.lowered.delete(accountId);
        return this.max;
      }
    }
    return l.limit;
  }

  /**
   * A connection refused as one too many while `open` other connections of this worker to the
   * account were open: the limit becomes `open`, and at least one less than it was, so refusals
   * counting connections that were themselves about to be refused (a server refusing every
   * connection) still bring it down to 1, where the next refusal is the account's failure
   * (nothing can be refused again and again without a back-off). Returns the new limit.
   */
  refused(accountId: string, open: number): number {
    const limit = Math.max(1, Math.min(this.of(accountId) - 1, open));
    this.lowered.set(accountId, { limit, since: this.now() });
    return limit;
  }
}

/**
 * The messages this worker has claimed and not yet recorded or released. Their lease is renewed
 * every third of the lease while any is held (waiting for a connection, in their SMTP
 * transaction, or waiting for their outcome's commit), so only the claims of a worker that died
 * (or stalled for a whole lease) expire.
 */
export class HeldMessages {
  private readonly ids = new Set<string>();
  private renewer?: NodeJS.Timeout;
  private renewing?: Promise<void>;

  constructor(
    private readonly statements: PreparedStatements,
    private readonly workerId: string,
    private readonly leaseMs: number,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  has(id: string): boolean {
    return this.ids.has(id);
  }

  get set(): ReadonlySet<string> {
    return this.ids;
  }

  delete(id: string): void {
    this.ids.delete(id);
  }

  hold(ids: string[]): void {
    for (const id of ids) this.ids.add(id);
    if (this.renewer) return;
    this.renewer = setInterval(() => {
      if (!this.ids.size) {
        clearInterval(this.renewer);
        this.renewer = undefined;
        return;
      }
      if (this.renewing) return;
      const until = new Date(this.clock.now().getTime() + this.leaseMs);
      this.renewing = renewLeases(this.statements, [...this.ids], this.workerId, until)
        .then(() => undefined)
        .catch((err) => this.log.error({ err }, 'renewing the lease of claimed messages failed'))
        .finally(() => (this.renewing = undefined));
    }, Math.max(50, Math.floor(this.leaseMs / 3)));
    this.renewer.unref();
  }

  /** Stops renewing (after the last round), waiting for a renewal under way. */
  async close(): Promise<void> {
    if (this.renewer) clearInterval(this.renewer);
    await this.renewing;
  }
}
