import type { EntityManager } from '@mikro-orm/postgresql';
import { campaignSchedule } from '../campaigns/repository.ts';
import { firstSlot, startOfDay } from './schedule.ts';

/**
 * When an out-of-office lead's next step may go out: the first sending slot on or after the
 * day they are back, or after `defaultDelayMs` from now when the answer names no day
 * (contract §5, docs/decisions.md). The step is moved by messages/enrollments.ts
 * `postponeNextStep`.
 */
export async function oooResumeAt(em: EntityManager, campaignId: string, returnDate: Date | null, now: Date, defaultDelayMs: number): Promise<Date> {
  const schedule = await campaignSchedule(em, campaignId);
  const from = returnDate ? startOfDay(schedule, returnDate) : new Date(now.getTime() + defaultDelayMs);
  return firstSlot(schedule, from);
}
