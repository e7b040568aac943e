import type { ThreadStatus } from './threads-state.ts';
import type { ThreadCategory } from './priority.ts';
import type { MailHealth } from './entities.ts';

// The rows of the SDR desk's tables as hand-written SQL returns them (snake_case; timestamps as
// PostgreSQL's text or a Date): one type per table, the only declaration of its columns. Every
// reader, in this module or another (drafts' context reads, the dashboard), types what it
// selects as a Pick of these. SdrService's ORM entities (entities.ts) are the camelCase side of
// `sdrs` and `sdr_mailboxes`.

type Timestamp = string | Date;

export interface SdrRow {
  id: string;
  workspace_id: string;
  name: string;
  email: string;
  active: boolean;
  tone: string | null;
  signature: string | null;
  calendar_url: string | null;
  language: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SdrMailboxRow {
  sdr_id: string;
  workspace_id: string;
  email: string;
  smtp_url_enc: string;
  imap_url_enc: string;
  health_state: MailHealth;
  last_synced_at: Timestamp | null;
  last_sync_error: string | null;
  connected_at: Timestamp;
  updated_at: Timestamp;
}

export interface IcpCriteriaRow {
  workspace_id: string;
  seniority: string[] | null;
  employee_counts: string[] | null;
  updated_at: Timestamp;
}

export interface ProspectThreadRow {
  id: string;
  workspace_id: string;
  sdr_id: string;
  reply_id: string | null;
  lead_id: string | null;
  campaign_id: string | null;
  contact_email: string;
  contact_name: string;
  subject: string;
  status: ThreadStatus;
  category: ThreadCategory;
  priority_score: number;
  snoozed_until: Timestamp | null;
  last_message_at: Timestamp;
  mail_thread_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ThreadMessageRow {
  id: string;
  thread_id: string;
  direction: 'inbound' | 'outbound';
  outbound_message_id: string | null;
  inbound_message_id: string | null;
  message_id_header: string | null;
  from_email: string;
  to_emails: string[];
  cc_emails: string[];
  subject: string;
  body_text: string;
  body_html: string | null;
  /** An automatic answer (an out-of-office, a ticket system's acknowledgement): no send from the desk answers it. */
  automatic: boolean;
  at: Timestamp;
  created_at: Timestamp;
}

/** The conversation frozen at assignment (assign.ts snapshot()), as its readers use it. */
export interface HandoffSnapshot {
  messages?: { direction: string; subject?: string; bodyText?: string; at?: string | null }[];
}

export interface HandoffRow {
  id: string;
  workspace_id: string;
  reply_id: string;
  thread_id: string;
  sdr_id: string;
  forwarded_message_id: string | null;
  to_email: string;
  cc_emails: string[];
  subject: string;
  note: string | null;
  category: string;
  seniority: string | null;
  employee_count: string | null;
  snapshot: HandoffSnapshot;
  created_at: Timestamp;
}

export type FollowupStatus = 'pending' | 'done' | 'cancelled' | 'skipped';

export interface FollowupRuleRow {
  id: string;
  workspace_id: string;
  name: string;
  after_ms: string | number;
  business_days: boolean;
  categories: string[] | null;
  max_attempts: number;
  created_at: Timestamp;
}

export interface FollowupTaskRow {
  id: string;
  workspace_id: string;
  thread_id: string;
  sdr_id: string;
  rule_id: string | null;
  attempt: number;
  status: FollowupStatus;
  due_at: Timestamp;
  created_at: Timestamp;
  completed_at: Timestamp | null;
}
