import { Migration } from '@mikro-orm/migrations';

/**
 * The inbox search, scoped to the SDR inside the index.
 *
 * The trigram index of 0003 covered every thread of the installation: a search for one SDR
 * found every other SDR's matching threads too and rechecked each of them in the table before
 * the `sdr_id` condition dropped it, so a broad search cost in proportion to the whole
 * installation's threads, not the SDR's (bench/inbox.ts, scale check: `acme` for an SDR with
 * 100,000 threads beside 420,000 other threads rechecked 25,665 candidates on 14,082 pages,
 * ~33-100 ms, against 4,980 on 2,763 pages in ~15 ms with this index).
 *
 * A GIN index over (sdr_id, search_text) (btree_gin gives text its GIN operator class) answers
 * `sdr_id = ? and search_text like ?` with the intersection of the SDR's entry and the
 * trigrams' entries, so only the SDR's candidates reach the table. It replaces the global one;
 * every search carries `sdr_id` (ThreadService.inbox is always scoped to one SDR).
 */
export class Migration0010SearchBySdr extends Migration {
  override async up(): Promise<void> {
    // A trusted extension (PostgreSQL 13+): a database owner may create it, like pg_trgm.
    this.addSql(`create extension if not exists btree_gin`);
    this.addSql(`create index prospect_threads_sdr_search_idx on prospect_threads using gin (sdr_id, search_text gin_trgm_ops)`);
    this.addSql(`drop index prospect_threads_search_idx`);
  }
}
