import { Migration } from '@mikro-orm/migrations';

/**
 * The follow-up scheduler looks for threads awaiting a reply across all SDRs every round
 * (FollowupService.createBatch, markDue). The inbox indexes all lead with sdr_id, so without
 * this partial index each round read the whole table; this one holds only the waiting threads,
 * in the id order the scheduler pages in.
 */
export class Migration0006FollowupScan extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index prospect_threads_awaiting_idx on prospect_threads (id) where status = 'awaiting_reply'`);
  }
}
