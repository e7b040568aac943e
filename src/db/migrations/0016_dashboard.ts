import { Migration } from '@mikro-orm/migrations';

/**
 * The dashboard (issue 17, docs/dashboard.md).
 *
 * dashboard_sessions: a signed-in browser. Only the SHA-256 of the cookie's token is stored.
 * A session belongs to the API key it signed in with: deleting the workspace deletes its
 * sessions (cascade), a revoked key ends them at their next request (the lookup joins the key).
 * The idle expiry compares last_seen_at with MAILGATE_DASHBOARD_SESSION_IDLE at lookup; the
 * index on last_seen_at lets expired rows be deleted in one range scan.
 *
 * Two read paths of the dashboard get their index: the campaign timeline counts a campaign's
 * messages by sent_at (outbound_campaign_sent_idx), and the suppression list is searched by a
 * substring of the address (pg_trgm, created in 0001).
 */
export class Migration0016Dashboard extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table dashboard_sessions (
      token_hash text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      key_id text not null references api_keys(id) on delete cascade,
      created_at timestamptz not null,
      last_seen_at timestamptz not null
    )`);
    this.addSql(`create index dashboard_sessions_key_idx on dashboard_sessions (key_id)`);
    this.addSql(`create index dashboard_sessions_seen_idx on dashboard_sessions (last_seen_at)`);
    this.addSql(`create index outbound_campaign_sent_idx on outbound_messages (campaign_id, sent_at) where sent_at is not null`);
    this.addSql(`create index suppressions_email_trgm_idx on suppressions using gin (email_key gin_trgm_ops)`);
  }
}
