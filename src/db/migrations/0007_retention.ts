import { Migration } from '@mikro-orm/migrations';

/**
 * The retention job (src/modules/maintenance/retention.ts) deletes old events, and deleting an
 * event deletes its deliveries through the foreign key (`on delete cascade`), which looks them
 * up by `event_id`. The one-delivery-per-(webhook, event) index led with `webhook_id`, so every
 * deleted event (also every event of a deleted workspace) cost a scan of the deliveries. The
 * same unique index with `event_id` first serves the cascade, the retention job's "no delivery
 * left" check and the fan-out's `on conflict (webhook_id, event_id)` (conflict inference ignores
 * column order). Deleting a webhook finds its deliveries through webhook_deliveries_webhook_idx.
 * Still one index: the fan-out writes no more than before.
 */
export class Migration0007Retention extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create unique index webhook_deliveries_event_webhook_key on webhook_deliveries (event_id, webhook_id)`);
    this.addSql(`drop index webhook_deliveries_event_key`);
  }
}
