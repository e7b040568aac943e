import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { bumpCounters } from '../campaigns/repository.ts';
import type { Schedule } from '../campaigns/entities.ts';
import { firstSlot, startOfDay } from './schedule.ts';

export interface Postponed {
  messageId: string;
  from: Date;
  to: Date;
}

/**
 * When an out-of-office lead's next step may go out: the first sending slot on or after the
 * day they are back, or after `defaultDelayMs` from now when the answer names no day
 * (contract §5, docs/decisions.md).
 */
export async function oooResumeAt(em: EntityManager, campaignId: string, returnDate: Date | null, now: Date, defaultDelayMs: number): Promise<Date> {
  const [c] = await sql<{ schedule: Schedule | null }>(em, `select schedule from campaigns where id = ?`, [campaignId]);
  const schedule = c?.schedule ?? null;
  const from = returnDate ? startOfDay(schedule, returnDate) : new Date(now.getTime() + defaultDelayMs);
  return firstSlot(schedule, from);
}

/**
 * Moves the enrollment's waiting step (queued, or scheduled earlier than `notBefore`) to
 * `notBefore`. A step already scheduled later stays where it is, and one a worker has claimed
 * (`sending`) goes out: its SMTP transaction may have begun.
 */
export async function postponeNextStep(em: EntityManager, enrollmentId: string, notBefore: Date, now: Date): Promise<Postponed | null> {
  const [m] = await sql<{ id: string; campaign_id: string; state: 'queued' | 'scheduled'; due_at: Date | string }>(
    em,
    `select id, campaign_id, state, due_at from outbound_messages
      where enrollment_id = ? and state in ('queued', 'scheduled') order by step_index limit 1 for update`,
    [enrollmentId],
  );
  if (!m || new Date(m.due_at) >= notBefore) return null;
  // Scheduled (not queued) even when the new time has passed by the time promoteDue runs: the
  // promotion moves it and its counters like any follow-up.
  await sql(em, `update outbound_messages set state = 'scheduled', due_at = ?, updated_at = ? where id = ?`, [notBefore, now, m.id]);
  if (m.state === 'queued') await bumpCounters(em, m.campaign_id, { queued: -1, scheduled: 1 });
  return { messageId: m.id, from: new Date(m.due_at), to: notBefore };
}
