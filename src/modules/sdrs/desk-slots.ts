import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';

// How many desk sends may hold a transaction (and so a pooled connection) across their SMTP
// transaction at once, per ORM pool (docs/decisions.md, 2026-11-30, "Desk sends take a slot").
//
// A desk send (send-manual, a draft's send) holds its transaction, with the thread's drafts and
// the thread locked, while the SDR's SMTP server answers: an admin's reassignment waits for it,
// and nothing goes out twice. An SMTP server may take its timeouts (30 s per stage) to answer;
// a send waiting for another's locks holds its connection too. Without a bound, as many sends
// as the pool has connections (10 in the daemon, shared by the API and the workers) left every
// other request and job waiting for a connection for knex's 60 s, then 503. With it, at most
// half the pool is held by desk sends; the sends beyond wait here, holding no connection.

/** The pool's connections desk sends may hold at once: half of them, at least one. */
export function deskSendCapacity(poolMax: number): number {
  return Math.max(1, Math.floor(poolMax / 2));
}

/** How long a send waits for a slot before it is answered 503 temporarily_unavailable (nothing sent). */
export const SLOT_WAIT_MS = 30_000;

class Slots {
  private busy = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(readonly capacity: number) {}

  get inUse(): number {
    return this.busy;
  }

  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(fn: () => Promise<T>, waitMs: number): Promise<T> {
    if (this.busy < this.capacity) this.busy++;
    else await this.wait(waitMs);
    try {
      return await fn();
    } finally {
      // The slot passes to the first waiting send (busy stays), else it is free.
      const next = this.waiting.shift();
      if (next) next();
      else this.busy--;
    }
  }

  private wait(waitMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const granted = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(granted);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(
          new ApiError(
            503,
            'temporarily_unavailable',
            `every desk send slot (${this.capacity}) is taken by sends waiting for their SMTP servers; nothing was sent: try again shortly`,
            {},
            5,
          ),
        );
      }, waitMs);
      this.waiting.push(granted);
    });
  }
}

/** Per ORM (keyed by its configuration, which all its forks share), as db/transaction.ts's retries. */
const byOrm = new WeakMap<object, Slots>();

function slotsOf(em: EntityManager): Slots {
  let slots = byOrm.get(em.config);
  if (!slots) {
    const pool = em.config.get('pool') as { max?: number } | undefined;
    slots = new Slots(deskSendCapacity(pool?.max ?? 10));
    byOrm.set(em.config, slots);
  }
  return slots;
}

/**
 * Runs `fn` (a desk send's transaction, SMTP included) in one of the ORM's desk send slots,
 * waiting (without a connection) for one when all are taken; 503 temporarily_unavailable after
 * `waitMs`.
 */
export function inDeskSendSlot<T>(em: EntityManager, fn: () => Promise<T>, waitMs = SLOT_WAIT_MS): Promise<T> {
  return slotsOf(em).run(fn, waitMs);
}

/** The ORM's desk send slots: taken now, their number, and the sends waiting for one. */
export function deskSendSlots(em: EntityManager): { inUse: number; capacity: number; waiting: number } {
  const s = slotsOf(em);
  return { inUse: s.inUse, capacity: s.capacity, waiting: s.queued };
}
