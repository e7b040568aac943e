import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config/index.ts';
import { Crypto } from '../../src/adapters/crypto.ts';
import { ManualClock, systemClock, type Clock } from '../../src/adapters/clock.ts';
import { createLogger, type Logger } from '../../src/adapters/logger.ts';
import type { MailProbe } from '../../src/adapters/mailprobe.ts';
import { realMailProbe } from '../../src/adapters/mailprobe.ts';
import { openOrm, type MikroORM } from '../../src/db/orm.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { buildApp } from '../../src/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { createDeps, type Deps } from '../../src/deps.ts';
import { withDatabase } from './global.ts';
import { checkResponse } from './openapi-check.ts';
import { Metrics } from '../../src/adapters/metrics.ts';
import { EVENT_TYPES, type EventType } from '../../src/modules/events/catalogue.ts';

let counter = 0;

/**
 * A fresh database cloned from the migrated template, or (`empty`) with no schema at all, for a
 * test that migrates it itself (a migration's data test).
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<{ url: string; drop(): Promise<void> }> {
  const adminUrl = process.env.MAILGATE_TEST_ADMIN_URL!;
  const name = `mgt_${process.pid}_${++counter}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(opts.empty ? `create database ${name}` : `create database ${name} template ${process.env.MAILGATE_TEST_TEMPLATE}`);
  await admin.end();
  return {
    url: withDatabase(adminUrl, name),
    async drop() {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}

/**
 * For a migration's data test: registers mocha hooks that make an empty database (no schema)
 * before the suite's tests, with an ORM to migrate it and a pg client to fill and read it, and
 * drop it after. Read `orm`/`db` inside the tests (they are set by the before hook).
 */
export function emptyDatabaseForMigration(): { orm: MikroORM; db: pg.Client } {
  const held = {} as { orm: MikroORM; db: pg.Client };
  let scratch: Awaited<ReturnType<typeof createTestDatabase>>;
  before(async () => {
    scratch = await createTestDatabase({ empty: true });
    held.orm = await openOrm(scratch.url, 2);
    held.db = new pg.Client({ connectionString: scratch.url });
    await held.db.connect();
  });
  after(async () => {
    await held.db.end();
    await held.orm.close(true);
    await scratch.drop();
  });
  return held;
}

/** Collects log lines (tests assert secrets never reach them). */
export class LogSink extends Writable {
  lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void) {
    this.lines.push(chunk.toString());
    cb();
  }
  get text() {
    return this.lines.join('');
  }
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export interface TestApp {
  url: string;
  databaseUrl: string;
  config: Config;
  deps: Deps;
  clock: Clock;
  logs: LogSink;
  services(): Services;
  request<T = any>(method: string, path: string, opts?: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> }): Promise<ApiResponse<T>>;
  close(): Promise<void>;
}

/**
 * The real app on a fresh database, listening on an ephemeral port and driven over HTTP.
 */
export async function startTestApp(
  opts: { clock?: Clock; mailProbe?: MailProbe; config?: Partial<Record<keyof Config, unknown>>; api?: boolean; database?: { url: string; drop(): Promise<void> }; secretKey?: Buffer } = {},
): Promise<TestApp> {
  const db = opts.database ?? (await createTestDatabase());
  const config = loadConfig({}, { databaseUrl: db.url, port: 0, logLevel: process.env.TEST_LOG_LEVEL ?? 'info', dataDir: '.tmp/test-data', ...opts.config });
  const logs = new LogSink();
  const log: Logger = createLogger(config.logLevel, logs);
  const orm = await openOrm(db.url, 5);
  const clock = opts.clock ?? systemClock;
  const deps: Deps = createDeps({ orm, config, clock, crypto: new Crypto(opts.secretKey ?? randomBytes(32)), log, mailProbe: opts.mailProbe ?? realMailProbe, metrics: new Metrics(orm) });
  const app = buildApp(deps, { api: opts.api });
  const server = createHttpServer(app.callback(), { keepAliveTimeoutMs: config.httpKeepAliveTimeout });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    databaseUrl: db.url,
    config,
    deps,
    clock,
    logs,
    services: () => createServices(deps, orm.em.fork()),
    async request(method, path, o = {}) {
      const headers: Record<string, string> = { ...(o.headers ?? {}) };
      if (o.key) headers.authorization = `Bearer ${o.key}`;
      let body: string | undefined = o.raw;
      if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers['content-type'] ??= 'application/json';
      }
      const res = await fetch(url + path, { method, headers, body });
      const text = await res.text();
      // The worker's app serves no API: its answers are not the document's.
      if (opts.api !== false) checkResponse(method, path, res.status, res.headers, text);
      let parsed: unknown = undefined;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: res.status, body: parsed as any, headers: res.headers, text };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await orm.close(true);
      await db.drop();
    },
  };
}

/** Factories: a workspace with an admin key, SDRs with keys, senders and pools. */
export async function seedWorkspace(app: TestApp, name = `ws-${randomBytes(3).toString('hex')}`) {
  const s = app.services();
  const ws = await s.workspaces.create(name);
  const admin = await s.workspaces.createKey({ workspace: ws.id, role: 'admin' });
  return { workspace: ws, adminKey: admin.key, adminKeyId: admin.id };
}

/**
 * A webhook of the workspace subscribing to `events` (default: every event type), at a public
 * address no test delivers to: events reach the outbox only when a webhook subscribes to them
 * (events/outbox.ts), so tests that read the outbox subscribe first.
 */
export async function subscribeEvents(app: TestApp, workspaceId: string, events: EventType[] = [...EVENT_TYPES]) {
  return app.services().webhooks.create(workspaceId, { url: 'https://93.184.215.14/hooks/mailgate', events });
}

export async function seedSdr(app: TestApp, workspaceId: string, name = 'Sam Rep', email = `sam.${randomBytes(3).toString('hex')}@example.com`) {
  const s = app.services();
  const sdr = await s.sdrs.add(workspaceId, name, email);
  const key = await s.workspaces.createKey({ workspace: workspaceId, role: 'sdr', sdrId: sdr.id });
  return { sdr, sdrKey: key.key, sdrKeyId: key.id };
}

export { ManualClock };
