import type { EntityManager } from '@mikro-orm/postgresql';
import type { IsolationLevel } from '@mikro-orm/core';
import { sqlState } from './sql.ts';

// Transactions that run again when PostgreSQL gives up on them for another transaction's sake.

/**
 * A deadlock (40P01: PostgreSQL chose this transaction to abort) or a serialization failure
 * (40001). Either way the whole transaction was rolled back, nothing of it is written, and the
 * same work run again from the start normally succeeds.
 */
export function transientConflict(err: unknown): boolean {
  const code = sqlState(err);
  return code === '40P01' || code === '40001';
}

/** Transactions run again, per ORM (keyed by its configuration, which all its forks share). */
const retries = new WeakMap<object, number>();

/**
 * How many times transactions of this ORM ran again after a conflict, since the process
 * started: the `mailgate_db_transaction_retries_total` metric, and what tests of lock order
 * check stays unchanged (a deadlock retried succeeds, so only this shows it happened).
 */
export function transactionRetries(orm: { config: object }): number {
  return retries.get(orm.config) ?? 0;
}

/** Attempts in all, and the pause before the second (doubled each time, with jitter). */
const ATTEMPTS = 4;
const FIRST_PAUSE_MS = 10;

/**
 * `em.transactional(fn)`, run again (up to four attempts) when it ends in a deadlock or a
 * serialization failure. Every API request's transaction goes through here: a lock cycle with a
 * worker (an outcome, a promotion, an inbound reply) or another request costs the caller a
 * short wait, not a 500 (docs/decisions.md, "A deadlock is retried, not answered").
 *
 * `fn` may run more than once, so it must only work on the database through the given
 * EntityManager (whatever it reads, it reads again) and keep no effect outside it: no mail, no
 * HTTP, no state of the caller that a second run would add to. A transaction that sends mail
 * (desk-mail's idempotent send, a draft's send, a reply's assignment) uses `em.transactional`
 * itself.
 */
export async function transaction<T>(
  em: EntityManager,
  fn: (em: EntityManager) => Promise<T>,
  opts: { isolationLevel?: IsolationLevel; readOnly?: boolean } = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await em.transactional(fn, opts);
    } catch (err) {
      if (!transientConflict(err) || attempt >= ATTEMPTS) throw err;
      retries.set(em.config, (retries.get(em.config) ?? 0) + 1);
      // The other transaction usually needs a few milliseconds more: let it finish first.
      const pause = FIRST_PAUSE_MS * 2 ** (attempt - 1);
      await new Promise((resolve) => setTimeout(resolve, pause / 2 + Math.random() * pause));
    }
  }
}
