// Once per test run: a PostgreSQL (embedded in a temp dir, or TEST_DATABASE_URL) and a
// migrated template database every test file clones (CREATE DATABASE ... TEMPLATE), so files
// are isolated from each other and start from the real schema.
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { EmbeddedDatabase } from '../../src/db/embedded.ts';
import { openOrm, migrate } from '../../src/db/orm.ts';

let embedded: EmbeddedDatabase | undefined;

// Processes the tests spawn (`node bin/mailgate.js ...`) run the TypeScript sources through tsx,
// so they always run the code under test, never a dist/ built before the last edit. The one test
// of the built output (test/cli/dist.test.ts) builds its own.
process.env.MAILGATE_FROM_SOURCE = '1';

export async function mochaGlobalSetup() {
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-test-'));
    embedded = new EmbeddedDatabase({ dataDir: dir, ephemeral: true });
    await embedded.start();
    adminUrl = embedded.adminUrl('postgres');
  }
  const template = `mailgate_tpl_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${template}`);
  await admin.query(`create database ${template}`);
  await admin.end();
  const tplUrl = withDatabase(adminUrl, template);
  const orm = await openOrm(tplUrl, 2);
  await migrate(orm, tplUrl);
  await orm.close(true);
  process.env.MAILGATE_TEST_ADMIN_URL = adminUrl;
  process.env.MAILGATE_TEST_TEMPLATE = template;
}

export async function mochaGlobalTeardown() {
  const { coverage } = await import('./openapi-check.ts');
  const c = coverage();
  if (c.validated > 0)
    console.log(
      `openapi: ${c.validated} responses validated against the document; ${c.covered} of ${c.operations} operations covered` +
        (c.uncovered.length ? ` (not reached: ${c.uncovered.join(', ')})` : '') +
        `; ${c.outside} responses to requests outside it (unknown paths, wrong methods)`,
    );
  const adminUrl = process.env.MAILGATE_TEST_ADMIN_URL;
  if (adminUrl && !embedded) {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    const { rows } = await admin.query(`select datname from pg_database where datname like $1 or datname = $2`, [
      `mgt_${process.pid}_%`,
      process.env.MAILGATE_TEST_TEMPLATE,
    ]);
    for (const r of rows) await admin.query(`drop database if exists "${r.datname}" with (force)`);
    await admin.end();
  }
  await embedded?.stop();
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
