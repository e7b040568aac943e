// The shapes the dashboard reads, as docs/openapi.json describes them.

export interface Page<T> {
  data: T[];
  total: number;
  hasMore: boolean;
}

export interface SequenceStep {
  stepIndex?: number;
  subject: string;
  bodyHtml: string;
  delayHours: number;
}

export type Day = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';

export interface Schedule {
  timezone: string;
  days: Day[];
  start: string;
  end: string;
}

export interface Campaign {
  id: string;
  name: string;
  status: 'draft' | 'running' | 'paused';
  sequenceSteps: SequenceStep[];
  sequenceStepCount: number;
  senderPoolId: string | null;
  schedule: Schedule | null;
  trackOpens: boolean;
  createdAt: string;
  startedAt: string | null;
  pausedAt: string | null;
}

export interface CampaignStats {
  campaignId: string;
  totalEnrolled: number;
  sent: number;
  delivered: number;
  bounced: number;
  replied: number;
  queued: number;
  scheduled: number;
  opened: number;
  unsubscribed: number;
  complained: number;
  openRate: number;
  replyRate: number;
  sendersAvailable: number;
  blockedReason: BlockedReason | null;
}

export type BlockedReason = 'no_sender_pool' | 'no_sender_available' | 'pool_capacity_reached' | 'sender_limits_reached' | 'outside_schedule';

/**
 * What a running campaign's blockedReason means: a short word for the overview's table, a
 * sentence for the campaign's page, and whether it needs the operator (a missing pool, no
 * account able to send) or only waits on limits and the schedule window, as it should.
 */
export const BLOCKED: Record<BlockedReason, { short: string; long: string; needsOperator: boolean }> = {
  no_sender_pool: { short: 'no sender pool', long: 'Sending is blocked: the campaign has no sender pool. Choose one under Schedule and sending.', needsOperator: true },
  no_sender_available: { short: 'no sender available', long: 'Sending is blocked: no sender of its pool can send now (all paused, failing or in a back-off). See Senders.', needsOperator: true },
  pool_capacity_reached: { short: 'pool at daily capacity', long: 'Sending waits: the sender pool sent its daily capacity in the last 24 hours. It goes on as that window moves.', needsOperator: false },
  sender_limits_reached: { short: 'senders at daily limit', long: 'Sending waits: every sender of its pool that may send reached its daily limit in the last 24 hours.', needsOperator: false },
  outside_schedule: { short: 'outside its schedule', long: "Sending waits for the campaign's schedule window to open.", needsOperator: false },
};

export interface Enrollment {
  id: string;
  enrollmentId: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  company: string | null;
  jobTitle: string | null;
  customFields: Record<string, unknown>;
  status: string;
  currentStep: number | null;
  nextSendAt: string | null;
  lastEvent: string | null;
  lastEventAt: string | null;
  failureReason: string | null;
  enrolledAt: string;
}

export interface SenderAccount {
  id: string;
  email: string;
  name: string;
  status: 'active' | 'paused';
  health: string;
  healthError: string | null;
  healthRetryAt: string | null;
  imapHealth: string | null;
  dailyLimit: number | null;
  minIntervalSeconds: number;
  sentLast24h?: number;
}

export interface SenderPool {
  id: string;
  name: string;
  dailyCapacity: number;
  remainingVolume: number;
  remainingToday: number;
  senderAccountIds: string[];
  senderCount: number;
}

export interface Reply {
  id: string;
  email: string;
  campaignId: string;
  classification: string;
  receivedAt: string;
  threadSnippet: string;
  /** Its last forward to an SDR, and the SDRs it went to (GET /v1/replies' extension). */
  forwardedAt: string | null;
  assignedTo: Array<{ sdrId: string; name: string }>;
  /** What the classifier decided, and its rule; an operator's change (PATCH /v1/replies/:replyId), when and by whom. */
  classifierClassification: string;
  decidedBy: string;
  reclassifiedAt: string | null;
  reclassifiedBy: string | null;
}

export interface Webhook {
  id: string;
  url: string;
  events: string[];
  status: 'active' | 'disabled';
  createdAt: string;
  updatedAt: string;
  signingSecret?: string;
}

export interface WebhookDelivery {
  id: string;
  webhookId: string;
  eventId: string;
  event: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: { at: string; statusCode: number | null; error: string | null; durationMs: number }[];
  nextAttemptAt: string | null;
  createdAt: string;
}

export const THREAD_STATUSES = ['new', 'awaiting_reply', 'needs_followup', 'replied', 'meeting_booked', 'won', 'lost_not_interested', 'lost_timing', 'lost_competitor', 'archived'] as const;
export type ThreadStatus = (typeof THREAD_STATUSES)[number];

export interface ProspectThread {
  id: string;
  contactEmail: string;
  contactName: string;
  subject: string;
  status: ThreadStatus;
  category: 'A' | 'B' | 'C';
  priorityScore: number;
  lastMessageAt: string;
  createdAt: string;
  snoozedUntil: string | null;
}

export interface ThreadMessage {
  id: string;
  direction: 'inbound' | 'outbound';
  fromEmail: string;
  toEmails: string[];
  ccEmails: string[];
  subject: string;
  bodyText: string;
  bodyHtml: string | null;
  at: string;
}

export interface Draft {
  id: string;
  threadId?: string;
  state: 'generated' | 'edited' | 'superseded' | 'sent' | 'discarded';
  subject: string;
  bodyText: string;
  bodyHtml: string;
  /** superseded: the draft that took its place; null when a manual reply superseded it. */
  supersededBy?: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface DraftScores {
  overall: number;
  readability: number;
  personalization: number;
  linkQuality: number;
}

export interface DraftInsight {
  draftId: string;
  approach: string;
  confidence: number;
  rationale: string;
  scores: DraftScores | null;
}

export interface Guardrails {
  blocked: boolean;
  issues: { code: string; severity: 'block' | 'warn'; message: string; field?: string }[];
  scores: DraftScores;
}

export interface ThreadDetail extends ProspectThread {
  messages: ThreadMessage[];
  handoff: { id: string; replyId: string; toEmail: string; subject: string; note: string | null; category: string; seniority: string | null; employeeCount: string | null; snapshot: unknown; createdAt: string } | null;
  drafts: Draft[];
}
