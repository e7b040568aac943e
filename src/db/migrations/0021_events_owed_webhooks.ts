import { Migration } from '@mikro-orm/migrations';

/**
 * `events.webhook_ids`: the webhooks an event is owed to, decided when the event is written
 * (the active webhooks of its workspace subscribed to its type, in the writing statement's
 * snapshot: events/outbox.ts). The fan-out used to decide by the webhooks' status and
 * subscriptions at fan-out time, so an event of a webhook disabled between the event and its
 * fan-out was dropped (and one taken again after a worker's crash was deleted with its batch),
 * while an event of the disabled period was delivered if the webhook was enabled again first
 * (docs/decisions.md, "Who is owed an event").
 *
 * The events still to be fanned out, and those of fan-out batches in flight, get the webhooks
 * the old rule would have given them had their fan-out run now: active, subscribed, created
 * before the event. Events already fanned out are not read for this again and stay null.
 */
export class Migration0021EventsOwedWebhooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table events add column webhook_ids text[]`);
    this.addSql(`update events e
        set webhook_ids = array(select w.id from webhooks w
                                 where w.workspace_id = e.workspace_id and e.type = any(w.events) and w.status = 'active' and w.created_at <= e.created_at
                                 order by w.id)
      where e.fanned_out_at is null or e.id in (select unnest(f.event_ids) from webhook_fanouts f)`);
  }
}
