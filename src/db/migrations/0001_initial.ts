import { Migration } from '@mikro-orm/migrations';
import { getCreateTableSQL, getCreateIndexesSQL, getUpdateTimestampTriggerSQL } from '@agendajs/postgres-backend';

/**
 * The whole product's schema. Later migrations only add; this one is never edited once shipped.
 * Every table carries workspace_id (scope first); lookups the spec implies have an index.
 */
export class Migration0001Initial extends Migration {
  override async up(): Promise<void> {
    const sql = String.raw;
    this.addSql(sql`create extension if not exists pg_trgm`);

    // Instance-wide settings (e.g. the key-check value that proves MAILGATE_SECRET_KEY is right).
    this.addSql(sql`create table instance_settings (
      key text primary key,
      value text not null,
      updated_at timestamptz not null default now()
    )`);

    this.addSql(sql`create table workspaces (
      id text primary key,
      name text not null,
      created_at timestamptz not null
    )`);
    this.addSql(sql`create unique index workspaces_name_key on workspaces (name)`);

    // SDRs come before keys because an sdr key points at one.
    this.addSql(sql`create table sdrs (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      name text not null,
      email text not null,
      active boolean not null default true,
      tone text,
      signature text,
      calendar_url text,
      language text,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create unique index sdrs_workspace_email_key on sdrs (workspace_id, lower(email))`);

    // A deleted workspace leaves its keys behind with workspace_id null: they answer 404
    // workspace_not_found instead of 401 (spec §5.3).
    this.addSql(sql`create table api_keys (
      id text primary key,
      workspace_id text references workspaces(id) on delete set null,
      name text,
      role text not null check (role in ('admin', 'sdr')),
      sdr_id text references sdrs(id) on delete set null,
      key_hash text not null,
      key_prefix text not null,
      created_at timestamptz not null,
      revoked_at timestamptz,
      last_used_at timestamptz
    )`);
    this.addSql(sql`create unique index api_keys_hash_key on api_keys (key_hash)`);
    this.addSql(sql`create index api_keys_workspace_idx on api_keys (workspace_id)`);

    // Sender accounts: SMTP/IMAP URLs (with credentials) are stored AES-256-GCM encrypted.
    this.addSql(sql`create table sender_accounts (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      email text not null,
      name text not null,
      status text not null default 'active' check (status in ('active', 'paused')),
      smtp_url_enc text not null,
      imap_url_enc text,
      daily_limit integer check (daily_limit is null or daily_limit >= 0),
      min_interval_ms integer not null default 0 check (min_interval_ms >= 0),
      health text not null default 'unknown' check (health in ('unknown', 'ok', 'auth_failed', 'unreachable')),
      health_error text,
      health_checked_at timestamptz,
      last_sent_at timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create unique index sender_accounts_workspace_email_key on sender_accounts (workspace_id, lower(email))`);

    this.addSql(sql`create table sender_pools (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      name text not null,
      daily_capacity integer not null check (daily_capacity >= 0),
      created_at timestamptz not null
    )`);
    this.addSql(sql`create index sender_pools_workspace_idx on sender_pools (workspace_id, created_at)`);
    this.addSql(sql`create table pool_members (
      pool_id text not null references sender_pools(id) on delete cascade,
      sender_account_id text not null references sender_accounts(id) on delete cascade,
      added_at timestamptz not null,
      primary key (pool_id, sender_account_id)
    )`);
    this.addSql(sql`create index pool_members_sender_idx on pool_members (sender_account_id)`);

    // Campaigns and their ordered steps.
    this.addSql(sql`create table campaigns (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      name text not null,
      status text not null default 'draft' check (status in ('draft', 'running', 'paused')),
      sender_pool_id text references sender_pools(id) on delete set null,
      schedule jsonb,
      track_opens boolean not null default true,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      started_at timestamptz,
      paused_at timestamptz
    )`);
    this.addSql(sql`create index campaigns_workspace_idx on campaigns (workspace_id, created_at desc)`);
    this.addSql(sql`create index campaigns_running_idx on campaigns (status) where status = 'running'`);
    this.addSql(sql`create table campaign_steps (
      campaign_id text not null references campaigns(id) on delete cascade,
      step_index integer not null check (step_index >= 0),
      subject text not null,
      body_html text not null,
      delay_hours double precision not null default 48 check (delay_hours >= 0),
      primary key (campaign_id, step_index)
    )`);
    // Counters maintained in the same transactions as the changes they count, so stats are
    // one primary-key read at any campaign size.
    this.addSql(sql`create table campaign_counters (
      campaign_id text primary key references campaigns(id) on delete cascade,
      enrolled integer not null default 0,
      queued integer not null default 0,
      scheduled integer not null default 0,
      sent integer not null default 0,
      delivered integer not null default 0,
      bounced integer not null default 0,
      replied integer not null default 0,
      opened integer not null default 0,
      unsubscribed integer not null default 0
    )`);

    // Leads: one per workspace and lower-cased, trimmed email (email_key).
    this.addSql(sql`create table leads (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      email text not null,
      email_key text not null,
      first_name text,
      last_name text,
      company text,
      job_title text,
      custom jsonb not null default '{}'::jsonb,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create unique index leads_workspace_email_key on leads (workspace_id, email_key)`);

    // workspace_id is carried for scoping; integrity and cascades come through campaign_id
    // (leads are only ever deleted with their workspace, whose campaigns cascade here). Bulk
    // enrollment writes these by the ten thousand: every foreign-key check and index counts.
    this.addSql(sql`create table enrollments (
      id text primary key,
      seq bigint generated always as identity,
      workspace_id text not null,
      campaign_id text not null references campaigns(id) on delete cascade,
      lead_id text not null,
      status text not null default 'active'
        check (status in ('active', 'completed', 'replied', 'bounced', 'unsubscribed', 'suppressed')),
      sender_account_id text references sender_accounts(id) on delete set null,
      last_event text,
      last_event_at timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create unique index enrollments_campaign_lead_key on enrollments (campaign_id, lead_id)`);
    this.addSql(sql`create index enrollments_lead_idx on enrollments (lead_id)`);
    // Listing order is enrollment order (seq).
    this.addSql(sql`create index enrollments_campaign_seq_idx on enrollments (campaign_id, seq)`);

    // The send queue. One row per (enrollment, step): a step can never be queued twice.
    // The send queue and the sent log. One row per (enrollment, step): a step can never be
    // queued twice. workspace_id, campaign_id and lead_id are denormalized for the hot paths;
    // integrity and cascades come through enrollment_id (these rows are written by the
    // hundred thousand, so every foreign-key check counts).
    this.addSql(sql`create table outbound_messages (
      id text primary key,
      workspace_id text not null,
      campaign_id text not null,
      enrollment_id text references enrollments(id) on delete cascade,
      lead_id text,
      step_index integer not null,
      kind text not null default 'campaign' check (kind in ('campaign', 'forward', 'sdr_reply')),
      state text not null default 'queued'
        check (state in ('scheduled', 'queued', 'sending', 'sent', 'bounced', 'cancelled', 'failed')),
      due_at timestamptz not null,
      pool_id text references sender_pools(id) on delete set null,
      sender_account_id text references sender_accounts(id) on delete set null,
      to_email text not null,
      subject text,
      message_id_header text,
      in_reply_to text,
      references_header text,
      claimed_by text,
      lease_until timestamptz,
      attempts integer not null default 0,
      smtp_started_at timestamptz,
      last_error text,
      smtp_response text,
      sent_at timestamptz,
      bounce_type text check (bounce_type in ('hard', 'soft')),
      bounce_reason text,
      bounced_at timestamptz,
      opened_at timestamptz,
      cancel_reason text,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create unique index outbound_enrollment_step_key on outbound_messages (enrollment_id, step_index) where kind = 'campaign'`);
    // The dispatcher's claim: a running campaign's due messages in order.
    this.addSql(sql`create index outbound_claim_idx on outbound_messages (campaign_id, due_at) where state = 'queued'`);
    // Promotion of follow-ups whose time has come.
    this.addSql(sql`create index outbound_scheduled_idx on outbound_messages (due_at) where state = 'scheduled'`);
    // Claimed messages: expired leases, and in-flight counts per pool and per account.
    this.addSql(sql`create index outbound_lease_idx on outbound_messages (lease_until) where state = 'sending'`);
    this.addSql(sql`create index outbound_sending_pool_idx on outbound_messages (pool_id) where state = 'sending'`);
    this.addSql(sql`create index outbound_sending_sender_idx on outbound_messages (sender_account_id) where state = 'sending'`);
    // Pending messages of an enrollment (ending it cancels them).
    this.addSql(sql`create index outbound_pending_enrollment_idx on outbound_messages (enrollment_id) where state in ('queued', 'scheduled', 'sending')`);
    this.addSql(sql`create unique index outbound_message_id_key on outbound_messages (message_id_header) where message_id_header is not null`);
    // Rolling 24-hour capacity counts.
    this.addSql(sql`create index outbound_pool_sent_idx on outbound_messages (pool_id, sent_at) where sent_at is not null`);
    this.addSql(sql`create index outbound_sender_sent_idx on outbound_messages (sender_account_id, sent_at) where sent_at is not null`);
    // Matching a reply by its sender's address to the latest message sent from an account.
    this.addSql(sql`create index outbound_sender_to_idx on outbound_messages (sender_account_id, lower(to_email), sent_at desc) where sent_at is not null`);

    // Suppression: workspace-wide, keyed by the lower-cased, trimmed address.
    this.addSql(sql`create table suppressions (
      workspace_id text not null references workspaces(id) on delete cascade,
      email_key text not null,
      email text not null,
      reason text not null check (reason in ('manual', 'hard_bounce', 'unsubscribe', 'reply_unsubscribe')),
      source text,
      created_at timestamptz not null,
      primary key (workspace_id, email_key)
    )`);

    // SDR mailboxes (connected with `sdr connect-mail`) and the ICP gate.
    this.addSql(sql`create table sdr_mailboxes (
      sdr_id text primary key references sdrs(id) on delete cascade,
      workspace_id text not null references workspaces(id) on delete cascade,
      email text not null,
      smtp_url_enc text not null,
      imap_url_enc text not null,
      health_state text not null default 'disconnected'
        check (health_state in ('active', 'needs_reauth', 'rate_limited', 'disconnected')),
      last_synced_at timestamptz,
      last_sync_error text,
      connected_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create table icp_criteria (
      workspace_id text primary key references workspaces(id) on delete cascade,
      seniority text[],
      employee_counts text[],
      updated_at timestamptz not null
    )`);

    // IMAP watch state for every mailbox (sender account or SDR): UIDVALIDITY + last UID so
    // a restart neither misses nor double-counts, and a lease so one worker watches each.
    this.addSql(sql`create table mailbox_watches (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      sender_account_id text references sender_accounts(id) on delete cascade,
      sdr_id text references sdrs(id) on delete cascade,
      mailbox text not null default 'INBOX',
      uid_validity bigint,
      last_uid bigint not null default 0,
      since timestamptz not null,
      lease_owner text,
      lease_until timestamptz,
      status text not null default 'unknown' check (status in ('unknown', 'ok', 'auth_failed', 'unreachable')),
      last_error text,
      last_synced_at timestamptz,
      check ((sender_account_id is null) <> (sdr_id is null))
    )`);
    this.addSql(sql`create unique index mailbox_watches_sender_key on mailbox_watches (sender_account_id, mailbox) where sender_account_id is not null`);
    this.addSql(sql`create unique index mailbox_watches_sdr_key on mailbox_watches (sdr_id, mailbox) where sdr_id is not null`);

    // Inbound mail as received (raw kept so classification can be re-run), and the replies
    // (including bounces) it produced.
    this.addSql(sql`create table inbound_messages (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      watch_id text references mailbox_watches(id) on delete set null,
      uid_validity bigint,
      uid bigint,
      message_id_header text,
      in_reply_to text,
      references_header text,
      from_email text,
      subject text,
      received_at timestamptz not null,
      raw bytea not null,
      outbound_message_id text references outbound_messages(id) on delete set null,
      kind text not null check (kind in ('reply', 'bounce', 'thread_reply', 'unmatched')),
      created_at timestamptz not null
    )`);
    this.addSql(sql`create unique index inbound_watch_uid_key on inbound_messages (watch_id, uid_validity, uid) where watch_id is not null`);
    this.addSql(sql`create index inbound_message_id_idx on inbound_messages (message_id_header)`);

    this.addSql(sql`create table replies (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      campaign_id text not null references campaigns(id) on delete cascade,
      lead_id text not null references leads(id) on delete cascade,
      enrollment_id text references enrollments(id) on delete set null,
      outbound_message_id text references outbound_messages(id) on delete set null,
      inbound_message_id text references inbound_messages(id) on delete set null,
      email text not null,
      classification text not null
        check (classification in ('interested', 'not_interested', 'out_of_office', 'bounce', 'unsubscribe', 'meeting_booked')),
      decided_by text not null,
      confidence double precision not null,
      thread_snippet text not null default '',
      bounce_type text check (bounce_type in ('hard', 'soft')),
      bounce_reason text,
      received_at timestamptz not null,
      forwarded_at timestamptz,
      created_at timestamptz not null
    )`);
    this.addSql(sql`create index replies_workspace_received_idx on replies (workspace_id, received_at desc, id desc)`);
    this.addSql(sql`create index replies_campaign_received_idx on replies (campaign_id, received_at desc, id desc)`);
    this.addSql(sql`create index replies_lead_idx on replies (lead_id)`);

    // Webhooks: registrations, the events outbox, one delivery per (event, webhook), attempts.
    this.addSql(sql`create table webhooks (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      url text not null,
      events text[] not null,
      status text not null default 'active' check (status in ('active', 'disabled')),
      signing_secret_enc text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create index webhooks_workspace_idx on webhooks (workspace_id, created_at)`);
    this.addSql(sql`create table events (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      type text not null,
      data jsonb not null,
      created_at timestamptz not null,
      fanned_out_at timestamptz
    )`);
    this.addSql(sql`create index events_pending_idx on events (created_at) where fanned_out_at is null`);
    this.addSql(sql`create table webhook_deliveries (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      webhook_id text not null references webhooks(id) on delete cascade,
      event_id text not null references events(id) on delete cascade,
      state text not null default 'pending' check (state in ('pending', 'delivered', 'failed')),
      attempt_count integer not null default 0,
      next_attempt_at timestamptz,
      lease_until timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create unique index webhook_deliveries_event_key on webhook_deliveries (webhook_id, event_id)`);
    this.addSql(sql`create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where state = 'pending'`);
    this.addSql(sql`create index webhook_deliveries_webhook_idx on webhook_deliveries (webhook_id, created_at desc)`);
    this.addSql(sql`create table webhook_attempts (
      id bigserial primary key,
      delivery_id text not null references webhook_deliveries(id) on delete cascade,
      at timestamptz not null,
      status_code integer,
      error text,
      duration_ms integer not null
    )`);
    this.addSql(sql`create index webhook_attempts_delivery_idx on webhook_attempts (delivery_id, at)`);

    // The SDR desk: prospect threads, their messages, handoffs, follow-ups.
    this.addSql(sql`create table prospect_threads (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      sdr_id text not null references sdrs(id) on delete cascade,
      reply_id text references replies(id) on delete set null,
      lead_id text references leads(id) on delete set null,
      campaign_id text references campaigns(id) on delete set null,
      contact_email text not null,
      contact_name text not null default '',
      subject text not null default '',
      status text not null default 'new' check (status in ('new', 'awaiting_reply', 'needs_followup', 'replied',
        'meeting_booked', 'won', 'lost_not_interested', 'lost_timing', 'lost_competitor', 'archived')),
      category text not null default 'B' check (category in ('A', 'B', 'C')),
      priority_score double precision not null default 0,
      snoozed_until timestamptz,
      last_message_at timestamptz not null,
      mail_thread_id text,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create index prospect_threads_inbox_idx on prospect_threads (sdr_id, priority_score desc, id)`);
    this.addSql(sql`create index prospect_threads_last_idx on prospect_threads (sdr_id, last_message_at desc, id)`);
    this.addSql(sql`create index prospect_threads_created_idx on prospect_threads (sdr_id, created_at desc, id)`);
    this.addSql(sql`create index prospect_threads_search_idx on prospect_threads
      using gin ((lower(contact_email || ' ' || contact_name || ' ' || subject)) gin_trgm_ops)`);
    this.addSql(sql`create table thread_messages (
      id text primary key,
      thread_id text not null references prospect_threads(id) on delete cascade,
      direction text not null check (direction in ('inbound', 'outbound')),
      outbound_message_id text references outbound_messages(id) on delete set null,
      inbound_message_id text references inbound_messages(id) on delete set null,
      message_id_header text,
      from_email text not null,
      to_emails text[] not null default '{}',
      cc_emails text[] not null default '{}',
      subject text not null default '',
      body_text text not null default '',
      body_html text,
      at timestamptz not null,
      created_at timestamptz not null
    )`);
    this.addSql(sql`create index thread_messages_thread_idx on thread_messages (thread_id, at)`);
    this.addSql(sql`create index thread_messages_message_id_idx on thread_messages (message_id_header)`);
    this.addSql(sql`create table handoffs (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      reply_id text not null references replies(id) on delete cascade,
      thread_id text not null references prospect_threads(id) on delete cascade,
      sdr_id text not null references sdrs(id) on delete cascade,
      forwarded_message_id text references outbound_messages(id) on delete set null,
      to_email text not null,
      cc_emails text[] not null default '{}',
      subject text not null,
      note text,
      category text not null,
      seniority text,
      employee_count text,
      snapshot jsonb not null,
      created_at timestamptz not null
    )`);
    this.addSql(sql`create index handoffs_reply_idx on handoffs (reply_id)`);

    this.addSql(sql`create table drafts (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      thread_id text not null references prospect_threads(id) on delete cascade,
      sdr_id text not null references sdrs(id) on delete cascade,
      state text not null default 'generated' check (state in ('generated', 'edited', 'superseded', 'sent', 'discarded')),
      subject text not null,
      body_text text not null,
      body_html text not null,
      instructions text,
      superseded_by text references drafts(id) on delete set null,
      sent_message_id text references outbound_messages(id) on delete set null,
      model text,
      prompt_tokens integer,
      completion_tokens integer,
      latency_ms integer,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`);
    this.addSql(sql`create index drafts_thread_idx on drafts (thread_id, created_at)`);
    this.addSql(sql`create table draft_insights (
      draft_id text primary key references drafts(id) on delete cascade,
      approach text not null check (approach in ('direct_answer', 'question_led', 'proof_led', 'offline_template')),
      confidence double precision not null,
      rationale text not null,
      scores jsonb not null default '{}'::jsonb
    )`);

    this.addSql(sql`create table followup_rules (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      name text not null,
      after_ms bigint not null check (after_ms > 0),
      business_days boolean not null default false,
      categories text[],
      max_attempts integer not null default 1 check (max_attempts >= 1),
      created_at timestamptz not null
    )`);
    this.addSql(sql`create index followup_rules_workspace_idx on followup_rules (workspace_id)`);
    this.addSql(sql`create table followup_tasks (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      thread_id text not null references prospect_threads(id) on delete cascade,
      sdr_id text not null references sdrs(id) on delete cascade,
      rule_id text references followup_rules(id) on delete set null,
      attempt integer not null default 1,
      status text not null default 'pending' check (status in ('pending', 'done', 'cancelled', 'skipped')),
      due_at timestamptz not null,
      created_at timestamptz not null,
      completed_at timestamptz
    )`);
    this.addSql(sql`create index followup_tasks_due_idx on followup_tasks (sdr_id, due_at) where status = 'pending'`);
    this.addSql(sql`create index followup_tasks_thread_idx on followup_tasks (thread_id)`);

    this.addSql(sql`create table kb_entries (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      title text not null,
      body text not null,
      tsv tsvector generated always as (to_tsvector('simple', title || ' ' || body)) stored,
      created_at timestamptz not null
    )`);
    this.addSql(sql`create index kb_entries_tsv_idx on kb_entries using gin (tsv)`);
    this.addSql(sql`create index kb_entries_trgm_idx on kb_entries using gin ((title || ' ' || body) gin_trgm_ops)`);

    // Agenda's job table, created here (not by Agenda at connect) so that several processes
    // starting at once cannot race on it.
    this.addSql(getCreateTableSQL('agenda_jobs'));
    for (const s of getCreateIndexesSQL('agenda_jobs')) this.addSql(s);
    this.addSql(getUpdateTimestampTriggerSQL('agenda_jobs'));
  }
}
