import { MikroORM, type Options } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import pg from 'pg';
import { WorkspaceSchema, ApiKeySchema, InstanceSettingSchema } from '../modules/workspaces/entities.ts';
import { SenderAccountSchema, SenderPoolSchema, PoolMemberSchema } from '../modules/senders/entities.ts';
import { SdrSchema, SdrMailboxSchema } from '../modules/sdrs/entities.ts';
import { CampaignSchema, CampaignStepSchema } from '../modules/campaigns/entities.ts';
import { migrations } from './migrations/index.ts';

export type { MikroORM };
export type { EntityManager } from '@mikro-orm/postgresql';

export const entities = [
  WorkspaceSchema,
  ApiKeySchema,
  InstanceSettingSchema,
  SenderAccountSchema,
  SenderPoolSchema,
  PoolMemberSchema,
  SdrSchema,
  SdrMailboxSchema,
  CampaignSchema,
  CampaignStepSchema,
];

export function ormOptions(clientUrl: string, poolMax = 10): Options {
  return {
    clientUrl,
    entities,
    extensions: [Migrator],
    migrations: {
      tableName: 'mikro_orm_migrations',
      migrationsList: migrations,
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      silent: true,
    },
    discovery: { warnWhenNoEntities: false },
    allowGlobalContext: false,
    pool: {
      // Two connections stay open through a quiet spell (the pool closes the others once idle
      // for 30 s). A new one made the first request after a lull pay for the connection, the
      // SET below, a backend's cold caches and the statements prepared again: the inbox's first
      // page took 45-79 ms after a 35 s spell on session 52's machine, 18-25 ms with two kept
      // (docs/benchmarks.md, "Session 52"), and a desk whose requests come more than 30 s apart
      // met it on every one.
      min: Math.min(2, poolMax),
      max: poolMax,
      // Every session of the pool runs in UTC, whatever the server's TimeZone: timestamps come
      // back as "2026-04-01 08:00:00.123+00" (the text toIso rewrites without parsing). No
      // statement of ours depends on the session's time zone (no ::date, date_trunc or AT TIME
      // ZONE), so a pooler that drops the setting costs speed, not correctness. A SET once per
      // new connection rather than a startup option: PgBouncer refuses unknown startup options.
      afterCreate: (conn: { query(text: string, cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) =>
        conn.query(`set time zone 'UTC'`, (err) => done(err, conn)),
    },
    // A connection kept open must not go stale unseen: TCP keepalives once it has been idle a
    // minute keep a NAT's or a firewall's entry for it alive, where a connection whose entry was
    // dropped silently would hang its next statement for as long as the kernel retransmits (and
    // the kernel's probes find a peer that is gone).
    driverOptions: { connection: { keepAlive: true, keepAliveInitialDelayMillis: 60_000 } },
    debug: false,
    // Dates the ORM writes are formatted in UTC.
    forceUtcTimezone: true,
  };
}

export async function openOrm(clientUrl: string, poolMax?: number): Promise<MikroORM> {
  return MikroORM.init(ormOptions(clientUrl, poolMax));
}

// One advisory lock so concurrent `migrate` runs (daemon start, CLI) apply migrations once.
const MIGRATION_LOCK = 7_202_611;

/** Applies pending migrations; safe to run while other processes use the database. */
export async function migrate(orm: MikroORM, clientUrl: string): Promise<string[]> {
  const lock = new pg.Client({ connectionString: clientUrl });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await refuseNewerSchema(orm);
    const applied = await orm.getMigrator().up();
    return applied.map((m) => m.name);
  } finally {
    await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    await lock.end();
  }
}

/**
 * A database migrated by a newer mailgate (an applied migration this version does not have: a
 * downgrade, or an old process restarted during an upgrade) is refused before anything runs:
 * this version's statements would write rows the newer schema does not expect, and nothing
 * else stopped it (a process of migration 0018 started and answered ready on a database at
 * 0028; 2026-11-29).
 */
async function refuseNewerSchema(orm: MikroORM): Promise<void> {
  const known = new Set(migrations.map((m) => m.name));
  const unknown = (await orm.getMigrator().getExecutedMigrations()).map((m) => m.name).filter((name) => !known.has(name));
  if (unknown.length)
    throw new Error(
      `the database was migrated by a newer mailgate (${unknown.join(', ')}, unknown to this version, whose last migration is ${migrations.at(-1)!.name}): run that version or a later one`,
    );
}

/** Names of migrations not yet applied (readiness check). */
export async function pendingMigrations(orm: MikroORM): Promise<string[]> {
  return (await orm.getMigrator().getPendingMigrations()).map((m) => m.name);
}
