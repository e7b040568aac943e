import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { runCliCaptured } from '../support/cli.ts';
import { createTestDatabase, startTestApp, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { ImapTestServer } from '../support/dovecot.ts';

describe('mailgate CLI: --version, list, sender test, exit codes', () => {
  let db: { url: string; drop(): Promise<void> };
  const secret = randomBytes(32);
  let env: NodeJS.ProcessEnv;
  let app: TestApp;
  const smtp = new SmtpSink();
  const imap = new ImapTestServer();
  let wsId: string;
  let adminKey: string;
  let keyId: string;
  let good: string;
  let bad: string;

  const cli = (...argv: string[]) => runCliCaptured(env, argv);
  function ok(r: { code: number | null; err: string; out: string }) {
    assert.equal(r.code, 0, r.err);
  }

  before(async () => {
    db = await createTestDatabase();
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: secret.toString('hex'), LOG_LEVEL: 'warn' };
    await smtp.start();
    await imap.start();
    app = await startTestApp({ database: { url: db.url, drop: db.drop }, secretKey: secret });
    const ws = await cli('workspace', 'create', '--name', 'acme', '--json');
    ok(ws);
    wsId = ws.json.id;
    const key = await cli('key', 'create', '--workspace', 'acme', '--name', 'ops', '--json');
    ok(key);
    adminKey = key.json.key;
    keyId = key.json.id;
    smtp.users.set('gina@send.example', 'gina-pw');
    imap.addUser('gina@send.example', 'gina-pw');
    const g = await cli('sender', 'add', '--workspace', 'acme', '--email', 'gina@send.example', '--name', 'Gina',
      '--smtp', smtp.url('gina@send.example', 'gina-pw'), '--imap', imap.url('gina@send.example', 'gina-pw'), '--daily-limit', '50', '--json');
    ok(g);
    good = g.json.id;
    const b = await cli('sender', 'add', '--workspace', 'acme', '--email', 'bert@send.example', '--name', 'Bert',
      '--smtp', smtp.url('bert@send.example', 'wrong-pw'), '--json');
    ok(b);
    bad = b.json.id;
    ok(await cli('pool', 'create', '--workspace', 'acme', '--name', 'Main', '--daily-capacity', '120', '--sender', good, '--sender', bad, '--json'));
    const sdr = await cli('sdr', 'add', '--workspace', 'acme', '--name', 'Sam', '--email', 'sam@acme.example', '--json');
    ok(sdr);
    ok(await cli('sdr', 'deactivate', sdr.json.id, '--json'));
    const other = await cli('workspace', 'create', '--name', 'other', '--json');
    ok(await cli('sender', 'add', '--workspace', other.json.id, '--email', 'olga@send.example', '--name', 'Olga', '--smtp', smtp.url(), '--json'));
  });
  after(async () => {
    await app.close();
    await smtp.stop();
    await imap.stop();
  });

  it('--version prints the package version and exits 0', async () => {
    const r = await cli('--version');
    ok(r);
    assert.equal(r.out, `${JSON.parse(readFileSync('package.json', 'utf8')).version}\n`);
  });

  it('sender list and pool list carry the API views of the same objects, scoped by --workspace', async () => {
    const senders = await cli('sender', 'list', '--workspace', 'acme', '--json');
    ok(senders);
    const api = await app.request('GET', '/v1/sender-accounts', { key: adminKey });
    assert.equal(senders.json.data.length, 2);
    for (const [i, s] of api.body.entries()) assert.deepEqual(senders.json.data[i], { ...s, workspaceId: wsId, healthError: null });
    assert.equal(senders.json.data[0].imapHealth, api.body[0].imapHealth);
    assert.doesNotMatch(senders.out, /gina-pw|wrong-pw/);

    const everywhere = await cli('sender', 'list', '--json');
    assert.deepEqual(everywhere.json.data.map((s: { email: string }) => s.email), ['gina@send.example', 'bert@send.example', 'olga@send.example']);

    const pools = await cli('pool', 'list', '--workspace', wsId, '--json');
    ok(pools);
    const apiPools = await app.request('GET', '/v1/sender-pools', { key: adminKey });
    assert.deepEqual(pools.json.data, apiPools.body.map((p: object) => ({ ...p, workspaceId: wsId })));
  });

  it('workspace, key and sdr list; keys show neither the key nor its hash', async () => {
    const ws = await cli('workspace', 'list', '--json');
    ok(ws);
    assert.deepEqual(ws.json.data.map((w: { name: string }) => w.name), ['acme', 'other']);
    assert.deepEqual(Object.keys(ws.json.data[0]).sort(), ['createdAt', 'id', 'name']);

    const keys = await cli('key', 'list', '--workspace', 'acme', '--json');
    ok(keys);
    assert.deepEqual(keys.json.data.map((k: { id: string }) => k.id), [keyId]);
    assert.deepEqual(Object.keys(keys.json.data[0]).sort(), ['createdAt', 'id', 'lastUsedAt', 'name', 'revokedAt', 'role', 'sdrId', 'workspaceId']);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const { rows } = await client.query('select key_hash, key_prefix from api_keys where id = $1', [keyId]);
    await client.end();
    const human = await cli('key', 'list');
    for (const out of [keys.out, human.out]) {
      assert.ok(!out.includes(adminKey) && !out.includes(rows[0].key_hash) && !out.includes(rows[0].key_prefix), out);
    }

    const sdrs = await cli('sdr', 'list', '--workspace', 'acme', '--json');
    ok(sdrs);
    assert.equal(sdrs.json.data.length, 1);
    assert.deepEqual(sdrs.json.data[0], {
      id: sdrs.json.data[0].id, workspaceId: wsId, name: 'Sam', email: 'sam@acme.example', active: false, mailConnected: false, mailEmail: null, mailHealth: null,
    });
  });

  it('without --json a list is a table with a header line; an unknown workspace is an error', async () => {
    const r = await cli('sender', 'list', '--workspace', 'acme');
    ok(r);
    const lines = r.out.trimEnd().split('\n');
    assert.equal(lines.length, 3);
    assert.match(lines[0], /^id\s+workspaceId\s+email\s+name\s+status\s+health\s+imapHealth\s+dailyLimit\s+minIntervalSeconds\s+sentLast24h\s+healthError\s+healthRetryAt$/);
    assert.match(lines[1], new RegExp(`^${good}\\s+${wsId}\\s+gina@send\\.example\\s+Gina\\s+active\\s+unknown\\s+`));
    const none = await cli('sender', 'list', '--workspace', 'nope', '--json');
    assert.equal(none.code, 1);
    assert.equal(none.out, '');
    assert.equal(none.err, 'error: workspace nope not found\n');
  });

  it('sender test logs in to the real SMTP and IMAP servers: ok exits 0', async () => {
    const r = await cli('sender', 'test', good, '--json');
    ok(r);
    assert.deepEqual(r.json, { id: good, email: 'gina@send.example', smtp: { ok: true }, imap: { ok: true }, ok: true });
    const human = await cli('sender', 'test', good);
    assert.equal(human.out, `sender gina@send.example (${good})\nsmtp: ok\nimap: ok\n`);
  });

  it('sender test with a refused login prints the failure and exits 1', async () => {
    const r = await cli('sender', 'test', bad, '--json');
    assert.equal(r.code, 1);
    assert.equal(r.json.ok, false);
    assert.equal(r.json.smtp.ok, false);
    assert.equal(r.json.smtp.kind, 'auth_failed');
    assert.match(r.json.smtp.error, /535|Invalid username or password/);
    assert.equal(r.json.imap, null);
    assert.doesNotMatch(r.out, /wrong-pw/);
    const missing = await cli('sender', 'test', 'snd_nope', '--json');
    assert.equal(missing.code, 1);
    assert.equal(missing.err, 'error: sender account snd_nope not found\n');
  });

  it('usage errors exit 2: unknown command or option, missing argument, bad option value, a group without a command', async () => {
    for (const argv of [['bogus'], ['sender', 'list', '--bogus'], ['sender', 'test'], ['sender', 'add', '--workspace', 'acme', '--json'], ['pool', 'create', '--workspace', 'acme', '--name', 'x', '--daily-capacity', 'ten'], ['sender']]) {
      const r = await cli(...argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: ${r.err}`);
      assert.equal(r.out, '', argv.join(' '));
      assert.notEqual(r.err, '', argv.join(' '));
    }
    ok(await cli('--help'));
    ok(await cli('help'));
  });
});
