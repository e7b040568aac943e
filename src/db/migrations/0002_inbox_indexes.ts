import { Migration } from '@mikro-orm/migrations';

/**
 * Inbox filters at 100,000 threads per SDR (bench/inbox.ts): the status and category filters
 * and the snoozed filter get indexes of their own, each leading with sdr_id like every inbox
 * query, so both the page and its count avoid scanning the SDR's whole inbox.
 */
export class Migration0002InboxIndexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index prospect_threads_status_idx on prospect_threads (sdr_id, status, priority_score desc, id)`);
    this.addSql(`create index prospect_threads_category_idx on prospect_threads (sdr_id, category, priority_score desc, id)`);
    this.addSql(`create index prospect_threads_snoozed_idx on prospect_threads (sdr_id, snoozed_until) where snoozed_until is not null`);
  }
}
