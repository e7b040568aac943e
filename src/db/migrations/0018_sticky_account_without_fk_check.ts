import { Migration } from '@mikro-orm/migrations';

/**
 * enrollments.sender_account_id (the lead's sticky account) keeps no foreign key to
 * sender_accounts. Every accepted outcome sets it (markSent), and with the key each of those
 * rows ran a key-share lookup of the account and wrote a row lock on it: one nested statement
 * per message sent (10,000 per 10,000 messages in bench:send) and, while a claim held the
 * account row FOR NO KEY UPDATE and updated its last_sent_at, a multixact for the two lockers.
 * The one writer of the column takes the id from the message's claim (an account of the pool
 * read under its row lock); accounts are deleted only with their workspace, which deletes its
 * campaigns and their enrollments too; and a sticky id that is not one of the pool's usable
 * accounts is already ignored by the claim (sending/capacity.ts pickAccount). The same choice
 * as outbound_messages (0017). docs/decisions.md, "Performance, issue 20".
 */
export class Migration0018StickyAccountWithoutFkCheck extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table enrollments drop constraint enrollments_sender_account_id_fkey`);
  }
}
