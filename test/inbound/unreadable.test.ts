// A message the IMAP server will not hand over, a server failing every FETCH, and mail the
// parser refuses: none may stop a mailbox, and none may pass without a word (log and metric).
import assert from 'node:assert/strict';
import { chmodSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { waitFor } from '../support/wait.ts';
import { startTestApp, seedWorkspace, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { ImapTestServer } from '../support/dovecot.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { MailboxWatcher } from '../../src/modules/inbound/watcher.ts';

// A message the IMAP server cannot hand over (its file unreadable: Dovecot logs the error and
// drops the connection at every FETCH of it; Gmail answers "NO Some messages could not be
// FETCHed"). It must neither stop its mailbox for ever nor vanish without a word.
describe('inbound: a message the IMAP server will not hand over', function () {
  this.timeout(120_000);
  const sink = new SmtpSink();
  const imap = new ImapTestServer();
  let app: TestApp;
  let db: pg.Client;
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;
  let watcher: MailboxWatcher | undefined;
  const SENDER = 'bob@acme.example';
  const PW = 'imap-pw';
  let key: string;
  const sent = new Map<string, string>();

  const mail = (from: string, messageId: string, inReplyTo: string, body: string) =>
    [`From: ${from}`, `To: ${SENDER}`, 'Subject: Re: Hello', `Date: ${new Date().toUTCString()}`, `Message-ID: ${messageId}`, `In-Reply-To: ${inReplyTo}`, '', body, ''].join('\r\n');

  /** Every stored message file of the mailbox, unreadable to Dovecot (0) or readable again. */
  function spoilAll(mode: number): void {
    const maildir = path.join(imap.dir, 'home', SENDER, 'Maildir');
    for (const sub of ['new', 'cur']) for (const f of readdirSync(path.join(maildir, sub))) chmodSync(path.join(maildir, sub, f), mode);
  }

  /** Makes the stored file of the message with this Message-ID unreadable to Dovecot. */
  function spoil(messageId: string): void {
    const maildir = path.join(imap.dir, 'home', SENDER, 'Maildir');
    for (const sub of ['new', 'cur']) {
      for (const f of readdirSync(path.join(maildir, sub))) {
        const file = path.join(maildir, sub, f);
        if (readFileSync(file, 'utf8').includes(messageId)) {
          chmodSync(file, 0o000);
          return;
        }
      }
    }
    throw new Error(`no file holds ${messageId}`);
  }

  before(async () => {
    await sink.start();
    await imap.start();
    imap.addUser(SENDER, PW);
    sink.users.set(SENDER, 'smtp-pw');
    // debug: the watcher's each failed session is a debug line ('mailbox connection failed').
    app = await startTestApp({ config: { logLevel: 'debug' } });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 1 });
    dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 1, retryDelaysMs: [60_000] });
    const seeded = await seedWorkspace(app);
    key = seeded.adminKey;
    const s = app.services();
    const account = await s.senders.add({ workspaceId: seeded.workspace.id, email: SENDER, name: 'Bob', smtpUrl: sink.url(SENDER, 'smtp-pw'), imapUrl: imap.url(SENDER, PW) });
    const pool = await s.senders.createPool(seeded.workspace.id, 'p', 1000, [account.id]);
    const c = await app.request('POST', '/v1/campaigns', { key, body: { name: 'Unreadable', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Hello', bodyHtml: '<p>Hi</p>' }, { subject: '', bodyHtml: '<p>Bump</p>', delayHours: 48 }] } });
    await app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key, body: { leads: ['one', 'two', 'three'].map((n) => ({ email: `${n}@lead.example` })) } });
    await app.request('POST', `/v1/campaigns/${c.body.id}/start`, { key });
    await dispatcher.runRound();
    for (const r of sink.received) sent.set(r.to[0], r.parsed.messageId!);
    assert.equal(sent.size, 3);
  });
  after(async () => {
    await watcher?.stop();
    await messenger.close();
    await dispatcher.close();
    await db.end();
    await app.close();
    await imap.stop();
    await sink.stop();
  });

  it('is tried again a few times, then skipped with an error naming it; the mail around it is read and the mailbox is ok', async () => {
    await imap.append(SENDER, PW, mail('one@lead.example', '<one@lead.example>', sent.get('one@lead.example')!, 'Sounds good, send me a calendar link.'));
    await imap.append(SENDER, PW, mail('two@lead.example', '<two@lead.example>', sent.get('two@lead.example')!, 'Not interested, thanks.'));
    await imap.append(SENDER, PW, mail('three@lead.example', '<three@lead.example>', sent.get('three@lead.example')!, 'Please remove me from your list.'));
    spoil('<two@lead.example>');
    const newest = await imap.lastUid(SENDER, PW);
    watcher = new MailboxWatcher(app.deps, () => app.services().inbound, { pollIntervalMs: 300, useIdle: false, tickMs: 300, leaseMs: 3_000, messageFetchAttempts: 2 });
    await watcher.start();
    const cursor = async () => Number((await db.query(`select last_uid from mailbox_watches`)).rows[0].last_uid);
    await waitFor('the cursor past the unreadable message', async () => (await cursor()) === newest, 45_000);
    const replies = (await app.request('GET', '/v1/replies', { key })).body as Array<{ email: string; classification: string }>;
    assert.deepEqual(replies.map((r) => `${r.email} ${r.classification}`).sort(), ['one@lead.example interested', 'three@lead.example unsubscribe']);
    // Not silently: an error names the mailbox, the message's uid and what the server said.
    const skipped = app.logs.lines.flatMap((l) => l.split('\n')).filter((l) => l.includes('skipped')).map((l) => JSON.parse(l));
    assert.equal(skipped.length, 1, 'one error line for the skipped message');
    assert.equal(skipped[0].level, 50);
    assert.equal(skipped[0].uid, newest - 1);
    assert.ok(skipped[0].watchId);
    // Counted for the operator's alert (docs/operating.md).
    const skippedCount = async (reason: string) => (await app.deps.metrics.inboundSkipped.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
    assert.equal(await skippedCount('server_refused'), 1);
    // The server was reachable throughout: once past the message, the mailbox is healthy.
    await waitFor('the mailbox ok', async () => (await db.query(`select status from mailbox_watches`)).rows[0].status === 'ok');
  });

  it('a server failing every FETCH (a storage outage) skips nothing, however often it fails; once it hands mail over again, all of it is read', async () => {
    const lines = () => app.logs.lines.flatMap((l) => l.split('\n')).filter(Boolean);
    const from = lines().length;
    const failures = () => lines().slice(from).filter((l) => l.includes('mailbox connection failed')).length;
    const cursor = async () => Number((await db.query(`select last_uid from mailbox_watches`)).rows[0].last_uid);
    const before = await cursor();
    await imap.append(SENDER, PW, mail('four@lead.example', '<four@lead.example>', '<nothing@acme.example>', 'Who is this?'));
    await imap.append(SENDER, PW, mail('five@lead.example', '<five@lead.example>', '<nothing@acme.example>', 'Call me.'));
    const newest = await imap.lastUid(SENDER, PW);
    const originalMode = 0o600;
    spoilAll(0o000);
    try {
      // messageFetchAttempts is 2: counted without the server handing anything over, the first
      // new message was skipped by the fourth failed session (a batch, then itself alone twice).
      await waitFor('four failed sessions', async () => failures() >= 4, 60_000);
      assert.equal(await cursor(), before);
      assert.equal(lines().slice(from).filter((l) => l.includes('would not hand over')).length, 0);
    } finally {
      spoilAll(originalMode);
    }
    await waitFor('both new messages read', async () => (await cursor()) === newest, 60_000);
    assert.equal(lines().slice(from).filter((l) => l.includes('would not hand over')).length, 0);
  });

  it('mail the parser refuses (over 1,000 MIME parts) is passed over, logged and counted', async () => {
    const before = (await app.deps.metrics.inboundSkipped.get()).values.find((v) => v.labels.reason === 'unparseable')?.value ?? 0;
    const parts = Array.from({ length: 1_001 }, (_, i) => `--b\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`).join('');
    await imap.append(
      SENDER,
      PW,
      [`From: six@lead.example`, `To: ${SENDER}`, 'Subject: Many parts', `Date: ${new Date().toUTCString()}`, 'Message-ID: <six@lead.example>', 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="b"', '', parts + '--b--', ''].join('\r\n'),
    );
    const newest = await imap.lastUid(SENDER, PW);
    await waitFor('the cursor past it', async () => Number((await db.query(`select last_uid from mailbox_watches`)).rows[0].last_uid) === newest, 30_000);
    const after = (await app.deps.metrics.inboundSkipped.get()).values.find((v) => v.labels.reason === 'unparseable')?.value ?? 0;
    assert.equal(after, before + 1);
    assert.ok(app.logs.lines.some((l) => l.includes('could not parse an inbound message')));
  });
});
