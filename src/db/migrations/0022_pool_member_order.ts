import { Migration } from '@mikro-orm/migrations';

/**
 * `pool_members.seq`: the order members were added, which `senderAccountIds` (and an account's
 * `pools`) list. `added_at` alone could not say it: the members a pool is created with share
 * their `added_at`, and were listed by id instead of in the order given. Existing rows are
 * numbered in the order the table holds them (for rows never updated, the order they were
 * written), ties in `added_at` aside: the listing still sorts by `added_at` first.
 */
export class Migration0022PoolMemberOrder extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table pool_members add column seq bigint generated always as identity`);
  }
}
