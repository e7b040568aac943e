import { Migration } from '@mikro-orm/migrations';

/**
 * The inbox search, scoped to the SDR inside the index.
 *
 * The trigram index of 0003 covered every thread of the installation, so a search for one SDR
 * started from every SDR's matching threads: either each was rechecked in the table before the
 * `sdr_id` condition dropped it, or (the plan with current statistics) the trigram candidates
 * were intersected with a bitmap of all the SDR's entries of an order index. Either way a broad
 * search cost in proportion to the whole installation, not to the SDR. Measured for `acme`, an
 * SDR with 100,000 threads beside 420,000 threads of 20 other SDRs (docs/benchmarks.md, session
 * 5): 25,665 candidates rechecked on 14,082 pages (224 ms) without statistics, the bitmap
 * intersection with 100,000 index entries (~33 ms) with them, against 4,980 candidates on 2,763
 * pages (~15 ms) with this index; bench:inbox's scale check, search p95 46-70 ms before, 24-26 ms
 * after.
 *
 * A GIN index over (sdr_id, search_text) (btree_gin gives text its GIN operator class) answers
 * `sdr_id = ? and search_text like ?` with the intersection of the SDR's entry and the
 * trigrams' entries, so only the SDR's candidates reach the table. It replaces the global one;
 * every search carries `sdr_id` (ThreadService.inbox is always scoped to one SDR). The price is
 * reading the SDR's entry: ~1 ms more for a one-match search.
 *
 * Built inside the migration's transaction: writes to prospect_threads wait for the build
 * (~10 s per 500,000 threads here; README, "Upgrading").
 */
export class Migration0010SearchBySdr extends Migration {
  override async up(): Promise<void> {
    // A trusted extension (PostgreSQL 13+): a database owner may create it, like pg_trgm.
    this.addSql(`create extension if not exists btree_gin`);
    this.addSql(`create index prospect_threads_sdr_search_idx on prospect_threads using gin (sdr_id, search_text gin_trgm_ops)`);
    this.addSql(`drop index prospect_threads_search_idx`);
  }
}
