import { Migration } from '@mikro-orm/migrations';

/**
 * The fan-out writes one delivery per (event, webhook), and each row's two foreign keys cost a
 * check and a row lock apiece: about a third of the fan-out statement (EXPLAIN ANALYZE, 64
 * deliveries: 2.0 of 5.4 ms in the two constraint triggers). They go; what they did is done
 * explicitly, once per statement instead of once per row:
 * - a delivery's webhook exists: the fan-out locks the webhooks it writes for (FOR KEY SHARE,
 *   one lock per webhook per statement), so a deletion waits for it and then sees its rows;
 * - a delivery's event exists: the fan-out holds its events FOR UPDATE, and events are deleted
 *   only with their workspace or by the retention job when no delivery is left;
 * - deleting a webhook deletes its deliveries (repository.deleteWebhook), and deleting a
 *   workspace deletes the deliveries of its webhooks (WorkspaceService.delete), in the same
 *   transaction.
 */
export class Migration0009WebhookDeliveryFks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhook_deliveries drop constraint webhook_deliveries_webhook_id_fkey`);
    this.addSql(`alter table webhook_deliveries drop constraint webhook_deliveries_event_id_fkey`);
  }
}
