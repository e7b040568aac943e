import { Migration } from '@mikro-orm/migrations';

/**
 * Feedback-loop complaints and unclassified automatic mail (issue 19, docs/classification.md):
 * the `complaint` suppression reason, the campaign counter `complained` (GET
 * /v1/campaigns/:id/stats), and two kinds of stored inbound mail: `complaint` (an RFC 5965
 * report about one of our messages) and `unclassified` (automatic mail that is neither a
 * recognized report nor an out-of-office answer; kept for a re-run, with no effect).
 */
export class Migration0013Complaints extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table suppressions drop constraint suppressions_reason_check`);
    this.addSql(`alter table suppressions add constraint suppressions_reason_check
                   check (reason in ('manual', 'hard_bounce', 'unsubscribe', 'reply_unsubscribe', 'complaint'))`);
    this.addSql(`alter table campaign_counters add column complained integer not null default 0`);
    this.addSql(`alter table inbound_messages drop constraint inbound_messages_kind_check`);
    this.addSql(`alter table inbound_messages add constraint inbound_messages_kind_check
                   check (kind in ('reply', 'bounce', 'thread_reply', 'unmatched', 'complaint', 'unclassified'))`);
  }
}
