import assert from 'node:assert/strict';
import { waitFor } from '../support/wait.ts';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { startTestApp, seedWorkspace, subscribeEvents, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { ImapTestServer } from '../support/dovecot.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { MailboxWatcher, fetchBatches, isDatabaseError } from '../../src/modules/inbound/watcher.ts';
import { dsn } from '../support/mail.ts';
import { campaignMessageId } from '../../src/modules/messages/message-id.ts';
import { GUARD_PASSES } from '../../src/modules/messages/send.ts';


function mail(h: { from: string; to: string; subject: string; messageId: string; inReplyTo?: string; extra?: string }, body: string): string {
  return [
    `From: ${h.from}`,
    `To: ${h.to}`,
    `Subject: ${h.subject}`,
    `Date: ${new Date().toUTCString()}`,
    `Message-ID: ${h.messageId}`,
    ...(h.inReplyTo ? [`In-Reply-To: ${h.inReplyTo}`, `References: ${h.inReplyTo}`] : []),
    ...(h.extra ? [h.extra] : []),
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    body,
    '',
  ].join('\r\n');
}

describe('inbound: IMAP watching, matching, classification effects', function () {
  this.timeout(90_000);
  const sink = new SmtpSink();
  const imap = new ImapTestServer();
  let app: TestApp;
  let db: pg.Client;
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;
  const watchers: MailboxWatcher[] = [];
  const SENDER = 'alice@acme.example';
  const PW = 'imap-pw';
  let key: string;
  let campaignId: string;
  const sent = new Map<string, string>(); // lead email -> Message-ID we sent

  const replies = async (q = '') => (await app.request('GET', `/v1/replies${q}`, { key })).body as Array<Record<string, string>>;
  const stats = async () => (await app.request('GET', `/v1/campaigns/${campaignId}/stats`, { key })).body;
  const leadStatus = async (email: string) =>
    ((await app.request('GET', `/v1/campaigns/${campaignId}/leads`, { key })).body.data as Array<{ email: string; status: string }>).find((l) => l.email === email)!.status;
  function watcher(opts: { useIdle?: boolean } = {}) {
    const w = new MailboxWatcher(app.deps, () => app.services().inbound, { pollIntervalMs: opts.useIdle === false ? 300 : 5_000, useIdle: opts.useIdle ?? true, tickMs: 300, leaseMs: 3_000 });
    watchers.push(w);
    return w;
  }

  before(async () => {
    await sink.start();
    await imap.start();
    imap.addUser(SENDER, PW);
    sink.users.set(SENDER, 'smtp-pw');
    app = await startTestApp();
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 2 });
    dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000] });

    // Mail that was in the mailbox before the account was added is never processed.
    await imap.append(SENDER, PW, mail({ from: 'old@lead.example', to: SENDER, subject: 'old', messageId: '<old-1@lead.example>' }, 'Yes please, call me'), new Date(Date.now() - 3 * 86_400_000));

    const seeded = await seedWorkspace(app);
    key = seeded.adminKey;
    const s = app.services();
    const account = await s.senders.add({ workspaceId: seeded.workspace.id, email: SENDER, name: 'Alice', smtpUrl: sink.url(SENDER, 'smtp-pw'), imapUrl: imap.url(SENDER, PW) });
    const pool = await s.senders.createPool(seeded.workspace.id, 'p', 1000, [account.id]);
    await subscribeEvents(app, seeded.workspace.id);
    const c = await app.request('POST', '/v1/campaigns', {
      key,
      body: { name: 'Inbound', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Quick question', bodyHtml: '<p>Hi</p>' }, { subject: '', bodyHtml: '<p>Bump</p>', delayHours: 48 }] },
    });
    campaignId = c.body.id;
    const leads = ['yes', 'stop', 'away', 'gone', 'poll', 'later', 'restart', 'old'].map((n) => ({ email: `${n}@lead.example` }));
    await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads } });
    await app.request('POST', `/v1/campaigns/${campaignId}/start`, { key });
    await dispatcher.runRound();
    for (const r of sink.received) sent.set(r.to[0], r.parsed.messageId!);
    assert.equal(sent.size, 8);
  });
  after(async () => {
    for (const w of watchers) await w.stop();
    await messenger.close();
    await dispatcher.close();
    await db.end();
    await app.close();
    await imap.stop();
    await sink.stop();
  });

  it('an interested reply appended over IMAP shows up through the API (IDLE); the sequence ends', async () => {
    await watcher().start();
    await imap.append(SENDER, PW, mail({ from: 'Yes Lead <yes@lead.example>', to: SENDER, subject: 'Re: Quick question', messageId: '<r1@lead.example>', inReplyTo: sent.get('yes@lead.example') }, "Sounds great, let's set up a call next week. What times work for you?\r\n\r\nOn Mon, Alice wrote:\r\n> Hi"));
    const [reply] = await waitFor('the reply', async () => (await replies()).length > 0 && (await replies()));
    assert.equal(reply.email, 'yes@lead.example');
    assert.equal(reply.campaignId, campaignId);
    assert.equal(reply.classification, 'interested');
    assert.match(reply.threadSnippet, /^Sounds great, let's set up a call next week/);
    assert.doesNotMatch(reply.threadSnippet, /Alice wrote/);
    assert.match(reply.id, /^rpl_/);
    assert.equal(await leadStatus('yes@lead.example'), 'replied');
    const s = await stats();
    assert.equal(s.replied, 1);
    assert.equal(s.scheduled, 7, 'the follow-up of the lead who replied was cancelled');
    const ev = await db.query(`select data from events where type = 'reply.received' and data->>'replyId' = $1`, [reply.id]);
    assert.deepEqual(Object.keys(ev.rows[0].data).sort(), ['campaignId', 'classification', 'email', 'receivedAt', 'replyId', 'threadSnippet']);
    const raw = await db.query(`select length(raw) as n from inbound_messages where message_id_header = '<r1@lead.example>'`);
    assert.ok(Number(raw.rows[0].n) > 100, 'the raw message is stored');
    const sender = (await app.request('GET', '/v1/sender-accounts', { key })).body[0];
    assert.equal(sender.imapHealth, 'ok');
  });

  it('matched by the sender address when there are no threading headers; unsubscribe suppresses', async () => {
    await imap.append(SENDER, PW, mail({ from: 'stop@lead.example', to: SENDER, subject: 'Quick question', messageId: '<r2@lead.example>' }, 'Please remove me from your mailing list.'));
    const r = await waitFor('the unsubscribe', async () => (await replies()).find((x) => x.email === 'stop@lead.example'));
    assert.equal(r.classification, 'unsubscribe');
    assert.equal(await leadStatus('stop@lead.example'), 'unsubscribed');
    const sup = await db.query(`select reason from suppressions where email_key = 'stop@lead.example'`);
    assert.equal(sup.rows[0].reason, 'reply_unsubscribe');
    const s = await stats();
    assert.equal(s.replied, 2);
    assert.equal(s.unsubscribed, 1);
  });

  it('an out-of-office answer does not end the sequence', async () => {
    await imap.append(
      SENDER,
      PW,
      mail({ from: 'away@lead.example', to: SENDER, subject: 'Automatic reply: Quick question', messageId: '<r3@lead.example>', inReplyTo: sent.get('away@lead.example'), extra: 'Auto-Submitted: auto-replied' }, 'I am out of the office until Monday with limited access to email.'),
    );
    const r = await waitFor('the OOO', async () => (await replies()).find((x) => x.email === 'away@lead.example'));
    assert.equal(r.classification, 'out_of_office');
    assert.equal(await leadStatus('away@lead.example'), 'active');
    assert.equal((await stats()).replied, 2, 'an auto-reply is not a reply');
  });

  it('a delivery-status report bounces the original message: hard, suppressed, listed as bounce', async () => {
    const before = await stats();
    await imap.append(
      SENDER,
      PW,
      dsn({ to: SENDER, messageId: '<dsn1@mx.lead.example>', original: sent.get('gone@lead.example')!, recipient: 'gone@lead.example', status: '5.1.1', diagnostic: '550 5.1.1 <gone@lead.example>: Recipient address rejected: User unknown' }),
    );
    const r = await waitFor('the bounce', async () => (await replies()).find((x) => x.email === 'gone@lead.example'));
    assert.equal(r.classification, 'bounce');
    const m = await db.query(`select state, bounce_type, bounce_reason from outbound_messages where message_id_header = $1`, [sent.get('gone@lead.example')]);
    assert.equal(m.rows[0].state, 'bounced');
    assert.equal(m.rows[0].bounce_type, 'hard');
    assert.match(m.rows[0].bounce_reason, /User unknown/);
    const after = await stats();
    assert.equal(after.bounced, before.bounced + 1);
    assert.equal(after.delivered, before.delivered - 1);
    assert.equal(after.sent, before.sent);
    assert.equal(await leadStatus('gone@lead.example'), 'bounced');
    assert.equal((await db.query(`select reason from suppressions where email_key = 'gone@lead.example'`)).rows[0].reason, 'hard_bounce');
    const ev = await db.query(`select data from events where type = 'message.bounced' and data->>'email' = 'gone@lead.example'`);
    assert.equal(ev.rows[0].data.bounceType, 'hard');
  });

  it('unmatched mail is left alone; mail older than the account is never processed', async () => {
    await imap.append(SENDER, PW, mail({ from: 'stranger@else.example', to: SENDER, subject: 'Hello', messageId: '<x1@else.example>' }, 'Yes, I am very interested!'));
    await imap.append(SENDER, PW, mail({ from: 'later@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<r4@lead.example>', inReplyTo: sent.get('later@lead.example') }, 'Not interested, thanks.'));
    await waitFor('the later reply', async () => (await replies()).find((x) => x.email === 'later@lead.example'));
    const all = await replies();
    assert.ok(!all.some((x) => x.email === 'stranger@else.example'));
    assert.ok(!all.some((x) => x.email === 'old@lead.example'));
    assert.equal(all.find((x) => x.email === 'later@lead.example')!.classification, 'not_interested');
  });

  it('a dropped connection recovers (the IMAP server restarts)', async () => {
    await imap.restart();
    await imap.append(SENDER, PW, mail({ from: 'restart@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<r5@lead.example>', inReplyTo: sent.get('restart@lead.example') }, 'Happy to chat, send me a calendar link.'));
    const r = await waitFor('the reply after the restart', async () => (await replies()).find((x) => x.email === 'restart@lead.example'), 30_000);
    assert.equal(r.classification, 'interested');
  });

  it('a restarted watcher neither misses nor re-processes mail; polling works without IDLE', async () => {
    const countBefore = (await replies()).length;
    for (const w of watchers.splice(0)) await w.stop();
    // Mail arriving while nobody watches.
    await imap.append(SENDER, PW, mail({ from: 'poll@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<r6@lead.example>', inReplyTo: sent.get('poll@lead.example') }, 'Yes, interested. Call me tomorrow.'));
    await watcher({ useIdle: false }).start();
    await waitFor('the mail that came while stopped', async () => (await replies()).find((x) => x.email === 'poll@lead.example'));
    await new Promise((r) => setTimeout(r, 1500));
    const all = await replies();
    assert.equal(all.length, countBefore + 1, 'nothing processed twice');
    const { rows } = await db.query(`select count(*)::int as n, count(distinct message_id_header)::int as d from inbound_messages`);
    assert.equal(rows[0].n, rows[0].d);
  });

  it('with several workers, one watches each mailbox; another takes over when the holder dies', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    // Both in IDLE: the server tells both sessions of the new mail at once.
    const a = watcher();
    const b = watcher();
    await a.start();
    await b.start();
    const owner = async () => (await db.query(`select lease_owner from mailbox_watches`)).rows[0].lease_owner as string | null;
    await waitFor('a holder', async () => !!(await owner()));
    const holder = await owner();
    assert.ok(holder === a.owner || holder === b.owner);
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await owner(), holder, 'the lease stays with its holder');
    // The holder "dies": its lease is taken by someone that never renews it, and expires.
    await db.query(`update mailbox_watches set lease_owner = 'dead.worker', lease_until = now() - interval '1 second'`);
    await waitFor('a takeover', async () => [a.owner, b.owner].includes((await owner()) ?? ''));
    await imap.append(SENDER, PW, mail({ from: 'late2@lead.example', to: SENDER, subject: 'x', messageId: '<r7@lead.example>' }, 'unrelated'));
    await new Promise((r) => setTimeout(r, 1000));
    const { rows } = await db.query(`select count(*)::int as n, count(distinct message_id_header)::int as d from inbound_messages`);
    assert.equal(rows[0].n, rows[0].d, 'no message ingested twice by two workers');
  });

  it('a reply larger than MAILGATE_INBOUND_MAX_BYTES is read up to it: classified by its text, its attachment never downloaded', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    const limit = 64 * 1024;
    const attachment = randomBytes(3 * 1024 * 1024).toString('base64').replace(/.{76}/g, '$&\r\n');
    const big = [
      'From: old@lead.example',
      `To: ${SENDER}`,
      'Subject: Re: Quick question',
      `Date: ${new Date().toUTCString()}`,
      'Message-ID: <big@lead.example>',
      `In-Reply-To: ${sent.get('old@lead.example')}`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="mix"',
      '',
      '--mix',
      'Content-Type: text/plain; charset=utf-8',
      '',
      "Yes, I'm interested. Our deck is attached; can we talk on Thursday?",
      '--mix',
      'Content-Type: application/pdf; name="deck.pdf"',
      'Content-Transfer-Encoding: base64',
      'Content-Disposition: attachment; filename="deck.pdf"',
      '',
      attachment,
      '--mix--',
      '',
    ].join('\r\n');
    await imap.append(SENDER, PW, big);
    // And a small one after it: the cursor moves past the large one.
    await imap.append(SENDER, PW, mail({ from: 'stranger2@else.example', to: SENDER, subject: 'Hi', messageId: '<small-after-big@else.example>' }, 'Hello'));
    const newest = await imap.lastUid(SENDER, PW);
    const sessionsBefore = imap.sessionBytesOut().length;
    const w = new MailboxWatcher(app.deps, () => app.services().inbound, { pollIntervalMs: 300, useIdle: false, tickMs: 300, leaseMs: 3_000, maxMessageBytes: limit });
    watchers.push(w);
    await w.start();
    const r = await waitFor('the large reply', async () => (await replies()).find((x) => x.email === 'old@lead.example'));
    assert.equal(r.classification, 'interested');
    assert.match(r.threadSnippet, /^Yes, I'm interested/);
    const stored = await db.query(`select length(raw) as n from inbound_messages where message_id_header = '<big@lead.example>'`);
    const n = Number(stored.rows[0].n);
    assert.ok(n > 1000 && n <= limit, `stored ${n} bytes, at most the limit ${limit}`);
    await waitFor('the cursor past the small mail after it', async () => Number((await db.query(`select last_uid from mailbox_watches`)).rows[0].last_uid) === newest);
    await watchers.splice(0)[0].stop();
    // The watcher's IMAP session sent less than the limit and the small mail, where the whole
    // message is 4 MB of base64 (Dovecot logs each session's bytes when it logs out).
    const out = await waitFor('the watcher session logged out', async () => {
      const all = imap.sessionBytesOut();
      return all.length > sessionsBefore && all.slice(sessionsBefore);
    });
    assert.ok(Math.max(...out) < limit + 64 * 1024, `the IMAP server sent ${Math.max(...out)} bytes`);
  });

  it('hostile and odd mail never stops the mailbox, never counts twice and is never our own', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    const stored = async (id: string) => (await db.query(`select kind, from_email from inbound_messages where message_id_header = $1 order by created_at`, [id])).rows;
    const repliesOf = async (email: string) => (await replies()).filter((x) => x.email === email).length;
    const before = { later: await repliesOf('later@lead.example'), poll: await repliesOf('poll@lead.example') };
    // A Message-ID of 6,000 characters: no btree index takes it; it stopped the cursor there.
    await imap.append(SENDER, PW, mail({ from: 'later@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: `<${'x'.repeat(6000)}@lead.example>`, inReplyTo: sent.get('later@lead.example') }, 'Actually, tell me more.'));
    // A copy of our own message in the inbox (a Bcc to self): not the lead's answer.
    const own = sent.get('poll@lead.example')!;
    await imap.append(SENDER, PW, mail({ from: SENDER, to: 'poll@lead.example', subject: 'Quick question', messageId: own }, 'Hi, just checking in.'));
    // The account's user writing in the lead's thread (a manual follow-up, Bcc to self): no answer of the lead's.
    await imap.append(SENDER, PW, mail({ from: `Alice <${SENDER.toUpperCase()}>`, to: 'poll@lead.example', subject: 'Re: Quick question', messageId: '<manual-1@acme.example>', inReplyTo: sent.get('poll@lead.example') }, 'Hi, just bumping this: are you interested in a quick call next week?'));
    // Two senders' mail reusing one Message-ID: both are answers.
    await imap.append(SENDER, PW, mail({ from: 'restart@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<same-id@mail.example>', inReplyTo: sent.get('restart@lead.example') }, 'Yes, send the deck.'));
    await imap.append(SENDER, PW, mail({ from: 'away@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<same-id@mail.example>', inReplyTo: sent.get('away@lead.example') }, 'Back now. Not interested, thanks.'));
    // A reply without a Message-ID.
    await imap.append(SENDER, PW, ['From: later@lead.example', `To: ${SENDER}`, 'Subject: Re: Quick question', `In-Reply-To: ${sent.get('later@lead.example')}`, '', 'One more question: what does it cost?', ''].join('\r\n'));
    const newest = await imap.lastUid(SENDER, PW);
    await watcher({ useIdle: false }).start();
    const cursor = async () => Number((await db.query(`select last_uid from mailbox_watches`)).rows[0].last_uid);
    await waitFor('the cursor past all of them', async () => (await cursor()) === newest);
    assert.equal(await repliesOf('later@lead.example'), before.later + 2, 'the long-id reply and the id-less one are both recorded');
    assert.equal(await repliesOf('poll@lead.example'), before.poll, 'our own message is no reply');
    assert.equal((await stored(own)).length, 0);
    assert.equal((await stored('<manual-1@acme.example>')).length, 0, "the account user's own message in the thread is no reply");
    assert.deepEqual((await stored('<same-id@mail.example>')).map((r: { from_email: string }) => r.from_email), ['restart@lead.example', 'away@lead.example']);
    const inbound = Number((await db.query(`select count(*) from inbound_messages`)).rows[0].count);

    // The mailbox is read again from the start, as after a UIDVALIDITY change: nothing twice,
    // the mail without a Message-ID included (it is told by its sender, arrival and bytes).
    for (const w of watchers.splice(0)) await w.stop();
    await db.query(`update mailbox_watches set uid_validity = 1, last_uid = 0`);
    await watcher({ useIdle: false }).start();
    await waitFor('the mailbox read again', async () => Number((await db.query(`select uid_validity from mailbox_watches`)).rows[0].uid_validity) !== 1 && (await cursor()) === newest);
    assert.equal(Number((await db.query(`select count(*) from inbound_messages`)).rows[0].count), inbound, 'nothing stored twice');
    assert.equal(await repliesOf('later@lead.example'), before.later + 2);
    for (const w of watchers.splice(0)) await w.stop();
  });

  it('a truncated message whose text lies past the limit (an attachment first) is no reply: left unclassified', async () => {
    const limit = 64 * 1024;
    const attachmentFirst = [
      'From: poll@lead.example',
      `To: ${SENDER}`,
      'Subject: Re: Quick question',
      'Message-ID: <attachment-first@lead.example>',
      `In-Reply-To: ${sent.get('poll@lead.example')}`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="mix"',
      '',
      '--mix',
      'Content-Type: application/pdf; name="contract.pdf"',
      'Content-Transfer-Encoding: base64',
      '',
      randomBytes(150 * 1024).toString('base64').replace(/.{76}/g, '$&\r\n'),
      '--mix',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'Please unsubscribe me.',
      '--mix--',
      '',
    ].join('\r\n');
    await imap.append(SENDER, PW, attachmentFirst);
    const newest = await imap.lastUid(SENDER, PW);
    const w = new MailboxWatcher(app.deps, () => app.services().inbound, { pollIntervalMs: 300, useIdle: false, tickMs: 300, leaseMs: 3_000, maxMessageBytes: limit });
    watchers.push(w);
    await w.start();
    await waitFor('the cursor past it', async () => Number((await db.query(`select last_uid from mailbox_watches`)).rows[0].last_uid) === newest);
    const rows = (await db.query(`select kind from inbound_messages where message_id_header = '<attachment-first@lead.example>'`)).rows;
    assert.deepEqual(rows, [{ kind: 'unclassified' }]);
    assert.ok(!(await replies()).some((r) => r.email === 'poll@lead.example' && r.classification === 'interested' && r.threadSnippet === ''));
    for (const x of watchers.splice(0)) await x.stop();
  });

  it('GET /v1/replies: filters, paging, X-Total-Count, and its errors', async () => {
    const all = await app.request('GET', '/v1/replies', { key });
    assert.equal(all.status, 200);
    const total = Number(all.headers.get('x-total-count'));
    assert.equal(total, all.body.length);
    const sorted = [...all.body].sort((a: { receivedAt: string }, b: { receivedAt: string }) => b.receivedAt.localeCompare(a.receivedAt));
    assert.deepEqual(all.body.map((r: { id: string }) => r.id), sorted.map((r: { id: string }) => r.id));
    // The spec's fields, and the dashboard's extension (who has it: docs/dashboard.md).
    assert.deepEqual(Object.keys(all.body[0]).sort(), [
      'assignedTo',
      'campaignId',
      'classification',
      'classifierClassification',
      'decidedBy',
      'email',
      'forwardedAt',
      'id',
      'receivedAt',
      'reclassifiedAt',
      'reclassifiedBy',
      'threadSnippet',
    ]);
    assert.deepEqual([all.body[0].forwardedAt, all.body[0].assignedTo], [null, []]);
    // Nobody changed it: the classifier's decision is the classification.
    assert.deepEqual([all.body[0].classifierClassification, all.body[0].reclassifiedAt, all.body[0].reclassifiedBy], [all.body[0].classification, null, null]);
    const interested = await app.request('GET', '/v1/replies?classification=interested&classification=bounce', { key });
    assert.ok(interested.body.length >= 3 && interested.body.every((r: { classification: string }) => ['interested', 'bounce'].includes(r.classification)));
    const page = await app.request('GET', `/v1/replies?campaignId=${campaignId}&pageSize=2&page=2`, { key });
    assert.equal(page.body.length, 2);
    assert.deepEqual(page.body.map((r: { id: string }) => r.id), all.body.slice(2, 4).map((r: { id: string }) => r.id));
    assert.equal(page.headers.get('x-total-count'), String(total));
    const future = await app.request('GET', `/v1/replies?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`, { key });
    assert.deepEqual(future.body, []);
    for (const q of ['classification=happy', 'since=yesterday', 'pageSize=501', 'page=0', 'foo=1']) {
      const bad = await app.request('GET', `/v1/replies?${q}`, { key });
      assert.equal(bad.status, 400, q);
      assert.equal(bad.body.error.code, 'invalid_request');
    }
    const missing = await app.request('GET', '/v1/replies?campaignId=cmp_nope', { key });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'campaign_not_found');
    const other = await seedWorkspace(app);
    assert.deepEqual((await app.request('GET', '/v1/replies', { key: other.adminKey })).body, []);
    assert.equal((await app.request('GET', `/v1/replies?campaignId=${campaignId}`, { key: other.adminKey })).status, 404);
  });

  /** Enrolls new leads into the running campaign and sends them their first step. */
  async function sendTo(...emails: string[]) {
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: emails.map((email) => ({ email })) } })).status, 200);
    const before = sink.received.length;
    await dispatcher.runRound();
    for (const r of sink.received.slice(before)) sent.set(r.to[0], r.parsed.messageId!);
    for (const e of emails) assert.ok(sent.has(e), e);
  }

  it('a session that loses its lease ends; once the lease is this worker\'s again, a new one reads on from the committed cursor', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    await sendTo('lease1@lead.example', 'lease2@lead.example');
    // While it ingests its first message, this worker is taken for dead: the workers' registry
    // frees its leases (workers/registry.ts). Nobody else is running, so the lease comes back.
    let freed = false;
    const w = new MailboxWatcher(
      app.deps,
      () => {
        const s = app.services().inbound;
        const ingest = s.ingest.bind(s);
        s.ingest = async (m: Parameters<typeof ingest>[0]) => {
          if (!freed) {
            freed = true;
            await db.query(`update mailbox_watches set lease_owner = null, lease_until = null`);
          }
          return ingest(m);
        };
        return s;
      },
      { pollIntervalMs: 300, useIdle: false, tickMs: 300, leaseMs: 3_000 },
    );
    watchers.push(w);
    await w.start();
    await imap.append(SENDER, PW, mail({ from: 'lease1@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<lease-r1@lead.example>', inReplyTo: sent.get('lease1@lead.example') }, 'Yes, interested. Call me on Monday.'));
    // The session that lost the lease did not record it; the next one does, and what follows.
    await waitFor('the reply the lost lease interrupted', async () => (await replies()).find((x) => x.email === 'lease1@lead.example'));
    assert.ok(freed);
    await imap.append(SENDER, PW, mail({ from: 'lease2@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<lease-r2@lead.example>', inReplyTo: sent.get('lease2@lead.example') }, 'Not interested, thanks.'));
    await waitFor('the next reply', async () => (await replies()).find((x) => x.email === 'lease2@lead.example'));
    assert.equal((await replies()).filter((x) => x.email === 'lease1@lead.example').length, 1, 'recorded once');
  });

  it('a lease round meeting a message being ingested renews the lease and keeps the session: a busy mailbox is not logged out and in again', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    await sendTo('busy1@lead.example', 'busy2@lead.example');
    // Lease rounds run only when the test calls them.
    const w = new MailboxWatcher(app.deps, () => app.services().inbound, { pollIntervalMs: 300, useIdle: false, tickMs: 3_600_000, leaseMs: 60_000 });
    watchers.push(w);
    await w.start();
    await imap.append(SENDER, PW, mail({ from: 'busy1@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<busy-r1@lead.example>', inReplyTo: sent.get('busy1@lead.example') }, 'Yes, send me the deck.'));
    await waitFor('the first reply', async () => (await replies()).find((x) => x.email === 'busy1@lead.example'));
    const ended = imap.sessionBytesOut().length;
    const {
      rows: [watch],
    } = await db.query(`select id, lease_until from mailbox_watches where sender_account_id = (select id from sender_accounts where email = $1)`, [SENDER]);
    // An ingest's transaction moves the cursor first and holds the watch's row until it commits:
    // this transaction stands in for one while a lease round runs.
    await db.query('begin');
    let round: Promise<void> | undefined;
    try {
      await db.query('select 1 from mailbox_watches where id = $1 for update', [watch.id]);
      const me = (await db.query('select pg_backend_pid() as pid')).rows[0].pid;
      let roundDone = false;
      round = w.tick().finally(() => (roundDone = true));
      // Any backend blocked by this transaction (the round's, or the session's own write of the
      // row), whatever its statement's text; the round may also wait for a pooled connection.
      await waitFor('the lease round to wait for the row, or to end', async () =>
        roundDone || (await db.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [me])).rows.length > 0,
      );
    } finally {
      // Never left holding the row: every later test of this file writes it.
      await db.query('commit');
    }
    await round;
    // A second round, which (before 2026-11-29) started a new session for the mailbox the first
    // had taken for lost.
    await w.tick();
    const after = (await db.query('select lease_owner, lease_until from mailbox_watches where id = $1', [watch.id])).rows[0];
    assert.equal(after.lease_owner, w.owner);
    assert.ok(after.lease_until > watch.lease_until, 'the lease was renewed');
    await imap.append(SENDER, PW, mail({ from: 'busy2@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<busy-r2@lead.example>', inReplyTo: sent.get('busy2@lead.example') }, 'Not now, thanks.'));
    await waitFor('the next reply', async () => (await replies()).find((x) => x.email === 'busy2@lead.example'));
    // The append's own session is the one that may have ended since (its log line may still be
    // on its way); the watcher's went on.
    assert.ok(imap.sessionBytesOut().length - ended <= 1, `IMAP sessions ended: ${imap.sessionBytesOut().length - ended} (the append's only, at most)`);
  });

  it('mail that arrived before our first message to its sender answers nothing of ours, even read again; mail after it does', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    // The watch began two hours ago, so mail of half an hour ago is for it to read.
    await db.query(`update mailbox_watches set since = now() - interval '2 hours'`);
    await imap.append(SENDER, PW, mail({ from: 'early@lead.example', to: SENDER, subject: 'A question', messageId: '<early-1@lead.example>' }, 'Yes, I am interested. Call me.'), new Date(Date.now() - 30 * 60_000));
    await sendTo('early@lead.example');
    // Read again from the start, as after a new UIDVALIDITY (or a backlog read after an outage).
    await db.query(`update mailbox_watches set uid_validity = 1, last_uid = 0`);
    await watcher({ useIdle: false }).start();
    const last = await imap.lastUid(SENDER, PW);
    await waitFor('the mailbox read again to its end', async () => Number((await db.query(`select last_uid from mailbox_watches`)).rows[0].last_uid) >= last);
    assert.ok(!(await replies()).some((r) => r.email === 'early@lead.example'), 'the earlier mail is no reply');
    assert.equal(await leadStatus('early@lead.example'), 'active');
    await imap.append(SENDER, PW, mail({ from: 'early@lead.example', to: SENDER, subject: 'Quick question', messageId: '<early-2@lead.example>' }, 'Yes, interested. Call me tomorrow.'));
    const r = await waitFor('the reply after our message', async () => (await replies()).find((x) => x.email === 'early@lead.example'));
    assert.equal(r.classification, 'interested');
    assert.equal(await leadStatus('early@lead.example'), 'replied');
  });

  it('two sender accounts watching one mailbox (aliases of one user) record a reply once: one reply, one event', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    await sendTo('alias@lead.example');
    const workspaceId = (await db.query(`select workspace_id from campaigns where id = $1`, [campaignId])).rows[0].workspace_id;
    // The second account's IMAP is the first one's mailbox.
    await app.services().senders.add({ workspaceId, email: 'sales@acme.example', name: 'Sales', smtpUrl: sink.url(SENDER, 'smtp-pw'), imapUrl: imap.url(SENDER, PW) });
    // Both in IDLE: the server tells both sessions of the new mail at once.
    const a = watcher();
    const b = watcher();
    await a.start();
    await b.start();
    await imap.append(SENDER, PW, mail({ from: 'alias@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<alias-1@lead.example>', inReplyTo: sent.get('alias@lead.example') }, 'Yes, interested. Call me on Monday.'));
    const last = await imap.lastUid(SENDER, PW);
    await waitFor('both watches past the reply', async () => {
      const { rows } = await db.query(`select last_uid from mailbox_watches where sender_account_id is not null`);
      return rows.length === 2 && rows.every((r) => Number(r.last_uid) >= last);
    });
    assert.equal((await replies()).filter((r) => r.email === 'alias@lead.example').length, 1);
    const ev = await db.query(`select count(*)::int as n from events where type = 'reply.received' and data->>'email' = 'alias@lead.example'`);
    assert.equal(ev.rows[0].n, 1);
    assert.equal((await db.query(`select count(*)::int as n from inbound_messages where message_id_header = '<alias-1@lead.example>'`)).rows[0].n, 1);
  });

  it('an answer or a bounce naming a copy sent before a crash finds its message by the id in its Message-ID: the re-send pending, or recorded under another header', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    // crash1: the copy the lead answered went out; the re-send, through another account (so
    // another domain in its Message-ID), is the one recorded.
    await sendTo('crash1@lead.example');
    const first = sent.get('crash1@lead.example')!;
    assert.match(first, /^<msg_[a-z0-9]+\.[0-9a-f]{12}@acme\.example>$/);
    await db.query(`update outbound_messages set message_id_header = replace(message_id_header, '@acme.example', '@other.example') where message_id_header = $1`, [first]);
    // crash2 and crash3: a copy went out and the worker was killed before its outcome was
    // recorded, so the message waits queued for its re-send, no header stored.
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: [{ email: 'crash2@lead.example' }, { email: 'crash3@lead.example' }] } })).status, 200);
    const queued = async (email: string) =>
      (await db.query(`select id, state, message_id_header from outbound_messages where lower(to_email) = $1 and step_index = 0`, [email])).rows[0] as { id: string; state: string; message_id_header: string | null };
    const copyOf = async (email: string) => {
      const m = await queued(email);
      assert.deepEqual([m.state, m.message_id_header], ['queued', null]);
      return campaignMessageId(app.deps.crypto, m.id, 'acme.example');
    };
    const second = await copyOf('crash2@lead.example');
    const third = await copyOf('crash3@lead.example');

    await watcher({ useIdle: false }).start();
    await imap.append(SENDER, PW, mail({ from: 'crash1@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<c1@lead.example>', inReplyTo: first }, 'Not interested, thanks.'));
    await imap.append(SENDER, PW, mail({ from: 'crash2@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<c2@lead.example>', inReplyTo: second }, 'Please remove me from your list.'));
    await imap.append(SENDER, PW, dsn({ to: SENDER, messageId: '<dsn-c3@mx.lead.example>', original: third, recipient: 'crash3@lead.example', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' }));
    await waitFor('the three answers', async () => (await replies()).filter((r) => /^crash[123]@/.test(r.email)).length === 3);
    assert.equal(await leadStatus('crash1@lead.example'), 'replied');
    assert.equal(await leadStatus('crash2@lead.example'), 'unsubscribed');
    // The answered copy went out: it is recorded sent, with the header the answer named, and the
    // lead's follow-up is what the unsubscribe cancels.
    const m2 = await queued('crash2@lead.example');
    assert.deepEqual([m2.state, m2.message_id_header], ['sent', second]);
    const sentEvent = await db.query(`select data from events where type = 'message.sent' and data->>'messageId' = $1`, [m2.id]);
    assert.equal(sentEvent.rows.length, 1);
    assert.equal(sentEvent.rows[0].data.messageIdHeader, second);
    const followUp = await db.query(`select state from outbound_messages where lower(to_email) = 'crash2@lead.example' and step_index = 1`);
    assert.deepEqual(followUp.rows.map((r) => r.state), ['cancelled']);
    assert.equal((await db.query(`select reason from suppressions where email_key = 'crash3@lead.example'`)).rows[0]?.reason, 'hard_bounce');
    const m3 = await queued('crash3@lead.example');
    assert.deepEqual([m3.state, m3.message_id_header], ['bounced', third]);
    // Its message.bounced names the copy the report named, as message.sent does (it was recorded
    // sent first): the header the message was matched by when none was stored yet.
    const bouncedEvent = await db.query(`select data from events where type = 'message.bounced' and data->>'messageId' = $1`, [m3.id]);
    assert.equal(bouncedEvent.rows.length, 1);
    assert.equal(bouncedEvent.rows[0].data.messageIdHeader, third);
    // Nothing of either goes again.
    const before = sink.received.length;
    await dispatcher.runRound();
    assert.deepEqual(sink.received.slice(before).filter((r) => r.to.some((t) => /^crash[23]@/.test(t))).map((r) => r.to), []);
    assert.equal(await leadStatus('crash3@lead.example'), 'bounced');
  });

  it("an answer naming a copy whose outcome was never recorded counts it sent: the campaign's stats, an out-of-office postpones the follow-up (not the copy), a claim of it is taken from its worker", async () => {
    for (const w of watchers.splice(0)) await w.stop();
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: [{ email: 'crash5@lead.example' }, { email: 'crash6@lead.example' }] } })).status, 200);
    const row = async (email: string, step = 0) =>
      (await db.query(`select id, state, claimed_by, due_at, sent_at, subject from outbound_messages where lower(to_email) = $1 and step_index = $2`, [email, step])).rows[0];
    const m5 = await row('crash5@lead.example');
    const m6 = await row('crash6@lead.example');
    // crash6's re-send is claimed by a live worker (its lease runs), its data not yet ended.
    await db.query(
      `update outbound_messages set state = 'sending', claimed_by = 'w-live', lease_until = now() + interval '5 minutes',
              sender_account_id = (select id from sender_accounts where email = $2), pool_id = (select sender_pool_id from campaigns where id = $3)
        where id = $1`,
      [m6.id, SENDER, campaignId],
    );
    const statsBefore = await stats();
    await watcher({ useIdle: false }).start();
    const returns = new Date(Date.now() + 9 * 86_400_000);
    const returnDay = returns.toISOString().slice(0, 10);
    await imap.append(
      SENDER,
      PW,
      mail(
        { from: 'crash5@lead.example', to: SENDER, subject: 'Automatic reply: Quick question', messageId: '<c5@lead.example>', inReplyTo: campaignMessageId(app.deps.crypto, m5.id, 'acme.example'), extra: 'Auto-Submitted: auto-replied' },
        `I am out of the office until ${returnDay} with limited access to email.`,
      ),
    );
    await imap.append(SENDER, PW, mail({ from: 'crash6@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<c6@lead.example>', inReplyTo: campaignMessageId(app.deps.crypto, m6.id, 'acme.example') }, 'Not interested, thanks.'));
    await waitFor('both answers', async () => (await replies()).filter((r) => /^crash[56]@/.test(r.email)).length === 2);

    const after5 = await row('crash5@lead.example');
    assert.equal(after5.state, 'sent', 'the copy the out-of-office answered went out');
    assert.equal(after5.subject, 'Quick question');
    assert.equal(await leadStatus('crash5@lead.example'), 'active');
    const next5 = await row('crash5@lead.example', 1);
    assert.ok(next5, 'its follow-up is scheduled');
    assert.ok(next5.due_at.getTime() >= new Date(`${returnDay}T00:00:00Z`).getTime() - 14 * 3_600_000, `the follow-up waits for the return (${next5.due_at.toISOString()})`);

    const after6 = await row('crash6@lead.example');
    assert.deepEqual([after6.state, after6.claimed_by], ['sent', 'answered-copy']);
    // The live worker's guard before the end of its data now refuses: no second copy.
    const guard = await db.query(`select m.id from outbound_messages m where m.id = $2 and ${GUARD_PASSES.replace('?', '$1')}`, ['w-live', m6.id]);
    assert.equal(guard.rows.length, 0);
    assert.equal(await leadStatus('crash6@lead.example'), 'replied');

    const statsAfter = await stats();
    assert.equal(statsAfter.sent - statsBefore.sent, 2, 'both copies count as sent');
    assert.equal(statsAfter.delivered - statsBefore.delivered, 2);
    assert.equal(statsAfter.queued - statsBefore.queued, -2);
    assert.equal(statsAfter.scheduled - statsBefore.scheduled, 1, "crash5's follow-up");
    const counted = await db.query(
      `select count(*) filter (where state = 'queued' or state = 'sending')::int as queued, count(*) filter (where state = 'scheduled')::int as scheduled,
              count(*) filter (where sent_at is not null)::int as sent
         from outbound_messages where campaign_id = $1`,
      [campaignId],
    );
    assert.deepEqual([statsAfter.queued, statsAfter.scheduled, statsAfter.sent], [counted.rows[0].queued, counted.rows[0].scheduled, counted.rows[0].sent], 'the counters equal the counts');
    // Nothing of either goes again now.
    const before = sink.received.length;
    await dispatcher.runRound();
    assert.deepEqual(sink.received.slice(before).filter((r) => r.to.some((t) => /^crash[56]@/.test(t))).map((r) => r.to), []);
  });

  it('a copy recorded sent by an answer is the account\'s whose mailbox the answer came to (its domain the Message-ID\'s), not the re-send claim\'s: the follow-up goes from the address the lead heard from', async () => {
    for (const w of watchers.splice(0)) await w.stop();
    const workspaceId = (await db.query(`select workspace_id from campaigns where id = $1`, [campaignId])).rows[0].workspace_id;
    // Another account of another domain, which a re-send was claimed through.
    const other = await app.services().senders.add({ workspaceId, email: 'bob@other.example', name: 'Bob', smtpUrl: sink.url(SENDER, 'smtp-pw') });
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: [{ email: 'crash7@lead.example' }, { email: 'crash8@lead.example' }] } })).status, 200);
    const row = async (email: string) =>
      (await db.query(`select m.id, m.state, m.sender_account_id, e.sender_account_id as sticky from outbound_messages m join enrollments e on e.id = m.enrollment_id where lower(m.to_email) = $1 and m.step_index = 0`, [email])).rows[0];
    const m7 = await row('crash7@lead.example');
    const m8 = await row('crash8@lead.example');
    // crash7 waits queued (the killed worker's claim cleared, no account); crash8's re-send is
    // claimed through the other account.
    assert.deepEqual([m7.state, m7.sender_account_id], ['queued', null]);
    await db.query(`update outbound_messages set state = 'sending', claimed_by = 'w-live', lease_until = now() + interval '5 minutes', sender_account_id = $2 where id = $1`, [m8.id, other.id]);
    await watcher({ useIdle: false }).start();
    // Both copies went out from alice@acme.example: out-of-office answers come to her mailbox.
    for (const [n, m] of [[7, m7], [8, m8]] as const) {
      await imap.append(
        SENDER,
        PW,
        mail(
          { from: `crash${n}@lead.example`, to: SENDER, subject: 'Automatic reply: Quick question', messageId: `<c${n}@lead.example>`, inReplyTo: campaignMessageId(app.deps.crypto, m.id, 'acme.example'), extra: 'Auto-Submitted: auto-replied' },
          'I am out of the office until next week with limited access to email.',
        ),
      );
    }
    await waitFor('both answers', async () => (await replies()).filter((r) => /^crash[78]@/.test(r.email)).length === 2);
    // The accounts reading that mailbox at acme.example (alice, and sales whose IMAP is hers).
    const mailboxAccounts = (await db.query(`select id from sender_accounts where email like '%@acme.example'`)).rows.map((r) => r.id as string);
    for (const email of ['crash7@lead.example', 'crash8@lead.example']) {
      const after = await row(email);
      assert.equal(after.state, 'sent');
      assert.ok(mailboxAccounts.includes(after.sender_account_id), `${email}: sent through ${after.sender_account_id}`);
      assert.equal(after.sticky, after.sender_account_id, `${email}: the follow-up goes through the same account`);
    }
  });

  it("an answer naming a copy being sent again locks that message before its enrollment, as the worker writing the re-send's outcome does (no deadlock with it)", async () => {
    for (const w of watchers.splice(0)) await w.stop();
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: [{ email: 'crash9@lead.example' }] } })).status, 200);
    const m = (await db.query(`select id, enrollment_id from outbound_messages where lower(to_email) = 'crash9@lead.example' and step_index = 0`)).rows[0];
    await db.query(`update outbound_messages set state = 'sending', claimed_by = 'w-live', lease_until = now() + interval '5 minutes' where id = $1`, [m.id]);
    // The re-send's outcome being written: its statement holds the message (and would take the
    // enrollment next).
    const worker = new pg.Client({ connectionString: app.databaseUrl });
    await worker.connect();
    try {
      await worker.query('begin');
      await worker.query(`select 1 from outbound_messages where id = $1 for update`, [m.id]);
      const pid = (await worker.query('select pg_backend_pid() as pid')).rows[0].pid;
      await watcher({ useIdle: false }).start();
      await imap.append(SENDER, PW, mail({ from: 'crash9@lead.example', to: SENDER, subject: 'Re: Quick question', messageId: '<c9@lead.example>', inReplyTo: campaignMessageId(app.deps.crypto, m.id, 'acme.example') }, 'Not interested, thanks.'));
      await waitFor('the answer waiting for the message', async () => (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and pid <> $1`, [pid])).rows.length > 0);
      // It waits holding nothing the worker's statement needs next: the enrollment is free.
      let error: string | null = null;
      try {
        await db.query(`select 1 from enrollments where id = $1 for no key update nowait`, [m.enrollment_id]);
      } catch (err) {
        error = `${(err as { code?: string }).code}: ${(err as Error).message}`;
      }
      assert.equal(error, null);
    } finally {
      await worker.query('rollback');
      await worker.end();
    }
    await waitFor('the answer', async () => (await replies()).some((r) => r.email === 'crash9@lead.example'));
    assert.equal((await db.query(`select state from outbound_messages where id = $1`, [m.id])).rows[0].state, 'sent');
  });

  it("a hard bounce of a copy whose outcome was never recorded takes the lead's enrollment before the suppression, as the other writers do (no deadlock with an unsubscribe)", async () => {
    for (const w of watchers.splice(0)) await w.stop();
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: [{ email: 'crash4@lead.example' }] } })).status, 200);
    const m = (await db.query(`select id, workspace_id, lead_id, state from outbound_messages where lower(to_email) = 'crash4@lead.example' and step_index = 0`)).rows[0];
    assert.equal(m.state, 'queued');
    const copy = campaignMessageId(app.deps.crypto, m.id, 'acme.example');
    // An unsubscribe of the lead (the link's order: the lead's enrollments, then the suppression),
    // its first step taken; it detects a lock cycle first.
    const other = new pg.Client({ connectionString: app.databaseUrl });
    await other.connect();
    try {
      await other.query(`set deadlock_timeout = '20ms'`);
      await other.query('begin');
      await other.query(`select id from enrollments where lead_id = $1 order by id for update`, [m.lead_id]);
      await watcher({ useIdle: false }).start();
      await imap.append(SENDER, PW, dsn({ to: SENDER, messageId: '<dsn-c4@mx.lead.example>', original: copy, recipient: 'crash4@lead.example', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' }));
      const pid = (await other.query('select pg_backend_pid() as pid')).rows[0].pid;
      await waitFor('the bounce waiting for the unsubscribe', async () => (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and pid <> $1`, [pid])).rows.length > 0);
      let error: string | null = null;
      try {
        await other.query(`insert into suppressions (workspace_id, email_key, email, reason, source, created_at) values ($1, 'crash4@lead.example', 'crash4@lead.example', 'unsubscribe', $2, now()) on conflict do nothing`, [m.workspace_id, m.id]);
        await other.query('commit');
      } catch (err) {
        error = `${(err as { code?: string }).code}: ${(err as Error).message}`;
        await other.query('rollback');
      }
      assert.equal(error, null);
      await waitFor('the bounce', async () => (await replies()).some((r) => r.email === 'crash4@lead.example'));
    } finally {
      await other.end();
    }
  });
});

describe('inbound: FETCH batches of bounded bytes', () => {
  it('each message counts up to the size limit; a batch holds at most 8 MB of them, and at least one', () => {
    const MB = 1024 * 1024;
    assert.deepEqual(fetchBatches([], 2 * MB), []);
    assert.deepEqual(fetchBatches([{ uid: 1, size: 100 }, { uid: 2, size: 200 }, { uid: 3, size: 300 }], 2 * MB), [[1, 2, 3]]);
    // Four of 2 MB (a 30 MB one counts as its first 2 MB) fill a batch; the fifth starts the next.
    assert.deepEqual(fetchBatches([1, 2, 3, 4, 5].map((uid) => ({ uid, size: uid === 2 ? 30 * MB : 2 * MB })), 2 * MB), [[1, 2, 3, 4], [5]]);
    // A limit above the batch size: one message per batch.
    assert.deepEqual(fetchBatches([{ uid: 7, size: 20 * MB }, { uid: 9, size: 20 * MB }], 16 * MB), [[7], [9]]);
  });

  it("a database failure is told from the mail server's by its SQLSTATE", () => {
    assert.equal(isDatabaseError({ code: '54000', message: 'index row size 6024 exceeds btree version 4 maximum 2704' }), true);
    assert.equal(isDatabaseError({ code: '57P01' }), true);
    for (const code of ['EPIPE', 'ECONNRESET', 'ETIMEDOUT', 'NoConnection', undefined]) assert.equal(isDatabaseError({ code }), false, String(code));
  });
});
