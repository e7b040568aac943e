import type { Config } from './config/index.ts';
import { Crypto, loadSecretKey } from './adapters/crypto.ts';
import { systemClock, type Clock } from './adapters/clock.ts';
import type { Logger } from './adapters/logger.ts';
import { realMailProbe, type MailProbe } from './adapters/mailprobe.ts';
import { openDatabase, type Database } from './db/database.ts';
import { createServices } from './services.ts';
import { createDeps, type Deps } from './deps.ts';
import { Metrics } from './adapters/metrics.ts';

export interface Runtime {
  db: Database;
  deps: Deps;
  close(): Promise<void>;
}

/**
 * Everything a process needs before it does work: database (embedded or DATABASE_URL,
 * migrated), secret key verified against the stored credentials, dependencies wired.
 */
export async function openRuntime(
  config: Config,
  log: Logger,
  opts: { clock?: Clock; mailProbe?: MailProbe; poolMax?: number } = {},
): Promise<Runtime> {
  const crypto = new Crypto(loadSecretKey(config.secretKey, config.dataDir));
  const db = await openDatabase(config, log, { poolMax: opts.poolMax });
  const deps: Deps = createDeps({ orm: db.orm, config, clock: opts.clock ?? systemClock, crypto, log, mailProbe: opts.mailProbe ?? realMailProbe, metrics: new Metrics(db.orm) });
  try {
    await createServices(deps, db.orm.em.fork()).workspaces.checkSecretKey();
  } catch (err) {
    await db.close();
    throw err;
  }
  return { db, deps, close: () => db.close() };
}
