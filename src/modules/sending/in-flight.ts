import type { PreparedStatements } from '../../db/statements.ts';
import type { Logger } from '../../adapters/logger.ts';
import type { Clock } from '../../adapters/clock.ts';
import { renewLeases } from '../messages/send.ts';

// Concurrency and leases of the messages a worker holds: SMTP slots per account, the
// acceptance limit per account, and the lease renewal of claimed messages.

/** Counts waiters so each sender account never has more SMTP transactions than connections. */
export class Semaphore {
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
