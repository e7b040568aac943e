import { Migration } from '@mikro-orm/migrations';

/**
 * Worker registration, so the work a dead process held moves on within seconds instead of at
 * its lease's end (docs/architecture.md, "Workers and their leases").
 *
 * `workers`: one row per running worker process, its heartbeat written by the database's own
 * clock. A handful of rows (one per process), read whole by every liveness check.
 *
 * Every lease names its owner, the registered worker's id: outbound_messages.claimed_by and
 * mailbox_watches.lease_owner already did; webhook deliveries get `lease_owner`.
 *
 * The reclaim of a dead worker's work finds it by owner, through partial indexes that hold
 * only work in flight (claimed messages, leased deliveries), so they stay as small as the work
 * in flight. mailbox_watches has one row per mailbox and the watcher's lease query reads it
 * whole every few seconds already: no index there.
 */
export class Migration0012Workers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table workers (
      id text primary key,
      host text not null,
      pid integer not null,
      role text not null,
      started_at timestamptz not null,
      heartbeat_at timestamptz not null
    )`);
    this.addSql(`alter table webhook_deliveries add column lease_owner text`);
    this.addSql(`create index outbound_claimed_by_idx on outbound_messages (claimed_by) where state = 'sending'`);
    this.addSql(`create index webhook_deliveries_owner_idx on webhook_deliveries (lease_owner) where lease_owner is not null`);
  }
}
