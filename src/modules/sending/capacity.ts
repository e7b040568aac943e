import type { EntityManager } from '@mikro-orm/postgresql';
import { toDate } from '../../shared/time.ts';
import { lockPool, lockAccounts, accountSlots, dueMessages, claim, type AccountSlot, type Candidate } from '../messages/claim.ts';
import { noteClaimed } from '../senders/repository.ts';

// Choosing accounts within a pool's capacity: one claim transaction per batch, decided under
// the pool's row lock (so capacity decisions for a pool are serialized across workers).

export interface Claim {
  id: string;
  enrollmentId: string;
  accountId: string;
}

export interface ClaimRequest {
  poolId: string;
  campaignIds: string[];
  now: Date;
  batchSize: number;
  workerId: string;
  leaseUntil: Date;
  /** Messages this process still holds (under an earlier claim): never claimed again here. */
  held: ReadonlySet<string>;
}

/**
 * Claims a batch for one pool, in the caller's transaction: pool capacity, account limits,
 * intervals and stickiness. Nothing is skipped or dropped to make room: what does not fit
 * stays queued.
 */
export async function claimForPool(em: EntityManager, r: ClaimRequest): Promise<Claim[]> {
  const pool = await lockPool(em, r.poolId);
  if (!pool) return [];
  const locked = await lockAccounts(em, r.poolId, r.now);
  let poolLeft = pool.dailyCapacity - locked.used - locked.inFlight;
  if (poolLeft <= 0) return [];
  // No account that may send: none read (accountSlots asks nothing for no ids), nothing claimed.
  const accounts = await accountSlots(em, locked.ids, r.now);
  if (!accounts.length) return [];
  const slots = new Map(accounts.map((a) => [a.id, slotOf(a, r.now)]));
  // Accounts that cannot take a message now: the messages sticky to them wait and are not
  // fetched, so they cannot crowd out the rest of the pool's queue. None can: nothing to claim.
  const blocked = [...slots].filter(([, s]) => !slotCanTake(s)).map(([id]) => id);
  if (blocked.length === slots.size) return [];
  const batchSize = Math.min(r.batchSize, poolLeft);
  const candidates = await dueMessages(em, r.poolId, r.campaignIds, r.now, batchSize * 2, blocked);
  const claims: Claim[] = [];
  const order = accounts.map((a) => a.id);
  // The rotation goes on from the account that was claimed for least recently (never first),
  // not from the pool's first account at every claim: a trickle of one new lead per claim went
  // out through that one account alone (2026-11-29, from a review).
  let cursor = leastRecentlyUsed(accounts);
  for (const c of candidates) {
    if (claims.length >= batchSize || poolLeft <= 0) break;
    // Still held here under an earlier claim that lost its lease (this process stalled for
    // a whole lease): claimed again under the same owner, the old copy would pass its guard
    // too and the message would go out twice. The old copy finds it queued and lets it go.
    if (r.held.has(c.id)) continue;
    const accountId = pickAccount(c, slots, order, cursor);
    if (!accountId) continue;
    cursor = (order.indexOf(accountId) + 1) % order.length;
    slots.get(accountId)!.left--;
    if (slots.get(accountId)!.intervalMs > 0) slots.get(accountId)!.readyAt = Infinity;
    poolLeft--;
    claims.push({ id: c.id, enrollmentId: c.enrollment_id, accountId });
  }
  if (claims.length) {
    await claim(em, claims, r.poolId, r.workerId, r.now, r.leaseUntil);
    await noteClaimed(em, [...new Set(claims.map((c) => c.accountId))], r.now);
  }
  return claims;
}

/** The index of the account whose last claim is the oldest (one never claimed first; ties: the first). */
function leastRecentlyUsed(accounts: AccountSlot[]): number {
  let best = 0;
  let bestAt = Infinity;
  accounts.forEach((a, i) => {
    const at = a.last_sent_at ? toDate(a.last_sent_at).getTime() : -Infinity;
    if (at < bestAt) {
      best = i;
      bestAt = at;
    }
  });
  return best;
}

interface Slot {
  left: number;
  readyAt: number;
  intervalMs: number;
  now: number;
}

function slotOf(a: AccountSlot, now: Date): Slot {
  const left = a.daily_limit === null ? Infinity : a.daily_limit - Number(a.used) - Number(a.in_flight);
  const last = a.last_sent_at ? toDate(a.last_sent_at).getTime() : 0;
  const readyAt = a.min_interval_ms > 0 ? last + a.min_interval_ms : 0;
  return { left, readyAt, intervalMs: a.min_interval_ms, now: now.getTime() };
}

function slotCanTake(s: Slot): boolean {
  return s.left > 0 && s.readyAt <= s.now;
}

/**
 * The sticky account while it is usable (it may just be busy: then the message waits), else
 * the next account of the pool in rotation that has room.
 */
function pickAccount(c: Candidate, slots: Map<string, Slot>, order: string[], cursor: number): string | null {
  const canTake = (id: string) => slotCanTake(slots.get(id)!);
  if (c.sticky && slots.has(c.sticky)) return canTake(c.sticky) ? c.sticky : null;
  for (let i = 0; i < order.length; i++) {
    const id = order[(cursor + i) % order.length];
    if (canTake(id)) return id;
  }
  return null;
}
