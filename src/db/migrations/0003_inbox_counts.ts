import { Migration } from '@mikro-orm/migrations';

/**
 * The inbox at 100,000 threads per SDR (bench/inbox.ts, docs/benchmarks.md), with an exact
 * `total`:
 *
 * - prospect_thread_counts: how many threads each (sdr, status, category, workspace) has,
 *   kept by statement triggers on prospect_threads in the transaction of every insert, update
 *   and delete (whoever writes: the services, a cascade, a test), so the total of an inbox
 *   without search is a sum over at most 30 rows. Rows whose count falls to 0 are deleted.
 * - The three order indexes cover the inbox filters (workspace_id, status, category,
 *   snoozed_until), so a filtered page is an index-only walk down the order; the snoozed index
 *   covers the filters and the order keys, so `snoozed=true` counts and pages without the heap
 *   (and `snoozed=false` is the counters minus that count). The status and category indexes of
 *   0002 serve nothing the order indexes do not, and go.
 * - search_text: the lower-cased haystack of the search, stored (a generated column: exact by
 *   construction) in the "C" collation, with the trigram index on it; re-checking a trigram
 *   match no longer lower()s three columns per candidate row.
 */
export class Migration0003InboxCounts extends Migration {
  override async up(): Promise<void> {
    const sql = String.raw;
    this.addSql(sql`alter table prospect_threads add column search_text text collate "C"
      generated always as (lower(contact_email || ' ' || contact_name || ' ' || subject)) stored`);
    this.addSql(sql`drop index prospect_threads_search_idx`);
    this.addSql(sql`create index prospect_threads_search_idx on prospect_threads using gin (search_text gin_trgm_ops)`);

    this.addSql(sql`drop index prospect_threads_inbox_idx`);
    this.addSql(sql`drop index prospect_threads_last_idx`);
    this.addSql(sql`drop index prospect_threads_created_idx`);
    this.addSql(sql`drop index prospect_threads_status_idx`);
    this.addSql(sql`drop index prospect_threads_category_idx`);
    this.addSql(sql`drop index prospect_threads_snoozed_idx`);
    this.addSql(sql`create index prospect_threads_inbox_idx on prospect_threads (sdr_id, priority_score desc, id)
      include (workspace_id, status, category, snoozed_until)`);
    this.addSql(sql`create index prospect_threads_last_idx on prospect_threads (sdr_id, last_message_at desc, id)
      include (workspace_id, status, category, snoozed_until)`);
    this.addSql(sql`create index prospect_threads_created_idx on prospect_threads (sdr_id, created_at desc, id)
      include (workspace_id, status, category, snoozed_until)`);
    this.addSql(sql`create index prospect_threads_snoozed_idx on prospect_threads (sdr_id, snoozed_until)
      include (workspace_id, status, category, priority_score, last_message_at, created_at, id) where snoozed_until is not null`);

    // No foreign keys: a cascade from sdrs or workspaces deletes the threads, whose trigger
    // then empties (deletes) the rows here; a foreign key would race that cascade.
    this.addSql(sql`create table prospect_thread_counts (
      sdr_id text not null,
      status text not null,
      category text not null,
      workspace_id text not null,
      n integer not null,
      primary key (sdr_id, status, category, workspace_id)
    )`);
    // Deltas are applied in key order, so concurrent writers lock counter rows in one order.
    this.addSql(sql`create function prospect_thread_counts_insert() returns trigger language plpgsql as $$
    begin
      insert into prospect_thread_counts as c (sdr_id, status, category, workspace_id, n)
      select sdr_id, status, category, workspace_id, count(*) from new_rows group by 1, 2, 3, 4 order by 1, 2, 3, 4
      on conflict (sdr_id, status, category, workspace_id) do update set n = c.n + excluded.n;
      return null;
    end $$`);
    this.addSql(sql`create function prospect_thread_counts_delete() returns trigger language plpgsql as $$
    begin
      insert into prospect_thread_counts as c (sdr_id, status, category, workspace_id, n)
      select sdr_id, status, category, workspace_id, -count(*) from old_rows group by 1, 2, 3, 4 order by 1, 2, 3, 4
      on conflict (sdr_id, status, category, workspace_id) do update set n = c.n + excluded.n;
      delete from prospect_thread_counts c
       where c.n = 0 and (c.sdr_id, c.status, c.category, c.workspace_id) in (select sdr_id, status, category, workspace_id from old_rows);
      return null;
    end $$`);
    // Most updates (priority, last_message_at, snooze) move no thread between counters: the
    // deltas cancel and nothing is written.
    this.addSql(sql`create function prospect_thread_counts_update() returns trigger language plpgsql as $$
    begin
      insert into prospect_thread_counts as c (sdr_id, status, category, workspace_id, n)
      select sdr_id, status, category, workspace_id, sum(d) from (
        select sdr_id, status, category, workspace_id, 1 as d from new_rows
        union all
        select sdr_id, status, category, workspace_id, -1 from old_rows) x
      group by 1, 2, 3, 4 having sum(d) <> 0 order by 1, 2, 3, 4
      on conflict (sdr_id, status, category, workspace_id) do update set n = c.n + excluded.n;
      if found then
        delete from prospect_thread_counts c
         where c.n = 0 and (c.sdr_id, c.status, c.category, c.workspace_id) in (select sdr_id, status, category, workspace_id from old_rows);
      end if;
      return null;
    end $$`);
    this.addSql(sql`create function prospect_thread_counts_truncate() returns trigger language plpgsql as $$
    begin
      delete from prospect_thread_counts;
      return null;
    end $$`);
    this.addSql(sql`create trigger prospect_thread_counts_insert after insert on prospect_threads
      referencing new table as new_rows for each statement execute function prospect_thread_counts_insert()`);
    this.addSql(sql`create trigger prospect_thread_counts_update after update on prospect_threads
      referencing old table as old_rows new table as new_rows for each statement execute function prospect_thread_counts_update()`);
    this.addSql(sql`create trigger prospect_thread_counts_delete after delete on prospect_threads
      referencing old table as old_rows for each statement execute function prospect_thread_counts_delete()`);
    this.addSql(sql`create trigger prospect_thread_counts_truncate after truncate on prospect_threads
      for each statement execute function prospect_thread_counts_truncate()`);
    // The threads there are now (the migration runs in one transaction, and creating the
    // triggers locked out writers of prospect_threads until it commits).
    this.addSql(sql`insert into prospect_thread_counts (sdr_id, status, category, workspace_id, n)
      select sdr_id, status, category, workspace_id, count(*) from prospect_threads group by 1, 2, 3, 4`);
  }
}
