import { Migration } from '@mikro-orm/migrations';

/**
 * The inbox search index without GIN's pending list (`fastupdate = off`).
 *
 * With the default `fastupdate = on`, a new or changed thread's index entries go to an
 * unsorted pending list, which is merged into the index only by (auto)vacuum or once it passes
 * `gin_pending_list_limit` (4 MB). Every search reads the whole list in the meantime. Measured
 * on bench/inbox.ts's data (docs/benchmarks.md, session 6): after 1,000 new and 1,000 changed
 * threads of the SDR and no vacuum, the broad search's p50 went 11.5 -> 13.6 ms with the list
 * (2,000 entries, 269 pages) and stayed at 11.5 ms without it. The price is on the write:
 * ~0.2 ms more per new thread, ~0.5 ms more per thread update that moves its index entries
 * (1.2 -> 1.4 and 1.1 -> 1.7 ms one by one), at the pace of replies and SDRs' clicks.
 *
 * Turning the option off does not merge an existing list, so the migration merges it.
 */
export class Migration0011SearchIndexNoPendingList extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter index prospect_threads_sdr_search_idx set (fastupdate = off)`);
    this.addSql(`select gin_clean_pending_list('prospect_threads_sdr_search_idx'::regclass)`);
  }
}
