import { Migration } from '@mikro-orm/migrations';

/**
 * events keeps no foreign key to workspaces. markSent (messages/transitions.ts) locks its
 * messages and then writes their message.sent events in the same statement; the key's check
 * took a key-share lock on the workspace row there, after the messages. A workspace deletion
 * holds that row first (webhooks/repository.ts lockWorkspaceWebhooks) and then deletes the
 * messages: each waited for the other and PostgreSQL aborted one after a second, and until then
 * the worker's whole batch of outcomes, other workspaces' included, waited for the deletion.
 * The deletion now deletes the workspace's events itself (events/outbox.ts deleteWorkspaceEvents),
 * after its messages. The same choice as webhook_deliveries (0009) and outbound_messages (0017).
 */
export class Migration0028EventsWithoutWorkspaceFk extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table events drop constraint events_workspace_id_fkey`);
  }
}
