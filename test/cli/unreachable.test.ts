import assert from 'node:assert/strict';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { runCliCaptured } from '../support/cli.ts';
import { refusedPort } from '../support/ports.ts';

// Every command that reads the database meets an unreachable DATABASE_URL as `serve` does: one
// line naming DATABASE_URL, exit 1, within the 10 s connect limit (found by a review,
// 2026-11-29: the list commands waited for ever on a server that never answered, and printed
// the driver's words for a refused one). And a malformed --role is a usage error (exit 2).
describe('mailgate CLI: an unreachable DATABASE_URL, a malformed --role', function () {
  this.timeout(60_000);
  const secret = randomBytes(32).toString('hex');
  const held = new Set<net.Socket>();
  const silent = net.createServer((s) => held.add(s));
  let silentPort: number;
  before(async () => {
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    silentPort = (silent.address() as net.AddressInfo).port;
  });
  after(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => silent.close(r));
  });

  const oneLine = (r: { code: number | null; err: string }, pattern: RegExp) => {
    assert.equal(r.code, 1, r.err);
    assert.equal(r.err.trim().split('\n').length, 1, r.err);
    assert.match(r.err.trim(), pattern);
  };

  it('a refused port: list and write commands alike name DATABASE_URL', async () => {
    const env = { DATABASE_URL: `postgres://mailgate:s3cret@127.0.0.1:${await refusedPort()}/mailgate`, MAILGATE_SECRET_KEY: secret, LOG_LEVEL: 'warn' };
    for (const argv of [['workspace', 'list', '--json'], ['sender', 'list', '--json'], ['sender', 'pause', 'snd_x', '--json']]) {
      const r = await runCliCaptured(env, argv);
      oneLine(r, /^error: cannot connect to DATABASE_URL postgres:\/\/mailgate:\*\*\*@127\.0\.0\.1:\d+\/mailgate: connection refused: correct DATABASE_URL/);
      assert.ok(!r.err.includes('s3cret'), argv.join(' '));
    }
  });

  it('a server that accepts and never answers: a list command gives up after 10 s', async () => {
    const env = { DATABASE_URL: `postgres://mailgate@127.0.0.1:${silentPort}/mailgate`, MAILGATE_SECRET_KEY: secret, LOG_LEVEL: 'warn' };
    const r = await runCliCaptured(env, ['workspace', 'list', '--json']);
    oneLine(r, /^error: cannot connect to DATABASE_URL .*: no answer within 10 s: correct DATABASE_URL/);
  });

  it('key create: an unknown --role, or --role sdr without --sdr, is a usage error before the database is opened', async () => {
    // The refused port: a usage error is found first, so the database is never reached.
    const env = { DATABASE_URL: `postgres://mailgate@127.0.0.1:${await refusedPort()}/mailgate`, MAILGATE_SECRET_KEY: secret, LOG_LEVEL: 'warn' };
    const boss = await runCliCaptured(env, ['key', 'create', '--workspace', 'w', '--role', 'boss']);
    assert.equal(boss.code, 2, boss.err);
    assert.match(boss.err, /--role/);
    const noSdr = await runCliCaptured(env, ['key', 'create', '--workspace', 'w', '--role', 'sdr']);
    assert.equal(noSdr.code, 2, noSdr.err);
    assert.match(noSdr.err, /--sdr: required with --role sdr/);
  });
});
