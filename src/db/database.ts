import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../config/index.ts';
import type { Logger } from '../adapters/logger.ts';
import { EmbeddedDatabase } from './embedded.ts';
import { openOrm, migrate } from './orm.ts';

export interface Database {
  orm: MikroORM;
  url: string;
  /** Set when this process started the embedded cluster (and so must stop it). */
  embedded?: EmbeddedDatabase;
  close(): Promise<void>;
}

/**
 * Connects to DATABASE_URL, or to the embedded cluster under dataDir (starting it when no
 * other mailgate process already runs it), then applies pending migrations.
 */
export async function openDatabase(config: Config, log: Logger, opts: { migrate?: boolean; poolMax?: number } = {}): Promise<Database> {
  let url = config.databaseUrl;
  let embedded: EmbeddedDatabase | undefined;
  if (!url) {
    url = EmbeddedDatabase.runningUrl(config.dataDir);
    if (url) {
      log.info({ dataDir: config.dataDir }, 'using the embedded PostgreSQL already running in the data dir');
    } else {
      embedded = new EmbeddedDatabase({ dataDir: config.dataDir, onLog: (line) => log.debug({ pg: line }) });
      log.info({ dataDir: config.dataDir }, 'starting embedded PostgreSQL');
      await embedded.start();
      url = embedded.url;
    }
  }
  let orm: MikroORM;
  try {
    orm = await openOrm(url, opts.poolMax);
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  if (opts.migrate !== false) {
    try {
      const applied = await migrate(orm, url);
      if (applied.length) log.info({ applied }, 'applied migrations');
    } catch (err) {
      await orm.close(true);
      await embedded?.stop();
      throw err;
    }
  }
  return {
    orm,
    url,
    embedded,
    async close() {
      await orm.close(true);
      await embedded?.stop();
    },
  };
}
