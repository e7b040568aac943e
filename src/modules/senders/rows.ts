// The rows of the senders' tables as hand-written SQL returns them (snake_case; timestamps as
// PostgreSQL's text or a Date): one type per table, the only declaration of its columns;
// readers type what they select as a Pick of these. SenderService's ORM entities (entities.ts)
// are the camelCase side of the same tables.

type Timestamp = string | Date;

/**
 * The account's SMTP health (senders/health.ts): `ok` the server accepted mail, `unknown`
 * nothing sent yet (or cleared by an operator), else the last account-level failure.
 */
export type SenderHealth = 'unknown' | 'ok' | 'auth_failed' | 'unreachable' | 'rate_limited';

export interface SenderAccountRow {
  id: string;
  workspace_id: string;
  email: string;
  name: string;
  status: 'active' | 'paused';
  smtp_url_enc: string;
  imap_url_enc: string | null;
  daily_limit: number | null;
  min_interval_ms: number;
  health: SenderHealth;
  health_error: string | null;
  health_checked_at: Timestamp | null;
  health_retry_at: Timestamp | null;
  health_failures: number;
  last_sent_at: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SenderPoolRow {
  id: string;
  workspace_id: string;
  name: string;
  daily_capacity: number;
  created_at: Timestamp;
}

export interface PoolMemberRow {
  pool_id: string;
  sender_account_id: string;
  added_at: Timestamp;
}
