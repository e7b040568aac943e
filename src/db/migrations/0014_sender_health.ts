import { Migration } from '@mikro-orm/migrations';

/**
 * Sender and mailbox health from real outcomes (issue 16, docs/architecture.md "Sender and
 * mailbox health").
 *
 * sender_accounts: `rate_limited` joins the health states; `health_retry_at` is the end of an
 * account's back-off (the claim skips the account until then, then tries it again) and
 * `health_failures` the consecutive account-level failures that lengthen it. A success resets
 * both.
 *
 * mailbox_watches: `rate_limited` joins the IMAP states (an SDR mailbox's `rate_limited`).
 */
export class Migration0014SenderHealth extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table sender_accounts drop constraint sender_accounts_health_check`);
    this.addSql(`alter table sender_accounts add constraint sender_accounts_health_check
                   check (health in ('unknown', 'ok', 'auth_failed', 'unreachable', 'rate_limited'))`);
    this.addSql(`alter table sender_accounts add column health_retry_at timestamptz`);
    this.addSql(`alter table sender_accounts add column health_failures integer not null default 0`);
    this.addSql(`alter table mailbox_watches drop constraint mailbox_watches_status_check`);
    this.addSql(`alter table mailbox_watches add constraint mailbox_watches_status_check
                   check (status in ('unknown', 'ok', 'auth_failed', 'unreachable', 'rate_limited'))`);
  }
}
