import { Migration } from '@mikro-orm/migrations';

/**
 * A delivery's attempts move into the delivery row: `attempts jsonb`, an array of
 * {at, statusCode, error, durationMs} in the order they were made. Recording an attempt was an
 * update of the delivery plus an insert into webhook_attempts (its heap, two indexes and a
 * foreign-key check that locked the delivery row); it is now the delivery's update alone, which
 * was written anyway. A delivery has at most 6 automatic attempts plus the manual retries, so
 * the row stays small; reading the log no longer joins. Existing attempts are copied over in
 * their order, then the table goes. On a large log this rewrites each delivery that has attempts
 * once, inside the migration's transaction, at the first start of this version (the retention
 * job keeps the log to MAILGATE_EVENT_RETENTION, 30 days by default).
 */
export class Migration0008AttemptsInDelivery extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhook_deliveries add column attempts jsonb not null default '[]'`);
    this.addSql(`update webhook_deliveries d set attempts = a.list
                   from (select delivery_id,
                                jsonb_agg(jsonb_build_object('at', at, 'statusCode', status_code, 'error', error, 'durationMs', duration_ms) order by at, id) as list
                           from webhook_attempts group by delivery_id) a
                  where a.delivery_id = d.id`);
    this.addSql(`drop table webhook_attempts`);
  }
}
