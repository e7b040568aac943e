import { Migration } from '@mikro-orm/migrations';

/**
 * outbound_messages keeps no foreign keys to enrollments, sender_pools or sender_accounts.
 * Their per-row checks were a third of a campaign start (100,000 key-share lookups and lock
 * records on the enrollments for one statement, docs/benchmarks.md, issue 20) and a key-share
 * lock on the pool's and account's rows in every claim and outcome. The queue's one owner
 * (modules/messages) writes these columns only from rows it reads in the same statement, and
 * deletes a workspace's messages itself (messages/deletion.ts, called by the workspace's
 * deletion); the cascade these keys gave could not use an index anyway (the indexes on
 * enrollment_id are partial), so it read the whole table once per enrollment. The same choice
 * as webhook_deliveries (0009). docs/decisions.md, "Performance, issue 20".
 */
export class Migration0017QueueWithoutFkChecks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table outbound_messages drop constraint outbound_messages_enrollment_id_fkey`);
    this.addSql(`alter table outbound_messages drop constraint outbound_messages_pool_id_fkey`);
    this.addSql(`alter table outbound_messages drop constraint outbound_messages_sender_account_id_fkey`);
    // An enrollment's waiting messages are found through outbound_enrollment_step_key
    // (enrollment_id, step_index) where kind = 'campaign': only campaign messages have an
    // enrollment, and the readers say kind = 'campaign'. One index fewer to write per message.
    this.addSql(`drop index outbound_pending_enrollment_idx`);
  }
}
