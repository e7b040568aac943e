import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { Logger } from '../../adapters/logger.ts';
import { storableText } from '../../shared/text.ts';
import type { SenderAccountRow, SenderHealth } from './rows.ts';

/** An account's health after a transition, with the health it had before (`previous`). */
type HealthChangeRow = Pick<SenderAccountRow, 'id' | 'health' | 'health_error' | 'health_retry_at'> & { previous: string };

/**
 * A sender account's health comes from what its SMTP server actually answered
 * (docs/architecture.md, "Sender and mailbox health"):
 * - `auth_failed`: the login was refused. The account sends nothing until a success, a
 *   credentials change or an operator's resume.
 * - `unreachable` (connection refused, DNS failure, timeout) and `rate_limited` (421, 4.7.x rate
 *   answers, 452 too many): the account is skipped until `health_retry_at`, then tried again;
 *   each new failure after a back-off lengthens the next one (SENDER_BACKOFF_MS).
 * - `ok`: the server accepted mail. `unknown`: nothing sent yet (or cleared by an operator).
 */
export type { SenderHealth };
export type AccountFailure = 'auth_failed' | 'unreachable' | 'rate_limited';

/** Back-off of an unreachable or throttled account, by consecutive failure (the last repeats). */
export const SENDER_BACKOFF_MS = [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000];

export interface HealthTransition {
  senderAccountId: string;
  from: string;
  to: string;
  /** The server's answer that caused it (null for a recovery or an operator's resume). */
  response: string | null;
  retryAt: Date | null;
}

function toTransition(r: HealthChangeRow): HealthTransition {
  return { senderAccountId: r.id, from: r.previous, to: r.health, response: r.health_error, retryAt: r.health_retry_at ? new Date(r.health_retry_at) : null };
}

/**
 * Records an account-level failure. The previous health is read under the row's lock in the
 * same statement, so of two workers failing at once only one sees the change (and logs it).
 * Within a back-off, further failures of messages claimed before it only refresh the answer:
 * a batch of 100 refused connections is one failure, not a hundred. `auth_failed` is not
 * softened by a later connection failure. Returns the transition, or null when the health
 * did not change.
 */
export async function recordSenderFailure(em: EntityManager, id: string, to: AccountFailure, response: string, now: Date): Promise<HealthTransition | null> {
  const rows = await sql<HealthChangeRow>(
    em,
    `with o as (select id, health, health_failures, health_retry_at from sender_accounts where id = ? for no key update),
          n as (select o.id, o.health as previous,
                       case when o.health = 'auth_failed' then 'auth_failed' else ?::text end as health,
                       (o.health_retry_at is null or o.health_retry_at <= ?::timestamptz or o.health <> ?::text) as fresh
                  from o)
     update sender_accounts a
        set health = n.health, health_error = ?, health_checked_at = ?,
            health_failures = case when n.fresh then a.health_failures + 1 else a.health_failures end,
            health_retry_at = case when n.health = 'auth_failed' then null
                                   when n.fresh then ?::timestamptz + (?::bigint[])[least(a.health_failures + 1, ?)] * interval '1 millisecond'
                                   else a.health_retry_at end
       from n where a.id = n.id
     returning a.id, n.previous, a.health, a.health_error, a.health_retry_at`,
    [id, to, now, to, storableText(response.slice(0, 1000)), now, now, SENDER_BACKOFF_MS, SENDER_BACKOFF_MS.length],
  );
  const r = rows[0];
  return r && r.previous !== r.health ? toTransition(r) : null;
}

/**
 * Accounts whose server just accepted mail are `ok`, their back-off over. Rows already `ok`
 * with no failures are not touched (the common case writes nothing); locked in id order, as
 * the claim locks them.
 */
export async function recordSenderSuccess(em: EntityManager, ids: string[], now: Date): Promise<HealthTransition[]> {
  if (!ids.length) return [];
  const rows = await sql<HealthChangeRow>(
    em,
    `with o as (select id, health from sender_accounts where id = any(?::text[]) and (health <> 'ok' or health_failures > 0)
                 order by id for no key update)
     update sender_accounts a set health = 'ok', health_error = null, health_checked_at = ?, health_retry_at = null, health_failures = 0
       from o where a.id = o.id
     returning a.id, o.health as previous, a.health, a.health_error, a.health_retry_at`,
    [ids, now],
    { name: 'senders.success' },
  );
  return rows.filter((r) => r.previous !== r.health).map(toTransition);
}

/**
 * An operator's resume (or new credentials): whatever stopped the account is forgotten and it
 * is tried at the next claim (`unknown` until its next outcome).
 */
export async function clearSenderHealth(em: EntityManager, id: string, now: Date): Promise<HealthTransition | null> {
  const rows = await sql<HealthChangeRow>(
    em,
    `with o as (select id, health from sender_accounts where id = ? and health in ('auth_failed', 'unreachable', 'rate_limited') for no key update)
     update sender_accounts a set health = 'unknown', health_error = null, health_checked_at = ?, health_retry_at = null, health_failures = 0
       from o where a.id = o.id
     returning a.id, o.health as previous, a.health, a.health_error, a.health_retry_at`,
    [id, now],
  );
  return rows[0] ? toTransition(rows[0]) : null;
}

/**
 * One line per transition: at warn, except an account's first success (unknown -> ok), which
 * is good news at info. `by` says what caused it when it was not a server's answer.
 */
export function logSenderTransition(log: Logger, t: HealthTransition, by?: string): void {
  const line = { senderAccountId: t.senderAccountId, from: t.from, to: t.to, response: t.response, retryAt: t.retryAt?.toISOString() ?? null, by };
  const msg = `sender account health ${t.from} -> ${t.to}`;
  if (t.from === 'unknown' && t.to === 'ok') log.info(line, msg);
  else log.warn(line, msg);
}
