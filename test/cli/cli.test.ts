import assert from 'node:assert/strict';
import pg from 'pg';
import { runCliCaptured } from '../support/cli.ts';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { PassThrough } from 'node:stream';
import { runCli } from '../../src/cli/program.ts';
import { createTestDatabase, startTestApp, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { ImapTestServer } from '../support/dovecot.ts';

const run = promisify(execFile);

describe('mailgate CLI', () => {
  let db: { url: string; drop(): Promise<void> };
  const secret = randomBytes(32);
  let env: NodeJS.ProcessEnv;
  let app: TestApp;
  const smtp = new SmtpSink();
  const imap = new ImapTestServer();

  before(async () => {
    db = await createTestDatabase();
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: secret.toString('hex'), LOG_LEVEL: 'warn' };
    await smtp.start();
    await imap.start();
    // The same database and key, seen through the HTTP API.
    app = await startTestApp({ database: { url: db.url, drop: db.drop }, secretKey: secret });
  });
  after(async () => {
    await app.close();
    await smtp.stop();
    await imap.stop();
  });

  const cli = (...argv: string[]) => runCliCaptured(env, argv);


  function ok(r: { code: number | null; err: string }) {
    assert.equal(r.code, 0, r.err);
  }

  let wsId: string;
  let adminKey: string;

  it('workspace create and key create print one JSON object; the key works over HTTP', async () => {
    const ws = await cli('workspace', 'create', '--name', 'acme', '--json');
    ok(ws);
    assert.deepEqual(Object.keys(ws.json).sort(), ['id', 'name']);
    assert.match(ws.json.id, /^ws_/);
    wsId = ws.json.id;
    const key = await cli('key', 'create', '--workspace', 'acme', '--json');
    ok(key);
    assert.deepEqual(Object.keys(key.json).sort(), ['id', 'key', 'role', 'sdrId', 'workspaceId']);
    assert.equal(key.json.role, 'admin');
    assert.equal(key.json.workspaceId, wsId);
    assert.equal(key.json.sdrId, null);
    adminKey = key.json.key;
    assert.equal((await app.request('GET', '/v1/sender-accounts', { key: adminKey })).status, 200);
  });

  it('errors are one line on stderr with a non-zero exit and nothing on stdout', async () => {
    const dup = await cli('workspace', 'create', '--name', 'acme', '--json');
    assert.notEqual(dup.code, 0);
    assert.equal(dup.out, '');
    assert.match(dup.err, /^error: .*acme.*already exists\n$/);
    const noSdr = await cli('key', 'create', '--workspace', wsId, '--role', 'sdr', '--json');
    assert.notEqual(noSdr.code, 0);
    assert.match(noSdr.err, /--sdr/);
    const badRole = await cli('key', 'create', '--workspace', wsId, '--role', 'root', '--json');
    assert.notEqual(badRole.code, 0);
    const unknownWs = await cli('key', 'create', '--workspace', 'nope', '--json');
    assert.notEqual(unknownWs.code, 0);
    assert.match(unknownWs.err, /workspace nope not found/);
    const missing = await cli('sender', 'add', '--workspace', wsId, '--json');
    assert.notEqual(missing.code, 0);
    assert.match(missing.err, /required option/);
    const badLimit = await cli('sender', 'add', '--workspace', wsId, '--email', 'a@b.example', '--name', 'A', '--smtp', smtp.url(), '--daily-limit', 'ten', '--json');
    assert.notEqual(badLimit.code, 0);
    assert.match(badLimit.err, /--daily-limit/);
    const badInterval = await cli('sender', 'add', '--workspace', wsId, '--email', 'a@b.example', '--name', 'A', '--smtp', smtp.url(), '--min-interval', '5 minutes', '--json');
    assert.notEqual(badInterval.code, 0);
    assert.match(badInterval.err, /--min-interval/);
  });

  it('sender add, pause, resume; pool create and add-sender', async () => {
    const a = await cli('sender', 'add', '--workspace', wsId, '--email', 'alice@send.example', '--name', 'Alice', '--smtp', smtp.url('alice', 'pw-alice'), '--imap', imap.url('alice', 'pw-alice'), '--daily-limit', '40', '--min-interval', '30s', '--json');
    ok(a);
    assert.deepEqual(Object.keys(a.json).sort(), ['email', 'id', 'name', 'status']);
    assert.equal(a.json.status, 'active');
    assert.doesNotMatch(a.out, /pw-alice/);
    const paused = await cli('sender', 'pause', a.json.id, '--json');
    ok(paused);
    assert.deepEqual(paused.json, { id: a.json.id, status: 'paused' });
    const resumed = await cli('sender', 'resume', a.json.id, '--json');
    assert.deepEqual(resumed.json, { id: a.json.id, status: 'active' });

    const b = await cli('sender', 'add', '--workspace', wsId, '--email', 'bob@send.example', '--name', 'Bob', '--smtp', smtp.url(), '--json');
    ok(b);
    const pool = await cli('pool', 'create', '--workspace', wsId, '--name', 'Main', '--daily-capacity', '100', '--sender', a.json.id, '--json');
    ok(pool);
    assert.deepEqual(Object.keys(pool.json).sort(), ['dailyCapacity', 'id', 'name']);
    assert.equal(pool.json.dailyCapacity, 100);
    const added = await cli('pool', 'add-sender', pool.json.id, b.json.id, '--json');
    ok(added);
    assert.deepEqual(added.json, { id: pool.json.id, senderAccountIds: [a.json.id, b.json.id] });

    const c = await cli('sender', 'add', '--workspace', wsId, '--email', 'cy@send.example', '--name', 'Cy', '--smtp', smtp.url(), '--pool', pool.json.id, '--json');
    ok(c);
    const pools = await app.request('GET', '/v1/sender-pools', { key: adminKey });
    assert.deepEqual(pools.body[0].senderAccountIds, [a.json.id, b.json.id, c.json.id]);
    assert.equal(pools.body[0].remainingVolume, 100);
    const senders = await app.request('GET', '/v1/sender-accounts', { key: adminKey });
    assert.deepEqual(
      senders.body.map((s: { email: string }) => s.email),
      ['alice@send.example', 'bob@send.example', 'cy@send.example'],
    );
    assert.equal(senders.body[0].dailyLimit, 40);

    const other = await cli('workspace', 'create', '--name', 'other', '--json');
    const foreign = await cli('sender', 'add', '--workspace', other.json.id, '--email', 'f@send.example', '--name', 'F', '--smtp', smtp.url(), '--json');
    const cross = await cli('pool', 'add-sender', pool.json.id, foreign.json.id, '--json');
    assert.notEqual(cross.code, 0);
    assert.match(cross.err, /not found/);
  });

  it('sender update, pool set-capacity and pool remove-sender: --json prints what the API shows; new SMTP settings are tested first', async () => {
    const accountView = async (id: string) => (await app.request('GET', '/v1/sender-accounts', { key: adminKey })).body.find((s: { id: string }) => s.id === id);
    const poolView = async (id: string) => (await app.request('GET', '/v1/sender-pools', { key: adminKey })).body.find((p: { id: string }) => p.id === id);
    const storedSmtp = async (id: string) => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        return app.deps.crypto.decrypt((await c.query('select smtp_url_enc from sender_accounts where id = $1', [id])).rows[0].smtp_url_enc);
      } finally {
        await c.end();
      }
    };
    const d = await cli('sender', 'add', '--workspace', wsId, '--email', 'dora@send.example', '--name', 'Dora', '--smtp', smtp.url('dora', 'old-pw'), '--json');
    ok(d);
    const e = await cli('sender', 'add', '--workspace', wsId, '--email', 'eve@send.example', '--name', 'Eve', '--smtp', smtp.url(), '--json');
    ok(e);

    const limits = await cli('sender', 'update', d.json.id, '--daily-limit', '25', '--min-interval', '90s', '--json');
    ok(limits);
    assert.deepEqual(limits.json, await accountView(d.json.id));
    assert.deepEqual([limits.json.dailyLimit, limits.json.minIntervalSeconds], [25, 90]);
    const unlimited = await cli('sender', 'update', d.json.id, '--daily-limit', 'none', '--json');
    ok(unlimited);
    assert.deepEqual([unlimited.json.dailyLimit, unlimited.json.minIntervalSeconds], [null, 90]);
    const human = await cli('sender', 'update', d.json.id, '--min-interval', '0s');
    ok(human);
    assert.equal(human.out, `sender dora@send.example (${d.json.id}): no daily limit, no minimum interval, health unknown\n`);

    // New SMTP settings (a password rotated at the provider) are tested against the server first.
    smtp.users.set('dora', 'new-pw');
    const refused = await cli('sender', 'update', d.json.id, '--smtp', smtp.url('dora', 'wrong-pw'), '--daily-limit', '5', '--json');
    assert.equal(refused.code, 1);
    assert.equal(refused.out, '');
    assert.match(refused.err, /^error: the SMTP server refused the connection \(auth failed\): .*nothing was saved\n$/);
    assert.doesNotMatch(refused.err, /wrong-pw/);
    assert.equal((await accountView(d.json.id)).dailyLimit, null, 'a refused test changes nothing');
    assert.equal(await storedSmtp(d.json.id), smtp.url('dora', 'old-pw'));
    for (const [argv, code, words] of [
      [['--smtp', 'imap://dora:x@127.0.0.1:1'], 2, /^error: smtp: must start with smtp:\/\/ or smtps:\/\//],
      [[], 2, /give --daily-limit, --min-interval or --smtp/],
      [['--daily-limit', '0'], 2, /--daily-limit must be a whole number from 1/],
      [['--min-interval', '2d'], 2, /--min-interval: must be at most 24h/],
    ] as const) {
      const r = await cli('sender', 'update', d.json.id, ...argv, '--json');
      assert.equal(r.code, code, `${argv.join(' ')}: ${r.err}`);
      assert.match(r.err, words);
      assert.equal(r.out, '');
    }
    const missing = await cli('sender', 'update', 'snd_nope', '--daily-limit', '5', '--json');
    assert.deepEqual([missing.code, missing.err], [1, 'error: sender account snd_nope not found\n']);
    const rotated = await cli('sender', 'update', d.json.id, '--smtp', smtp.url('dora', 'new-pw'), '--json');
    ok(rotated);
    assert.deepEqual(rotated.json, await accountView(d.json.id));
    assert.doesNotMatch(rotated.out, /new-pw/);
    assert.equal(await storedSmtp(d.json.id), smtp.url('dora', 'new-pw'));

    const pool = await cli('pool', 'create', '--workspace', wsId, '--name', 'Rotation', '--daily-capacity', '10', '--sender', d.json.id, '--sender', e.json.id, '--json');
    ok(pool);
    const capacity = await cli('pool', 'set-capacity', pool.json.id, '3', '--json');
    ok(capacity);
    assert.deepEqual(capacity.json, await poolView(pool.json.id));
    assert.deepEqual([capacity.json.dailyCapacity, capacity.json.remainingVolume, capacity.json.senderAccountIds], [3, 3, [d.json.id, e.json.id]]);
    const badCapacity = await cli('pool', 'set-capacity', pool.json.id, 'ten', '--json');
    assert.equal(badCapacity.code, 2);
    assert.match(badCapacity.err, /the capacity must be a whole number from 0 to 10,000,000/);
    const noPool = await cli('pool', 'set-capacity', 'pool_nope', '3', '--json');
    assert.deepEqual([noPool.code, noPool.err], [1, 'error: sender pool pool_nope not found\n']);
    assert.equal((await poolView(pool.json.id)).dailyCapacity, 3);

    const removed = await cli('pool', 'remove-sender', pool.json.id, d.json.id, '--json');
    ok(removed);
    assert.deepEqual(removed.json, { id: pool.json.id, senderAccountIds: [e.json.id] });
    assert.deepEqual((await poolView(pool.json.id)).senderAccountIds, [e.json.id]);
    const again = await cli('pool', 'remove-sender', pool.json.id, d.json.id, '--json');
    assert.deepEqual([again.code, again.json], [0, { id: pool.json.id, senderAccountIds: [e.json.id] }], 'not a member: a no-op');
    const other = await cli('workspace', 'create', '--name', 'elsewhere', '--json');
    const foreign = await cli('sender', 'add', '--workspace', other.json.id, '--email', 'g@send.example', '--name', 'G', '--smtp', smtp.url(), '--json');
    const cross = await cli('pool', 'remove-sender', pool.json.id, foreign.json.id, '--json');
    assert.equal(cross.code, 1);
    assert.match(cross.err, /not found/);
    assert.deepEqual((await poolView(pool.json.id)).senderAccountIds, [e.json.id]);
  });

  it('sdr add and connect-mail check the credentials against real SMTP and IMAP servers', async () => {
    const sdr = await cli('sdr', 'add', '--workspace', wsId, '--name', 'Sam Rep', '--email', 'sam@acme.example', '--json');
    ok(sdr);
    assert.deepEqual(Object.keys(sdr.json).sort(), ['email', 'id', 'name']);
    const sdrKey = await cli('key', 'create', '--workspace', wsId, '--role', 'sdr', '--sdr', sdr.json.id, '--json');
    ok(sdrKey);
    assert.equal(sdrKey.json.sdrId, sdr.json.id);

    let list = await app.request('GET', '/v1/sdrs', { key: sdrKey.json.key });
    assert.deepEqual(list.body.data, [{ id: sdr.json.id, name: 'Sam Rep', email: 'sam@acme.example', mailConnected: false, mailEmail: null }]);

    smtp.users.set('sam@acme.example', 'sam-pw');
    imap.addUser('sam@acme.example', 'sam-pw');
    const bad = await cli('sdr', 'connect-mail', sdr.json.id, '--smtp', smtp.url('sam@acme.example', 'wrong'), '--imap', imap.url('sam@acme.example', 'sam-pw'), '--json');
    // Stored for the watcher to retry, but the exit code says the servers refused (as `sender test`).
    assert.equal(bad.code, 1, bad.err);
    assert.equal(bad.json.mailConnected, false);
    assert.equal(bad.json.healthState, 'needs_reauth');
    const down = await cli('sdr', 'connect-mail', sdr.json.id, '--smtp', smtp.url('sam@acme.example', 'sam-pw'), '--imap', 'imap://sam:x@127.0.0.1:1', '--json');
    assert.equal(down.code, 1);
    assert.equal(down.json.healthState, 'disconnected');
    const good = await cli('sdr', 'connect-mail', sdr.json.id, '--smtp', smtp.url('sam@acme.example', 'sam-pw'), '--imap', imap.url('sam@acme.example', 'sam-pw'), '--json');
    ok(good);
    assert.deepEqual(good.json, { id: sdr.json.id, mailConnected: true, mailEmail: 'sam@acme.example', healthState: 'active', lastSyncError: null });
    assert.doesNotMatch(good.out + bad.out, /sam-pw/);

    list = await app.request('GET', '/v1/sdrs', { key: sdrKey.json.key });
    assert.deepEqual(list.body.data, [{ id: sdr.json.id, name: 'Sam Rep', email: 'sam@acme.example', mailConnected: true, mailEmail: 'sam@acme.example' }]);

    const off = await cli('sdr', 'deactivate', sdr.json.id, '--json');
    assert.deepEqual(off.json, { id: sdr.json.id, active: false });
    assert.equal((await app.request('GET', '/v1/sdrs', { key: sdrKey.json.key })).status, 403);
    const on = await cli('sdr', 'activate', sdr.json.id, '--json');
    assert.deepEqual(on.json, { id: sdr.json.id, active: true });
    assert.equal((await app.request('GET', '/v1/sdrs', { key: sdrKey.json.key })).status, 200);
  });

  it('suppression remove counts what it removed', async () => {
    const added = await app.request('POST', '/v1/suppression-list', { key: adminKey, body: { emails: ['a@x.example', 'b@x.example'] } });
    assert.deepEqual(added.body, { suppressed: 2 });
    const r = await cli('suppression', 'remove', '--workspace', wsId, 'A@x.example', 'a@x.example', 'zz@x.example', '--json');
    ok(r);
    assert.deepEqual(r.json, { removed: 1 });
    const again = await app.request('POST', '/v1/suppression-list', { key: adminKey, body: { emails: ['a@x.example', 'b@x.example'] } });
    assert.deepEqual(again.body, { suppressed: 1 });
  });

  it('key revoke: the key then gets 401', async () => {
    const k = await cli('key', 'create', '--workspace', wsId, '--name', 'temp', '--json');
    assert.equal((await app.request('GET', '/v1/sender-pools', { key: k.json.key })).status, 200);
    const r = await cli('key', 'revoke', k.json.id, '--json');
    ok(r);
    assert.deepEqual(r.json, { id: k.json.id, revoked: true });
    assert.equal((await app.request('GET', '/v1/sender-pools', { key: k.json.key })).status, 401);
  });

  it('migrate is a no-op on an up-to-date database', async () => {
    const r = await cli('migrate', '--json');
    ok(r);
    assert.deepEqual(r.json, { applied: [] });
  });

  it('a different secret key is refused: it cannot decrypt the stored credentials', async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let err = '';
    stderr.on('data', (c) => (err += c));
    const code = await runCli(['workspace', 'create', '--name', 'x', '--json'], { stdout, stderr, env: { ...env, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex') } });
    assert.equal(code, 1);
    assert.match(err, /MAILGATE_SECRET_KEY cannot decrypt/);
  });

  it('a bad setting stops the command with a message naming it', async () => {
    for (const [name, value] of [['PORT', 'eighty'], ['MAILGATE_SECRET_KEY', 'short'], ['LOG_LEVEL', 'loud'], ['DATABASE_URL', 'mysql://x'], ['MAILGATE_SHUTDOWN_TIMEOUT', '5 minutes']]) {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      let err = '';
      stderr.on('data', (c) => (err += c));
      const code = await runCli(['workspace', 'create', '--name', 'x', '--json'], { stdout, stderr, env: { ...env, [name]: value } });
      assert.equal(code, 1, name);
      assert.match(err, new RegExp(`invalid setting ${name}`), err);
    }
  });

  it('workspace delete: its keys then get 404 workspace_not_found', async () => {
    const r = await cli('workspace', 'delete', 'acme', '--json');
    ok(r);
    assert.deepEqual(r.json, { id: wsId, deleted: true });
    const res = await app.request('GET', '/v1/sender-accounts', { key: adminKey });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'workspace_not_found');
  });

  it('the installed bin runs the same commands (npx mailgate)', async () => {
    const { stdout } = await run('node', ['bin/mailgate.js', 'workspace', 'create', '--name', 'from-bin', '--json'], { env: { ...process.env, ...env } });
    const out = JSON.parse(stdout);
    assert.equal(out.name, 'from-bin');
    const help = await run('node', ['bin/mailgate.js', '--help'], { env: { ...process.env, ...env } });
    assert.match(help.stdout, /serve/);
    assert.match(help.stdout, /suppression/);
  });
});
