import { Migration } from '@mikro-orm/migrations';

/**
 * A prospect thread's automatic answers (an out-of-office, a ticket system's acknowledgement):
 * `thread_messages.automatic`. A send from the desk answers the thread's last message a person
 * wrote (sdrs/thread-repository.ts threadReferences); it answered whatever came last, an
 * auto-reply that followed the prospect's answer included. A thread's first message is its
 * handed-off reply, automatic when that reply was classified `out_of_office`; the answers
 * stored before this migration kept no classification and stay `false` (a person's).
 */
export class Migration0029ThreadMessageAutomatic extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table thread_messages add column automatic boolean not null default false`);
    this.addSql(`update thread_messages m set automatic = true
                   from prospect_threads t join replies r on r.id = t.reply_id
                  where m.thread_id = t.id and m.direction = 'inbound' and m.inbound_message_id is null
                    and m.message_id_header is not distinct from t.mail_thread_id and r.classification = 'out_of_office'`);
  }
}
