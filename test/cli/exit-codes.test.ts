import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { runCliCaptured } from '../support/cli.ts';
import { createTestDatabase } from '../support/harness.ts';

// README: exit 2 is "a usage error (unknown command or option, missing or malformed argument)".
// A malformed value found by the command itself (an address that is not one, an unknown ICP
// value or category, neither --file nor --text) exited 1 like a failure of the database or of
// a server, while one found by the option parser (--daily-capacity ten, --after xyz) exited 2
// (found by a review, 2026-11-29).
describe('mailgate CLI: a malformed argument exits 2 whoever finds it', function () {
  this.timeout(60_000);
  let db: { url: string; drop(): Promise<void> };
  let env: NodeJS.ProcessEnv;
  before(async () => {
    db = await createTestDatabase();
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex'), LOG_LEVEL: 'warn' };
    assert.equal((await runCliCaptured(env, ['workspace', 'create', '--name', 'w', '--json'])).code, 0);
  });
  after(async () => {
    await db.drop();
  });
  const cli = (...argv: string[]) => runCliCaptured(env, argv);

  it('malformed values: exit 2 with one line naming the value', async () => {
    const cases: [string[], RegExp][] = [
      [['sender', 'add', '--workspace', 'w', '--email', 'not-an-email', '--name', 'N', '--smtp', 'smtp://u:p@127.0.0.1:2525', '--json'], /not-an-email/],
      [['sender', 'add', '--workspace', 'w', '--email', 'a@example.com', '--name', 'N', '--smtp', 'http://x', '--json'], /smtp/],
      [['icp', 'set', '--workspace', 'w', '--seniority', 'bogus', '--employee-count', '1-10', '--json'], /"bogus" is not one of/],
      [['followup-rule', 'add', '--workspace', 'w', '--name', 'n', '--after', '1d', '--category', 'D', '--json'], /"D" is not one of A, B, C/],
      [['kb', 'add', '--workspace', 'w', '--title', 'T', '--json'], /exactly one of --file or --text/],
      [['sdr', 'add', '--workspace', 'w', '--name', 'S', '--email', 'nope', '--json'], /nope/],
      [['campaign', 'remove-lead', 'cmp_missing', 'jane', '--json'], /"jane" is neither a lead id/],
    ];
    for (const [argv, pattern] of cases) {
      const r = await cli(...argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: ${r.err}`);
      assert.equal(r.out, '');
      assert.match(r.err, /^error: [^\n]*\n$/);
      assert.match(r.err, pattern);
    }
  });

  it('what is not a malformed argument still exits 1: a missing thing, a file that cannot be read', async () => {
    for (const argv of [['sender', 'pause', 'snd_missing', '--json'], ['kb', 'add', '--workspace', 'w', '--title', 'T', '--file', '/nonexistent/kb.txt', '--json'], ['kb', 'add', '--workspace', 'nope', '--title', 'T', '--text', 'x'], ['campaign', 'remove-lead', 'cmp_missing', 'jane@example.com', '--json']]) {
      const r = await cli(...argv);
      assert.equal(r.code, 1, `${argv.join(' ')}: ${r.err}`);
    }
  });
});
