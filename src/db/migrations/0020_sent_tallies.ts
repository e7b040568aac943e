import { Migration } from '@mikro-orm/migrations';

/**
 * The pools' and accounts' sent tallies (modules/messages/tallies.ts): a claim's rolling 24-hour
 * count reads them instead of one index entry per message sent in the window, which took 12 ms
 * per claim with 100,000 messages in it (docs/benchmarks.md, issue 20, session 18). One row per
 * owner (a pool's or an account's id: `pool_` and `snd_` ids never collide), five-minute bucket
 * and writer; no foreign keys (the rows are written in the sending hot path, and they go with
 * their workspace: messages/deletion.ts).
 *
 * The messages sent in the last two days are tallied here, in the migration's transaction:
 * migrations run at start under their advisory lock, before this version's workers send, and a
 * worker of an older version still running would write sent_at without a tally (the README's
 * upgrade notes say to stop them first). The statement is written out here, as
 * modules/messages/tallies.ts's backfillTalliesSql and tallyInsert made it when this migration
 * shipped (five-minute buckets), so that a later change of that module cannot change what this
 * migration does (until 2026-11-29 it imported them).
 */
export class Migration0020SentTallies extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table sent_tallies (
      owner_id text not null,
      bucket timestamptz not null,
      writer text not null,
      workspace_id text not null,
      n integer not null,
      primary key (owner_id, bucket, writer)
    )`);
    this.addSql(`create index sent_tallies_bucket_idx on sent_tallies (bucket)`);
    this.addSql(`create index sent_tallies_workspace_idx on sent_tallies (workspace_id)`);
    this.addSql(`insert into sent_tallies (owner_id, bucket, writer, workspace_id, n)
      select o.owner_id, to_timestamp(floor(extract(epoch from s.sent_at) / 300) * 300), s.writer, min(s.workspace_id), count(*)::int
        from (select sent_at, 'backfill' as writer, workspace_id, pool_id, sender_account_id from outbound_messages
               where sent_at is not null and sent_at > now() - interval '48 hours' and (pool_id is not null or sender_account_id is not null)) s
        cross join lateral (values (s.pool_id), (s.sender_account_id)) as o(owner_id)
       where o.owner_id is not null
       group by 1, 2, 3
      on conflict (owner_id, bucket, writer) do update set n = sent_tallies.n + excluded.n`);
  }
}
