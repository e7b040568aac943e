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
  blockedReason: 'no_sender_pool' | 'no_sender_available' | null;
}

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
