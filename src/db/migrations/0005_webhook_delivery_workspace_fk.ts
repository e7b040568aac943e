import { Migration } from '@mikro-orm/migrations';

/**
 * The fan-out writes one delivery per (event, webhook) and checks each row's foreign keys. The
 * one to workspaces is redundant: a delivery's workspace is always its webhook's (and its
 * event's), and deleting a workspace already removes its deliveries through the webhook (and
 * the event) it belongs to, both `on delete cascade`. Dropping it saves a check and a row lock
 * per delivery written (bench/webhooks.ts: about 15-20% of the fan-out statement).
 */
export class Migration0005WebhookDeliveryWorkspaceFk extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhook_deliveries drop constraint webhook_deliveries_workspace_id_fkey`);
  }
}
