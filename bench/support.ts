// Shared set-up for benchmarks: an embedded PostgreSQL in a temp dir (or BENCH_DATABASE_URL,
// an admin URL), a migrated database, and the real app listening on an ephemeral port.
import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { EmbeddedDatabase } from '../src/db/embedded.ts';
import { openOrm, migrate } from '../src/db/orm.ts';
import { loadConfig } from '../src/config/index.ts';
import { createLogger } from '../src/adapters/logger.ts';
import { Crypto } from '../src/adapters/crypto.ts';
import { systemClock } from '../src/adapters/clock.ts';
import { realMailProbe } from '../src/adapters/mailprobe.ts';
import { Metrics } from '../src/adapters/metrics.ts';
import { buildApp } from '../src/app.ts';
import { createServices } from '../src/services.ts';
import { createDeps, type Deps } from '../src/deps.ts';

export async function benchEnvironment() {
  let embedded: EmbeddedDatabase | undefined;
  let adminUrl = process.env.BENCH_DATABASE_URL;
  if (!adminUrl) {
    embedded = new EmbeddedDatabase({ dataDir: mkdtempSync(path.join(os.tmpdir(), 'mailgate-bench-')), ephemeral: true });
    await embedded.start();
    adminUrl = embedded.adminUrl('postgres');
  }
  const name = `mailgate_bench_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const orm = await openOrm(url, 10);
  await migrate(orm, url);
  const config = loadConfig({}, { databaseUrl: url, port: 0, logLevel: 'warn' });
  const secretKey = randomBytes(32);
  const deps: Deps = createDeps({ orm, config, clock: systemClock, crypto: new Crypto(secretKey), log: createLogger('warn', process.stderr), mailProbe: realMailProbe, metrics: new Metrics(orm) });
  const server = http.createServer(buildApp(deps).callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const services = () => createServices(deps, orm.em.fork());
  const ws = await services().workspaces.create('bench');
  const key = (await services().workspaces.createKey({ workspace: ws.id })).key;
  return {
    url,
    secretKey,
    base,
    key,
    workspaceId: ws.id,
    pool,
    deps,
    services,
    async api(method: string, p: string, body?: unknown) {
      const res = await fetch(base + p, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const json = await res.json();
      if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await pool.end();
      await orm.close(true);
      await embedded?.stop();
    },
  };
}

export function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

export const ms = (n: number) => `${n.toFixed(1)} ms`;
