import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../config/index.ts';
import type { Logger } from '../adapters/logger.ts';
import pg from 'pg';
import { EmbeddedDatabase } from './embedded.ts';
import { openOrm, migrate } from './orm.ts';
import { StartupError } from '../shared/errors.ts';

/** How long a start waits for the database to answer before it gives up with a clear line. */
const CONNECT_TIMEOUT_MS = 10_000;

/** The URL without its password, for messages. */
function shown(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/**
 * The migrator's message quotes the whole failing statement before the server's reason
 * ("Migration 0001_initial (up) failed: Original error: create table ... - relation ... already
 * exists"): keep which migration and why, on one line.
 */
function migrationFailure(err: unknown): string {
  const e = err as Error & { cause?: Error };
  const message = e?.message || String(err);
  const which = message.split('Original error:')[0].split('\n')[0].trim();
  const detail = e.cause?.message ?? message;
  const why = detail.includes(' - ') ? detail.slice(detail.lastIndexOf(' - ') + 3) : '';
  return `${which}${why && !which.includes(why) ? ` ${why}` : ''}`.replace(/\s+/g, ' ');
}

/**
 * One connection, with a time limit: an address that refuses, a host that does not exist, a
 * port that accepts and never answers or a refused login each end with one line naming
 * DATABASE_URL, instead of a driver message or a wait without end. The start checks with it
 * before anything else; the CLI's read-only commands query through it (cli/program.ts).
 */
export async function connectChecked(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  client.on('error', () => {});
  try {
    await client.connect();
    return client;
  } catch (err) {
    await client.end().catch(() => {});
    const e = err as NodeJS.ErrnoException;
    const why =
      e.code === 'ECONNREFUSED' ? 'connection refused'
      : e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN' ? 'host not found'
      : /timeout/i.test(e.message) ? `no answer within ${CONNECT_TIMEOUT_MS / 1000} s`
      : e.message.split('\n')[0];
    throw new StartupError(`cannot connect to DATABASE_URL ${shown(url)}: ${why}: correct DATABASE_URL, or unset it to use the embedded PostgreSQL`);
  }
}

async function checkReachable(url: string): Promise<void> {
  const client = await connectChecked(url);
  await client.end().catch(() => {});
}

/**
 * Every mailgate process using the embedded cluster holds one session under this name for as
 * long as it does: its pools close idle connections (an idle API process may hold none), so
 * only a session of its own says it is there.
 */
const PRESENCE = 'mailgate embedded user';

async function presence(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: PRESENCE, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Whether other mailgate processes use the cluster (false if it cannot be reached). */
async function othersConnected(url: string): Promise<boolean> {
  let client: pg.Client;
  try {
    client = await connectChecked(url);
  } catch {
    return false;
  }
  try {
    const { rows } = await client.query(`select count(*)::int as n from pg_stat_activity where application_name = $1`, [PRESENCE]);
    return rows[0].n > 0;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

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
  let attached = false;
  if (!url) {
    url = EmbeddedDatabase.runningUrl(config.dataDir);
    attached = !!url;
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
  let present: pg.Client | undefined;
  try {
    if (config.databaseUrl) await checkReachable(url);
    if (embedded || attached) present = await presence(url);
    orm = await openOrm(url, opts.poolMax);
  } catch (err) {
    await present?.end().catch(() => {});
    await embedded?.stop();
    throw err;
  }
  if (opts.migrate !== false) {
    try {
      const applied = await migrate(orm, url);
      if (applied.length) log.info({ applied }, 'applied migrations');
    } catch (err) {
      await orm.close(true);
      await present?.end().catch(() => {});
      await embedded?.stop();
      throw new StartupError(`applying the database migrations failed: ${migrationFailure(err)}`, { cause: err });
    }
  }
  return {
    orm,
    url,
    embedded,
    async close() {
      await orm.close(true);
      if (!embedded && !attached) return;
      await present?.end().catch(() => {});
      // The embedded cluster is stopped by the last mailgate process to leave it, whichever
      // started it: a CLI command that started it while a daemon attached meanwhile stopped it
      // under the daemon (and a daemon that attached to a CLI's cluster never stopped it).
      if (await othersConnected(url!)) {
        log.info({ dataDir: config.dataDir }, 'leaving the embedded PostgreSQL running: other processes use it');
        embedded?.release();
      } else if (embedded) {
        await embedded.stop();
      } else {
        await EmbeddedDatabase.stopRunning(config.dataDir);
      }
    },
  };
}
