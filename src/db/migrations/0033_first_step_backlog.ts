import { Migration } from '@mikro-orm/migrations';

/**
 * The first steps a first start counted as queued and left to the workers (issue 20: a
 * 100,000-lead start spent 1.2-2.6 s writing its step-0 rows in the request;
 * docs/decisions.md, "A large start's first steps"). One row per campaign: the active
 * enrollments with `after_seq < seq <= through_seq` (none of which has a step-0 message) get
 * one due at `due_at`, written by the workers in chunks in enrollment order (messages/queue.ts
 * writeBacklogChunk), each chunk moving `after_seq` in its own transaction; the row goes when
 * the range is done. Until then the campaign's `queued` counts them (counters.ts).
 */
export class Migration0033FirstStepBacklog extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table first_step_backlog (
      campaign_id text primary key references campaigns (id) on delete cascade,
      after_seq bigint not null,
      through_seq bigint not null,
      due_at timestamptz not null,
      created_at timestamptz not null
    )`);
  }
}
