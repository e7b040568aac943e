import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { runCliCaptured } from '../support/cli.ts';
import { createTestDatabase } from '../support/harness.ts';

// The API's text rule on the CLI: a NUL, a lone surrogate or a file that is not UTF-8 is one
// clear line on stderr and a non-zero exit, before anything reaches the database.
describe('mailgate CLI: text the database cannot hold is refused with one line', () => {
  let db: { url: string; drop(): Promise<void> };
  let env: NodeJS.ProcessEnv;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-cli-input-'));
  before(async () => {
    db = await createTestDatabase();
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex'), LOG_LEVEL: 'warn' };
  });
  after(async () => db.drop());

  async function count(table: string): Promise<number> {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      return Number((await c.query(`select count(*) from ${table}`)).rows[0].count);
    } finally {
      await c.end();
    }
  }

  function refused(r: { code: number | null; err: string; out: string }, message: RegExp) {
    assert.notEqual(r.code, 0);
    assert.equal(r.out, '');
    assert.equal(r.err.trim().split('\n').length, 1, r.err);
    assert.match(r.err, message);
  }

  it('an argument with a NUL or a lone surrogate names the option', async () => {
    const workspaces = await count('workspaces');
    refused(await runCliCaptured(env, ['workspace', 'create', '--name', 'acme\u0000', '--json']), /^error: --name: must not contain a NUL character/);
    refused(await runCliCaptured(env, ['workspace', 'create', '--name=\ud800acme', '--json']), /^error: --name: must be valid Unicode/);
    assert.equal(await count('workspaces'), workspaces);
  });

  it('a number past its limit (the API limit, or what the database holds) is one line naming the option, never SQL', async () => {
    await runCliCaptured(env, ['workspace', 'create', '--name', 'limits', '--json']);
    const before = [await count('sender_pools'), await count('sender_accounts'), await count('followup_rules')];
    refused(await runCliCaptured(env, ['pool', 'create', '--workspace', 'limits', '--name', 'p', '--daily-capacity', '3000000000']), /^error: --daily-capacity must be a whole number from 0 to 10,000,000\n?$/);
    const add = ['sender', 'add', '--workspace', 'limits', '--email', 'c@b.example', '--name', 'n', '--smtp', 'smtp://a:b@127.0.0.1:1'];
    refused(await runCliCaptured(env, [...add, '--daily-limit', '3000000000']), /^error: --daily-limit must be a whole number from 1 to 1,000,000\n?$/);
    refused(await runCliCaptured(env, [...add, '--min-interval', '999999d']), /^error: --min-interval: must be at most 24h\n?$/);
    refused(await runCliCaptured(env, ['followup-rule', 'add', '--workspace', 'limits', '--name', 'r', '--after', '2d', '--max-attempts', '3000000000']), /^error: --max-attempts must be a whole number from 1 to 100\n?$/);
    assert.deepEqual([await count('sender_pools'), await count('sender_accounts'), await count('followup_rules')], before);
  });

  it('a name past 200 characters is refused naming it, as the API refuses it', async () => {
    const long = 'n'.repeat(201);
    const before = [await count('workspaces'), await count('api_keys'), await count('sender_pools'), await count('sender_accounts'), await count('sdrs'), await count('followup_rules')];
    refused(await runCliCaptured(env, ['workspace', 'create', '--name', long]), /^error: name: at most 200 characters\n?$/);
    await runCliCaptured(env, ['workspace', 'create', '--name', 'names', '--json']);
    const after = [await count('workspaces'), await count('api_keys')];
    for (const args of [
      ['key', 'create', '--workspace', 'names', '--name', long],
      ['pool', 'create', '--workspace', 'names', '--name', long, '--daily-capacity', '10'],
      ['sender', 'add', '--workspace', 'names', '--email', 'c@b.example', '--name', long, '--smtp', 'smtp://a:b@127.0.0.1:1'],
      ['sdr', 'add', '--workspace', 'names', '--name', long, '--email', 's@b.example'],
      ['followup-rule', 'add', '--workspace', 'names', '--name', long, '--after', '2d'],
    ]) {
      refused(await runCliCaptured(env, args), /^error: name: at most 200 characters\n?$/);
    }
    assert.deepEqual([await count('workspaces'), await count('api_keys')], after);
    assert.deepEqual([await count('sender_pools'), await count('sender_accounts'), await count('sdrs'), await count('followup_rules')], before.slice(2));
    assert.equal((await runCliCaptured(env, ['workspace', 'create', '--name', 'n'.repeat(200), '--json'])).code, 0);
  });

  it('a --file or --signature-file that is not UTF-8 text, or holds a NUL, is refused naming the option', async () => {
    const ws = await runCliCaptured(env, ['workspace', 'create', '--name', 'files', '--json']);
    assert.equal(ws.code, 0, ws.err);
    const nul = path.join(dir, 'nul.txt');
    writeFileSync(nul, 'Pricing\u0000 details');
    const latin1 = path.join(dir, 'latin1.txt');
    writeFileSync(latin1, Buffer.from([0x50, 0x72, 0x65, 0x69, 0x73, 0xe9]));
    refused(await runCliCaptured(env, ['kb', 'add', '--workspace', 'files', '--title', 'T', '--file', nul, '--json']), /^error: --file: the text of .*nul\.txt must not contain a NUL/);
    refused(await runCliCaptured(env, ['kb', 'add', '--workspace', 'files', '--title', 'T', '--file', latin1, '--json']), /^error: --file: .*latin1\.txt is not valid UTF-8 text/);
    assert.equal(await count('kb_entries'), 0);
    const sdr = await runCliCaptured(env, ['sdr', 'add', '--workspace', 'files', '--name', 'Sam', '--email', 'sam@files.example', '--json']);
    assert.equal(sdr.code, 0, sdr.err);
    refused(await runCliCaptured(env, ['sdr', 'set-profile', sdr.json.id, '--signature-file', nul, '--json']), /^error: --signature-file: the text of .* must not contain a NUL/);
  });
});
