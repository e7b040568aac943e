import { Migration } from '@mikro-orm/migrations';

/**
 * The suppression list's substring search (the dashboard's, suppression/repository.ts
 * listSuppressions) gets its trigram index on an expression only that search uses,
 * `lower(email_key)` (the key is lower-cased already: the same text). On the column itself
 * (0016), the index also answered the list's equality lookups, since pg_trgm's operator class
 * has `=`: planned from the statistics of a list imported a moment ago, a lookup of one address
 * went through it and rechecked most of the list, and a join of a campaign's enrollments to the
 * list did so once per enrollment (16 s for 5,000 against 5,000; docs/decisions.md, "A large
 * start's first steps"). Every lookup by address now has only the primary key to use.
 */
export class Migration0034SuppressionSearchIndex extends Migration {
  override async up(): Promise<void> {
    this.addSql(`drop index suppressions_email_trgm_idx`);
    this.addSql(`create index suppressions_email_search_idx on suppressions using gin (lower(email_key) gin_trgm_ops)`);
  }
}
