// The prospect thread state machine (contract §8). Pure: no database.

export const THREAD_STATUSES = [
  'new',
  'awaiting_reply',
  'needs_followup',
  'replied',
  'meeting_booked',
  'won',
  'lost_not_interested',
  'lost_timing',
  'lost_competitor',
  'archived',
] as const;
export type ThreadStatus = (typeof THREAD_STATUSES)[number];

const OPEN: readonly ThreadStatus[] = ['new', 'awaiting_reply', 'needs_followup', 'replied'];
const LOST: readonly ThreadStatus[] = ['lost_not_interested', 'lost_timing', 'lost_competitor'];

/**
 * Transitions an SDR may make with PATCH /v1/sdr/threads/:id. (Event-driven changes, a send
 * making a thread awaiting_reply and so on, are not limited by this table.)
 */
const TABLE: Record<ThreadStatus, readonly ThreadStatus[]> = {
  new: ['meeting_booked', ...LOST, 'archived'],
  awaiting_reply: ['meeting_booked', ...LOST, 'archived'],
  needs_followup: ['meeting_booked', ...LOST, 'archived'],
  replied: ['meeting_booked', ...LOST, 'archived'],
  meeting_booked: ['won', ...LOST, 'archived'],
  won: ['archived'],
  lost_not_interested: ['archived', 'new'],
  lost_timing: ['archived', 'new'],
  lost_competitor: ['archived', 'new'],
  archived: ['new'],
};

export function isThreadStatus(value: string): value is ThreadStatus {
  return (THREAD_STATUSES as readonly string[]).includes(value);
}

export function isOpenStatus(status: ThreadStatus): boolean {
  return OPEN.includes(status);
}

/** The statuses a thread in `from` may be moved to by an SDR (a copy, in a stable order). */
export function allowedTransitions(from: ThreadStatus): ThreadStatus[] {
  return [...TABLE[from]];
}

export function canTransition(from: ThreadStatus, to: ThreadStatus): boolean {
  return TABLE[from].includes(to);
}
