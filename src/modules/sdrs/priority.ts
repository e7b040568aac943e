// priorityScore of a prospect thread (contract §8; formula documented in docs/sdr-desk.md).
// Pure: the caller passes `now` from the injected clock.

import { own } from '../../shared/own.ts';

export type ThreadCategory = 'A' | 'B' | 'C';

export interface PriorityInput {
  category: ThreadCategory;
  /** Classification of the reply the thread started from; null when unknown. */
  classification: string | null;
  lastMessageAt: Date;
  /** Pending follow-up tasks of the thread whose dueAt is at or before now. */
  overdueFollowups: number;
  now: Date;
}

export const CATEGORY_WEIGHT: Record<ThreadCategory, number> = { A: 50, B: 30, C: 10 };

export const CLASSIFICATION_WEIGHT: Record<string, number> = {
  meeting_booked: 25,
  interested: 20,
  out_of_office: 5,
  not_interested: 0,
  unsubscribe: 0,
  bounce: 0,
};
/** Weight of a thread whose reply classification is unknown (null or unrecognized). */
export const UNKNOWN_CLASSIFICATION_WEIGHT = 10;

export const RECENCY_MAX = 20;
export const RECENCY_HALF_LIFE_HOURS = 24;
export const OVERDUE_WEIGHT = 10;
export const OVERDUE_CAP = 3;

/**
 * score = category + classification + recency + overdue, rounded to 2 decimals, in [0, 125]:
 *   category       A 50, B 30, C 10
 *   classification meeting_booked 25, interested 20, out_of_office 5,
 *                  not_interested / unsubscribe / bounce 0, unknown 10
 *   recency        20 * 0.5 ^ (hours since lastMessageAt / 24)  (a future lastMessageAt counts as now)
 *   overdue        10 per overdue pending follow-up, at most 3 counted (30)
 */
export function priorityScore(input: PriorityInput): number {
  const category = CATEGORY_WEIGHT[input.category] ?? CATEGORY_WEIGHT.B;
  const cls = (input.classification != null ? own(CLASSIFICATION_WEIGHT, input.classification) : undefined) ?? UNKNOWN_CLASSIFICATION_WEIGHT;
  const ageHours = Math.max(0, (input.now.getTime() - input.lastMessageAt.getTime()) / 3_600_000);
  const recency = RECENCY_MAX * Math.pow(0.5, ageHours / RECENCY_HALF_LIFE_HOURS);
  const overdue = OVERDUE_WEIGHT * Math.min(OVERDUE_CAP, Math.max(0, Math.floor(input.overdueFollowups)));
  return Math.round((category + cls + recency + overdue) * 100) / 100;
}
