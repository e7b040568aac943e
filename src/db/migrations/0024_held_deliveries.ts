import { Migration } from '@mikro-orm/migrations';

/**
 * Held webhook deliveries (pending, no due time: their webhook was disabled) by webhook, for the
 * claim's second branch (webhooks/repository.ts claimDue): a held delivery of an active webhook
 * is due. An enable releases its webhook's held deliveries, but a writer that read the
 * webhook's status in a snapshot taken before the enable committed could hold one after the
 * release; it stayed held under an active webhook until a manual retry. Partial: usually empty.
 */
export class Migration0024HeldDeliveries extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index webhook_deliveries_held_idx on webhook_deliveries (webhook_id) where state = 'pending' and next_attempt_at is null`);
  }
}
