import assert from 'node:assert/strict';
import { runCliCaptured } from '../support/cli.ts';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const fx = (p: string) => path.join(root, 'fixtures/mail', p);

describe('mailgate classify', () => {
  let dataDir: string;
  // A database URL nothing listens on and an empty data dir: classify must not need either.
  let env: NodeJS.ProcessEnv;
  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'mailgate-classify-'));
    env = { DATABASE_URL: 'postgres://mailgate:x@127.0.0.1:1/none', MAILGATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  });

  const cli = (...argv: string[]) => runCliCaptured(env, argv);


  it('--json prints one array with an object per file: bounce, reply and ignored mail, without a database', async () => {
    const files = [fx('bounces/postfix/5.1.1-user-unknown.eml'), fx('replies/fr/retirez-moi.eml'), fx('bounces/gmail/dsn-delay.eml')];
    const r = await cli('classify', ...files, '--json');
    assert.equal(r.code, 0, r.err);
    assert.equal(r.err, '');
    const [bounce, reply, ignored] = JSON.parse(r.out);
    assert.deepEqual(Object.keys(bounce).sort(), ['bounceReason', 'bounceStatus', 'bounceType', 'classification', 'confidence', 'decidedBy', 'file', 'kind', 'originalMessageId', 'snippet']);
    assert.equal(bounce.file, files[0]);
    assert.equal(bounce.kind, 'bounce');
    assert.equal(bounce.classification, 'bounce');
    assert.equal(bounce.bounceType, 'hard');
    assert.equal(bounce.bounceStatus, '5.1.1');
    assert.match(bounce.bounceReason, /^550 5\.1\.1 <[^>]+>: Recipient address rejected: User unknown/);
    assert.match(bounce.originalMessageId, /^<msg_[a-z2-7]{26}\.[0-9a-f]{12}@northwind\.example>$/);
    assert.equal(bounce.decidedBy, 'dsn:rfc3464;type:status-class');
    assert.deepEqual(Object.keys(reply).sort(), ['classification', 'confidence', 'decidedBy', 'file', 'kind', 'snippet']);
    assert.deepEqual([reply.kind, reply.classification, reply.decidedBy], ['reply', 'unsubscribe', 'lexicon:unsubscribe:fr']);
    assert.equal(reply.snippet, 'Merci de me retirer de votre liste de diffusion.');
    assert.ok(reply.confidence > 0 && reply.confidence <= 1);
    assert.deepEqual([ignored.kind, ignored.classification, ignored.decidedBy], ['ignored', null, 'dsn:action-delayed']);
    assert.deepEqual(await readdir(dataDir), [], 'nothing written to the data dir');
  });

  it('without --json prints a readable block per file', async () => {
    const r = await cli('classify', fx('ooo/fr/exchange.eml'), fx('bounces/qmail/no-mailbox.eml'));
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /ooo\/fr\/exchange\.eml: reply out_of_office \(header:auto-submitted, confidence 0\.98\)\n  snippet: Bonjour, Je suis actuellement absent du bureau.*\n  back: 2026-11-30\n/);
    assert.match(r.out, /qmail\/no-mailbox\.eml: bounce hard 5\.1\.1 \(bounce-text:mailer-daemon;type:status-class, confidence 0\.95\)\n  original: <msg_\S+>\n  reason: Sorry, no mailbox here by that name\. \(#5\.1\.1\)\n$/);
  });

  it('a missing file or a file that is not mail is one line on stderr, a non-zero exit and nothing on stdout', async () => {
    const missing = await cli('classify', fx('replies/en/stop.eml'), path.join(dataDir, 'nope.eml'), '--json');
    assert.notEqual(missing.code, 0);
    assert.equal(missing.out, '');
    assert.equal(missing.err, `error: ${path.join(dataDir, 'nope.eml')}: no such file\n`);
    const notMail = path.join(dataDir, 'notes.txt');
    await writeFile(notMail, 'just some notes\nnot an email at all\n');
    const bad = await cli('classify', notMail);
    assert.notEqual(bad.code, 0);
    assert.equal(bad.out, '');
    assert.match(bad.err, /^error: .*notes\.txt: not an email message \(no header fields\)\n$/);
    const none = await cli('classify');
    assert.notEqual(none.code, 0);
  });

  it('works through the installed command', async () => {
    const { stdout } = await run(process.execPath, [path.join(root, 'bin/mailgate.js'), 'classify', '--json', fx('ooo/es/exchange.eml')], { env: { ...process.env, ...env } });
    const [r] = JSON.parse(stdout);
    assert.deepEqual([r.kind, r.classification], ['reply', 'out_of_office']);
    await assert.rejects(run(process.execPath, [path.join(root, 'bin/mailgate.js'), 'classify', path.join(dataDir, 'missing.eml')], { env: { ...process.env, ...env } }), (e: { code: number; stderr: string }) => {
      assert.equal(e.code, 1);
      assert.match(e.stderr, /^error: .*missing\.eml: no such file\n$/);
      return true;
    });
  });
});
