import { Migration } from '@mikro-orm/migrations';

/**
 * An index under every foreign key whose referenced rows are deleted in bulk (a workspace's
 * messages, enrollments, leads, inbound mail, threads and drafts). PostgreSQL runs a key's
 * `on delete` action once per deleted row, as a statement on the referencing table; without an
 * index on its column that statement reads the whole table (every workspace's rows), so deleting
 * a workspace read, say, inbound_messages once per outbound message: 10,000 messages against
 * 20,000 inbound mails took 8 s, a million messages hours, in the deletion's one transaction.
 * Partial (`is not null`): most of these columns are null on most rows, and `col = $1` implies it.
 */
export class Migration0027DeletionIndexes extends Migration {
  override async up(): Promise<void> {
    const indexes: [string, string, string][] = [
      ['inbound_messages_outbound_idx', 'inbound_messages', 'outbound_message_id'],
      ['replies_outbound_idx', 'replies', 'outbound_message_id'],
      ['replies_enrollment_idx', 'replies', 'enrollment_id'],
      ['replies_inbound_idx', 'replies', 'inbound_message_id'],
      ['thread_messages_outbound_idx', 'thread_messages', 'outbound_message_id'],
      ['thread_messages_inbound_idx', 'thread_messages', 'inbound_message_id'],
      ['handoffs_forwarded_idx', 'handoffs', 'forwarded_message_id'],
      ['handoffs_thread_idx', 'handoffs', 'thread_id'],
      ['drafts_sent_message_idx', 'drafts', 'sent_message_id'],
      ['drafts_superseded_by_idx', 'drafts', 'superseded_by'],
      ['prospect_threads_lead_idx', 'prospect_threads', 'lead_id'],
      ['prospect_threads_campaign_idx', 'prospect_threads', 'campaign_id'],
    ];
    for (const [name, table, column] of indexes) this.addSql(`create index ${name} on ${table} (${column}) where ${column} is not null`);
  }
}
