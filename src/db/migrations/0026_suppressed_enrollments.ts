import { Migration } from '@mikro-orm/migrations';

/**
 * A campaign's enrollments made `suppressed` at enrollment (messages/queue.ts
 * reactivateUnsuppressed, run by every start, resume and enrollment): without it that lookup
 * read all of the campaign's enrollments, 100,000 at a large start, to find the few suppressed.
 */
export class Migration0026SuppressedEnrollments extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index enrollments_suppressed_campaign_idx on enrollments (campaign_id) where status = 'suppressed'`);
  }
}
