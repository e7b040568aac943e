import { Migration } from '@mikro-orm/migrations';

/**
 * A fresh delivery is written once, with its first attempt's outcome, instead of being inserted
 * leased before its first attempt and updated after it (issue 20; docs/decisions.md, "A
 * delivery is written with its first outcome"). What keeps a crash from losing it meanwhile is
 * the fan-out's lease: one row per fan-out batch, naming the events it took, the worker holding
 * them and until when. A batch whose lease runs out (its worker died or stopped) is taken again
 * by any worker, which attempts the pairs of its events that still have no delivery.
 */
export class Migration0019WebhookFanouts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table webhook_fanouts (
      id text primary key,
      lease_owner text,
      lease_until timestamptz not null,
      event_ids text[] not null,
      created_at timestamptz not null
    )`);
    this.addSql(`create index webhook_fanouts_lease_idx on webhook_fanouts (lease_until)`);
  }
}
