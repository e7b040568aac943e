import { Migration } from '@mikro-orm/migrations';

/**
 * A reply's threads by SDR (sdrs/thread-repository.ts lockThreadOfReply, taken by every
 * assignment of a reply, under its lock): without it the lookup read every prospect thread.
 */
export class Migration0025ThreadOfReply extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index prospect_threads_reply_idx on prospect_threads (reply_id, sdr_id) where reply_id is not null`);
  }
}
