import assert from 'node:assert/strict';
import { waitFor } from '../support/wait.ts';
import { holdMailboxHealth } from '../support/mailbox-health.ts';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { ImapTestServer } from '../support/dovecot.ts';
import { MailboxWatcher } from '../../src/modules/inbound/watcher.ts';
import { assertThreadCountsExact } from '../support/thread-counts.ts';
import { addAnswer } from '../../src/modules/sdrs/thread-repository.ts';
import { transaction } from '../../src/db/transaction.ts';


describe('SDR desk mail: send-manual through the SDR mailbox, answers joining the thread', function () {
  this.timeout(60_000);
  const sink = new SmtpSink();
  const imap = new ImapTestServer();
  let app: TestApp;
  let db: pg.Client;
  let watcher: MailboxWatcher;
  const SDR = 'sam@acme.example';
  let adminKey: string;
  let sdrKey: string;
  let workspaceId: string;
  let threadId: string;

  before(async () => {
    await sink.start();
    await imap.start();
    sink.users.set(SDR, 'pw');
    imap.addUser(SDR, 'pw');
    app = await startTestApp();
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    const seeded = await seedWorkspace(app);
    adminKey = seeded.adminKey;
    workspaceId = seeded.workspace.id;
    const rep = await seedSdr(app, workspaceId, 'Sam Rep', SDR);
    sdrKey = rep.sdrKey;
    const connected = await app.services().sdrs.connectMail(rep.sdr.id, { smtpUrl: sink.url(SDR, 'pw'), imapUrl: imap.url(SDR, 'pw') });
    assert.equal(connected.mailbox.healthState, 'active');
    // A thread as assignment leaves it: a campaign, its lead, the prospect's first answer.
    const c = await app.request('POST', '/v1/campaigns', { key: adminKey, body: { name: 'Desk', sequenceSteps: [{ subject: 'Idea', bodyHtml: 'x' }] } });
    await app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key: adminKey, body: { leads: [{ email: 'pat@lead.example', firstName: 'Pat' }] } });
    const lead = (await db.query(`select id from leads where email_key = 'pat@lead.example'`)).rows[0].id;
    threadId = 'thr_desktest';
    await db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, lead_id, campaign_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, mail_thread_id, created_at, updated_at)
       values ($1, $2, $3, $4, $5, 'pat@lead.example', 'Pat', 'Re: Idea', 'new', 'B', 50, now(), '<p1@lead.example>', now(), now())`,
      [threadId, workspaceId, rep.sdr.id, lead, c.body.id],
    );
    await db.query(
      `insert into thread_messages (id, thread_id, direction, message_id_header, from_email, subject, body_text, at, created_at)
       values ('tmsg_first', $1, 'inbound', '<p1@lead.example>', 'pat@lead.example', 'Re: Idea', 'Interested, tell me more', now() - interval '1 minute', now())`,
      [threadId],
    );
    watcher = new MailboxWatcher(app.deps, () => app.services().inbound, { pollIntervalMs: 300, useIdle: false, tickMs: 300 });
    await watcher.start();
  });
  after(async () => {
    await watcher.stop();
    await db.end();
    await app.close();
    await imap.stop();
    await sink.stop();
  });

  const thread = async () => (await app.request('GET', `/v1/sdr/threads/${threadId}`, { key: sdrKey })).body.data;
  const send = (body: unknown, key = sdrKey, id = threadId) => app.request('POST', `/v1/sdr/threads/${id}/send-manual`, { key, body });

  it("sends through the SDR's own SMTP in the prospect's thread; the thread awaits a reply", async () => {
    const res = await send({ bodyText: 'Hi Pat,\nhere is more: https://acme.example/tour\nSam', cc: ['boss@acme.example'] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.data.messageId, /^msg_/);
    assert.equal(res.body.data.threadId, threadId);
    assert.equal(res.body.data.status, 'awaiting_reply');
    assert.equal(sink.received.length, 1);
    const m = sink.received[0];
    assert.equal(m.user, SDR);
    assert.deepEqual(m.to.sort(), ['boss@acme.example', 'pat@lead.example']);
    assert.equal(m.parsed.subject, 'Re: Idea');
    assert.equal(m.parsed.inReplyTo, '<p1@lead.example>');
    assert.match(m.parsed.text!, /here is more/);
    const t = await thread();
    assert.equal(t.status, 'awaiting_reply');
    assert.equal(t.messages.length, 2);
    assert.equal(t.messages[1].direction, 'outbound');
  });

  it("a copy of the SDR's own send in the mailbox (a Cc to self, sent mail filed in the inbox) is no answer of the prospect's", async () => {
    const ours = sink.received[0].parsed;
    // The copy as a server files it: our Message-ID and References, from the SDR.
    await imap.append(
      SDR,
      'pw',
      [`From: Sam Rep <${SDR}>`, 'To: pat@lead.example', `Cc: ${SDR}`, 'Subject: Re: Idea', `Date: ${new Date().toUTCString()}`, `Message-ID: ${ours.messageId}`, 'In-Reply-To: <p1@lead.example>', 'References: <p1@lead.example>', 'Content-Type: text/plain; charset=utf-8', '', 'Hi Pat, here is more.', ''].join('\r\n'),
    );
    // Another client's copy with a Message-ID of its own, still from the SDR.
    await imap.append(
      SDR,
      'pw',
      [`From: ${SDR}`, 'To: pat@lead.example', 'Subject: Re: Idea', `Date: ${new Date().toUTCString()}`, 'Message-ID: <self-copy-2@acme.example>', `In-Reply-To: ${ours.messageId}`, `References: <p1@lead.example> ${ours.messageId}`, 'Content-Type: text/plain; charset=utf-8', '', 'Following up on my note.', ''].join('\r\n'),
    );
    const last = await imap.lastUid(SDR, 'pw');
    await waitFor('the copies read', async () =>
      Number((await db.query(`select w.last_uid from mailbox_watches w join sdrs s on s.id = w.sdr_id where s.email = $1`, [SDR])).rows[0]?.last_uid ?? 0) >= last,
    );
    const t = await thread();
    assert.equal(t.status, 'awaiting_reply', 'still waiting for the prospect');
    assert.equal(t.messages.length, 2, 'no message added');
  });

  it("a prospect's answer in the SDR's mailbox joins the thread, makes it replied and ends its snooze; an out-of-office does neither", async () => {
    const ours = sink.received[0].parsed.messageId!;
    // The SDR snoozed the thread for a week: the desk's list hides it (snoozed=false).
    const until = new Date(Date.now() + 7 * 86_400_000).toISOString();
    assert.equal((await app.request('POST', `/v1/sdr/threads/${threadId}/snooze`, { key: sdrKey, body: { until } })).status, 200);
    const listed = async () => ((await app.request('GET', '/v1/sdr/inbox?snoozed=false', { key: sdrKey })).body.data.threads as { id: string }[]).some((x) => x.id === threadId);
    assert.equal(await listed(), false);
    await imap.append(
      SDR,
      'pw',
      [
        'From: pat@lead.example',
        `To: ${SDR}`,
        'Subject: Automatic reply: Re: Idea',
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <ooo1@lead.example>',
        `In-Reply-To: ${ours}`,
        'Auto-Submitted: auto-replied',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'I am out of the office until next week.',
        '',
      ].join('\r\n'),
    );
    await waitFor('the out-of-office in the thread', async () => (await thread()).messages.length === 3);
    assert.equal((await thread()).status, 'awaiting_reply');
    assert.ok((await thread()).snoozedUntil, 'an out-of-office is no answer: the snooze stays');
    await imap.append(
      SDR,
      'pw',
      [
        'From: Pat <pat@lead.example>',
        `To: ${SDR}`,
        'Subject: Re: Idea',
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <p2@lead.example>',
        `In-Reply-To: ${ours}`,
        `References: <p1@lead.example> ${ours}`,
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Great, Thursday at 10 works for me.',
        '',
      ].join('\r\n'),
    );
    const t = await waitFor('the answer in the thread', async () => {
      const x = await thread();
      return x.messages.length === 4 && x;
    });
    assert.equal(t.status, 'replied');
    // The prospect answered: the thread is back in the desk's list, not hidden until the snooze ends.
    assert.equal(t.snoozedUntil, null);
    assert.equal(await listed(), true);
    // (INTERNALDATE has whole seconds, so the answer may sort next to our message of the same second.)
    const answer = t.messages.find((m: Record<string, unknown>) => m.direction === 'inbound' && /Thursday at 10/.test(JSON.stringify(m)));
    assert.ok(answer, JSON.stringify(t.messages));
    const status = await app.request('GET', '/v1/sdr/mail/status', { key: sdrKey });
    assert.equal(status.body.data.connected, true);
    assert.equal(status.body.data.healthState, 'active');
    assert.ok(status.body.data.lastSyncedAt);
  });

  it("an answer read late never moves the thread's last message back before the SDR's later send", async () => {
    await db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, lead_id, campaign_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, mail_thread_id, created_at, updated_at)
       select 'thr_late', workspace_id, sdr_id, lead_id, campaign_id, contact_email, contact_name, subject, 'awaiting_reply', category, priority_score, '2026-06-01T10:10:00Z', '<late@lead.example>', '2026-06-01T10:00:00Z', now()
         from prospect_threads where id = $1`,
      [threadId],
    );
    // The prospect wrote at 10:05; the SDR, not having seen it, sent at 10:10; the mailbox was read at 10:20.
    await transaction(app.deps.orm.em.fork(), (em) =>
      addAnswer(em, 'thr_late', { inboundMessageId: null as unknown as string, messageIdHeader: '<late-1@lead.example>', from: 'pat@lead.example', subject: 'Re: Idea', bodyText: 'Yes', receivedAt: new Date('2026-06-01T10:05:00Z'), outOfOffice: false }, new Date('2026-06-01T10:20:00Z')),
    );
    const { rows } = await db.query(`select status, last_message_at from prospect_threads where id = 'thr_late'`);
    assert.equal(rows[0].status, 'replied');
    assert.equal(rows[0].last_message_at.toISOString(), '2026-06-01T10:10:00.000Z');
    await db.query(`delete from thread_messages where thread_id = 'thr_late'`);
    await db.query(`delete from prospect_threads where id = 'thr_late'`);
  });

  it("a send from the desk answers the prospect's last message, not an auto-reply that came after it (In-Reply-To, References)", async () => {
    const ours = sink.received[0].parsed.messageId!;
    const inThread = async (id: string) => ((await thread()).messages as Array<{ messageIdHeader: string | null }>).some((m) => m.messageIdHeader === id);
    // The prospect answers; then an auto-reply arrives in the same thread, later (dated ahead of
    // the thread's other messages, so their order does not hang on whole-second arrival times).
    await imap.append(
      SDR,
      'pw',
      ['From: Pat <pat@lead.example>', `To: ${SDR}`, 'Subject: Re: Idea', `Date: ${new Date().toUTCString()}`, 'Message-ID: <p3@lead.example>', `In-Reply-To: ${ours}`, `References: <p1@lead.example> ${ours}`, 'Content-Type: text/plain; charset=utf-8', '', 'Could you send the pricing sheet too?', ''].join('\r\n'),
      new Date(Date.now() + 60_000),
    );
    await waitFor('the answer in the thread', () => inThread('<p3@lead.example>'));
    await imap.append(
      SDR,
      'pw',
      [
        'From: Pat <pat@lead.example>',
        `To: ${SDR}`,
        'Subject: Automatic reply: Re: Idea',
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <ooo2@lead.example>',
        'In-Reply-To: <p3@lead.example>',
        `References: <p1@lead.example> ${ours} <p3@lead.example>`,
        'Auto-Submitted: auto-replied',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'I am out of the office until Monday with limited access to email.',
        '',
      ].join('\r\n'),
      new Date(Date.now() + 120_000),
    );
    await waitFor('the auto-reply in the thread', () => inThread('<ooo2@lead.example>'));
    const before = sink.received.length;
    const res = await send({ bodyText: 'Here is the pricing sheet, Pat.\nSam' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const m = sink.received[before].parsed;
    assert.equal(m.inReplyTo, '<p3@lead.example>');
    const refs = ([] as string[]).concat(m.references ?? []);
    assert.equal(refs.at(-1), '<p3@lead.example>');
    assert.ok(!refs.includes('<ooo2@lead.example>'), refs.join(' '));
    const recorded = await db.query(`select in_reply_to from outbound_messages where message_id_header = $1`, [m.messageId]);
    assert.equal(recorded.rows[0].in_reply_to, '<p3@lead.example>', 'the campaign record of the send says the same');
  });

  it("a 421 from the SDR's SMTP server makes the mailbox rate_limited; the next send is tried, and once the server accepts it the mailbox is active again", async () => {
    const health = async () => (await app.request('GET', '/v1/sdr/mail/status', { key: sdrKey })).body.data;
    const before = sink.received.length;
    sink.mailFromAnswers.set(SDR, [421, '4.7.0 Too many messages, try again later']);
    let res = await send({ bodyText: 'Checking in, Sam' });
    assert.equal(res.status, 502, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'send_failed');
    assert.equal((await health()).healthState, 'rate_limited');
    // The IMAP session carries on (its login is not repeated, so it does not set the health):
    // the server's limit is over, and the SDR sends again.
    sink.mailFromAnswers.delete(SDR);
    res = await send({ bodyText: 'Checking in, Sam' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(sink.received.length, before + 1);
    const h = await health();
    assert.equal(h.healthState, 'active');
    assert.equal(h.connected, true);
    assert.equal(h.lastSyncError, null);
  });

  // With an Idempotency-Key (plain tests, before the errors test moves the thread away).
  {
    const keyed = (bodyText: string, k: string) =>
      app.request('POST', `/v1/sdr/threads/${threadId}/send-manual`, { key: sdrKey, body: { bodyText }, headers: { 'idempotency-key': k } });
    const outbound = async () => (await thread()).messages.filter((m: { direction: string }) => m.direction === 'outbound').length;

    it('Idempotency-Key: repeats, also concurrent ones, answer the one recorded send and send nothing more; another key sends again', async () => {
      const mails = sink.received.length;
      const recorded = await outbound();
      const [a, b] = await Promise.all([keyed('Following up: the tour link.', 'req-1'), keyed('Following up: the tour link.', 'req-1')]);
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(b.status, 200, JSON.stringify(b.body));
      assert.equal(a.body.data.messageId, b.body.data.messageId);
      assert.equal(sink.received.length, mails + 1, 'one mail for two concurrent requests');
      assert.match(sink.received.at(-1)!.parsed.messageId!, /^<sm_[0-9a-f]{32}@acme\.example>$/);
      const again = await keyed('Following up: the tour link.', 'req-1');
      assert.equal(again.status, 200);
      assert.deepEqual(again.body.data, { messageId: a.body.data.messageId, threadId, status: 'awaiting_reply' });
      assert.equal(sink.received.length, mails + 1, 'a repeat sends nothing');
      assert.equal(await outbound(), recorded + 1);

      const other = await keyed('One more thing.', 'req-2');
      assert.equal(other.status, 200);
      assert.notEqual(other.body.data.messageId, a.body.data.messageId);
      assert.equal(sink.received.length, mails + 2);
      assert.equal(await outbound(), recorded + 2);
    });

    it('Idempotency-Key: a repeat after a failure between the server accepting and the commit carries the same Message-ID, recorded once', async () => {
      const mails = sink.received.length;
      const recorded = await outbound();
      // The record fails after the SMTP server accepted the mail (as a crash there would).
      await db.query(`create function fail_outbound() returns trigger language plpgsql as $$ begin raise exception 'simulated crash'; end $$`);
      await db.query(`create trigger fail_outbound before insert on thread_messages for each row execute function fail_outbound()`);
      let res;
      try {
        res = await keyed('Did you see the deck?', 'req-crash');
      } finally {
        await db.query(`drop trigger fail_outbound on thread_messages`);
        await db.query(`drop function fail_outbound()`);
      }
      assert.equal(res.status, 500);
      assert.equal(sink.received.length, mails + 1, 'the server accepted it');
      assert.equal(await outbound(), recorded, 'nothing recorded');

      const retry = await keyed('Did you see the deck?', 'req-crash');
      assert.equal(retry.status, 200, JSON.stringify(retry.body));
      assert.equal(sink.received.length, mails + 2);
      assert.equal(sink.received.at(-1)!.parsed.messageId, sink.received.at(-2)!.parsed.messageId, 'the same Message-ID: Gmail keeps one');
      assert.equal(await outbound(), recorded + 1);
    });

    it('Idempotency-Key: a repeat after the mailbox moved to another address, or while it is unusable, answers the recorded send and sends nothing', async () => {
      const first = await keyed('Here is the case study.', 'req-moved');
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const mails = sink.received.length;
      const recorded = await outbound();
      const sdrId = (await db.query('select id from sdrs where email = $1', [SDR])).rows[0].id;
      const reconnect = (email: string) => app.services().sdrs.connectMail(sdrId, { smtpUrl: sink.url(SDR, 'pw'), imapUrl: imap.url(SDR, 'pw'), email });
      try {
        // Another address: another domain in the Message-ID the key derives.
        await reconnect('sam@acme-mail.example');
        const moved = await keyed('Here is the case study.', 'req-moved');
        assert.equal(moved.status, 200, JSON.stringify(moved.body));
        assert.deepEqual(moved.body.data, first.body.data);
        // A mailbox that needs a new login (held while the request runs: the reconnect above
        // starts a watcher session whose login could set it active again): the mail went out
        // all the same.
        const held = await holdMailboxHealth(app.databaseUrl, sdrId, 'needs_reauth');
        try {
          const unusable = await keyed('Here is the case study.', 'req-moved');
          assert.equal(unusable.status, 200, JSON.stringify(unusable.body));
          assert.deepEqual(unusable.body.data, first.body.data);
        } finally {
          await held.release();
        }
        assert.equal(sink.received.length, mails, 'a repeat sends nothing');
        assert.equal(await outbound(), recorded);
      } finally {
        await reconnect(SDR);
      }
    });

    it('Idempotency-Key: a malformed key is 400 invalid_request naming the header, and sends nothing', async () => {
      const mails = sink.received.length;
      for (const k of ['x'.repeat(256), 'clé', 'two words']) {
        const res = await keyed('hello', k);
        assert.equal(res.status, 400, k);
        assert.equal(res.body.error.code, 'invalid_request');
        assert.equal(res.body.errors[0].field, 'Idempotency-Key');
      }
      assert.equal(sink.received.length, mails);
    });
  }

  it('a Cc with spaces or a line break around the address is kept as the address that was sent to', async () => {
    const res = await send({ bodyText: 'Looping in my colleague.', cc: [' lee@acme.example\n', 'kim@acme.example\u2028'] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(sink.received.at(-1)!.to.sort(), ['kim@acme.example', 'lee@acme.example', 'pat@lead.example']);
    const sent = (await thread()).messages.filter((m: { direction: string }) => m.direction === 'outbound').at(-1);
    assert.deepEqual(sent.ccEmails, ['lee@acme.example', 'kim@acme.example']);
  });

  it('an address on the suppression list gets no reply from the desk (the contact, or a Cc): 409 recipient_suppressed, nothing sent or written; off the list, it does', async () => {
    const mails = sink.received.length;
    const before = (await thread()).messages.length;
    const suppress = (emails: string[]) => app.request('POST', '/v1/suppression-list', { key: adminKey, body: { emails } });
    // The prospect unsubscribed (here: an admin put the address on the list, in another case).
    assert.equal((await suppress(['PAT@lead.example'])).status, 200);
    let res = await send({ bodyText: 'One more thing, Pat.' });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'recipient_suppressed');
    assert.deepEqual(res.body.suppressed, ['pat@lead.example']);
    assert.match(res.body.error.message, /pat@lead\.example is on the workspace's suppression list/);
    await app.services().suppression.remove(workspaceId, ['pat@lead.example']);
    // A copied address on the list stops the send too.
    assert.equal((await suppress(['boss@lead.example'])).status, 200);
    res = await send({ bodyText: 'Looping in your boss.', cc: ['Boss@Lead.example'] });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.deepEqual(res.body.suppressed, ['Boss@Lead.example']);
    assert.equal(sink.received.length, mails, 'nothing sent');
    assert.equal((await thread()).messages.length, before, 'nothing written');
    await app.services().suppression.remove(workspaceId, ['boss@lead.example']);
    res = await send({ bodyText: 'Looping in your boss.', cc: ['boss@lead.example'] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(sink.received.length, mails + 1);
  });

  it('errors: body validation 400, another SDR’s thread 404, no usable mailbox 409, admin key 403', async () => {
    for (const body of [{}, { bodyText: '   ' }, { bodyText: 'x', cc: ['nope'] }, { bodyText: 'x', to: 'a@b.example' }]) {
      const res = await send(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.error.code, 'invalid_request');
    }
    const other = await seedSdr(app, workspaceId);
    let res = await send({ bodyText: 'hi' }, other.sdrKey);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'thread_not_found');
    await db.query(`update prospect_threads set sdr_id = $1 where id = $2`, [other.sdr.id, threadId]);
    res = await send({ bodyText: 'hi' }, other.sdrKey);
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'mail_not_connected');
    res = await send({ bodyText: 'hi' }, adminKey);
    assert.equal(res.status, 403);
  });

  // Added with migration 0003: whatever the tests above wrote, the inbox counters still match
  // (a describe of its own, so it runs after the nested describes above).
  describe('afterwards', () => {
    it('prospect_thread_counts equal a count of the threads', async () => {
      await assertThreadCountsExact(db);
    });
  });
});
