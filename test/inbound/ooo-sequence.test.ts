import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, ManualClock, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { waitFor } from '../support/wait.ts';

// Out-of-office answers move the sequence (issue 19 §3, contract §5): the campaign sends
// Mon-Fri 09:00-17:00 Europe/Berlin (UTC+1 in November); step 2 follows step 1 after 48 hours.
// Mail goes out through smtp-server, answers come in through the inbound service with the
// mailbox cursor as the watcher drives it, time moves on the injected clock.
describe('inbound: an out-of-office answer postpones the next step', function () {
  this.timeout(60_000);
  const MONDAY = '2026-11-02T09:00:00.000Z'; // 10:00 in Berlin
  const clock = new ManualClock(MONDAY);
  const sink = new SmtpSink();
  let app: TestApp;
  let db: pg.Client;
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;
  let uid = 0;

  before(async () => {
    await sink.start();
    app = await startTestApp({ clock });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 2 });
    dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000] });
  });
  after(async () => {
    await messenger.close();
    await dispatcher.close();
    await db.end();
    await app.close();
    await sink.stop();
  });

  interface Campaign { key: string; id: string; watchId: string; workspaceId: string; accountId: string; sent: Map<string, string> }

  /** A running campaign whose first step went out to `leads` at MONDAY. */
  async function campaign(leads: string[]): Promise<Campaign> {
    clock.set(MONDAY);
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const email = `alice.${Math.random().toString(36).slice(2, 8)}@acme.example`;
    sink.users.set(email, 'pw');
    const s = app.services();
    const account = await s.senders.add({ workspaceId: workspace.id, email, name: 'Alice', smtpUrl: sink.url(email, 'pw'), imapUrl: 'imap://alice:pw@127.0.0.1:1' });
    const pool = await s.senders.createPool(workspace.id, 'p', 1000, [account.id]);
    const res = await app.request('POST', '/v1/campaigns', {
      key,
      body: {
        name: 'OOO',
        senderPoolId: pool.id,
        schedule: { timezone: 'Europe/Berlin', days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '17:00' },
        sequenceSteps: [{ subject: 'Quick question', bodyHtml: '<p>Hi</p>' }, { subject: '', bodyHtml: '<p>Bump</p>', delayHours: 48 }],
      },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    await app.request('POST', `/v1/campaigns/${res.body.id}/leads/bulk`, { key, body: { leads: leads.map((e) => ({ email: e })) } });
    assert.equal((await app.request('POST', `/v1/campaigns/${res.body.id}/start`, { key })).status, 200);
    sink.received.length = 0;
    await dispatcher.runRound();
    const sent = new Map(sink.received.map((r) => [r.to[0], r.parsed.messageId!]));
    assert.equal(sent.size, leads.length);
    // The watcher's lease and cursor, as MailboxWatcher holds them while it reads the mailbox.
    const { rows } = await db.query(`update mailbox_watches set lease_owner = 'test', uid_validity = 1 where sender_account_id = $1 returning id`, [account.id]);
    return { key, id: res.body.id, watchId: rows[0].id, workspaceId: workspace.id, accountId: account.id, sent };
  }

  async function receive(c: Campaign, from: string, h: { subject: string; auto?: boolean; noDate?: boolean; date?: string }, body: string): Promise<string> {
    const raw = [
      `From: ${from}`,
      'To: alice@acme.example',
      `Subject: ${h.subject}`,
      ...(h.noDate ? [] : [`Date: ${h.date ?? clock.now().toUTCString()}`]),
      `Message-ID: <r${++uid}.${Date.now()}@lead.example>`,
      `In-Reply-To: ${c.sent.get(from)}`,
      `References: ${c.sent.get(from)}`,
      ...(h.auto ? ['Auto-Submitted: auto-replied'] : []),
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      body,
      '',
    ].join('\r\n');
    return app.services().inbound.ingest({
      watchId: c.watchId, workspaceId: c.workspaceId, senderAccountId: c.accountId, owner: 'test', uidValidity: 1n, uid, raw: Buffer.from(raw), receivedAt: clock.now(),
    });
  }

  async function lead(c: Campaign, email: string): Promise<{ status: string; nextSendAt: string | null }> {
    const res = await app.request('GET', `/v1/campaigns/${c.id}/leads`, { key: c.key });
    return res.body.data.find((l: { email: string }) => l.email === email);
  }
  /** Messages the sink got for one lead (earlier tests' campaigns keep running on the same clock). */
  const sent = (email: string) => sink.received.filter((r) => r.to.includes(email));
  const stats = async (c: Campaign) => (await app.request('GET', `/v1/campaigns/${c.id}/stats`, { key: c.key })).body;

  it('a return date moves the next step to the first slot of that day (not a step due later); the lead stays active and gets it then', async () => {
    const c = await campaign(['back@lead.example', 'other@lead.example', 'soon@lead.example']);
    // Back before step 2 is due: step 2 stays where it is.
    await receive(c, 'soon@lead.example', { subject: 'Automatic reply: Quick question', auto: true }, "I'm out of the office and back on Tuesday, 3 November.");
    assert.equal((await lead(c, 'soon@lead.example')).nextSendAt, '2026-11-04T09:00:00.000Z');

    assert.equal((await lead(c, 'back@lead.example')).nextSendAt, '2026-11-04T09:00:00.000Z', 'step 2 is 48 hours after step 1');
    clock.set('2026-11-02T15:00:00.000Z');
    assert.equal(
      await receive(c, 'back@lead.example', { subject: 'Automatic reply: Quick question', auto: true }, "I'm out of the office and back on Tuesday, 10 November. I will have no access to email until then."),
      'reply',
    );
    const back = await lead(c, 'back@lead.example');
    assert.equal(back.status, 'active');
    // Tuesday 10 November, 09:00 in Berlin: the window's first minute on the day the lead is back.
    assert.equal(back.nextSendAt, '2026-11-10T08:00:00.000Z');
    assert.equal((await lead(c, 'other@lead.example')).nextSendAt, '2026-11-04T09:00:00.000Z', 'other leads keep their schedule');

    clock.set('2026-11-04T09:30:00.000Z');
    sink.received.length = 0;
    await dispatcher.runRound();
    assert.equal(sent('other@lead.example').length, 1);
    assert.equal(sent('back@lead.example').length, 0);
    clock.set('2026-11-10T07:59:00.000Z');
    await dispatcher.runRound();
    assert.equal(sent('back@lead.example').length, 0, 'nothing before the window opens on the return day');
    clock.set('2026-11-10T08:00:00.000Z');
    await dispatcher.runRound();
    assert.equal(sent('back@lead.example').length, 1);
    assert.equal((await lead(c, 'back@lead.example')).status, 'completed');
  });

  it('an answer without a return date postpones by MAILGATE_OOO_DEFAULT_DELAY (7 days), then the first slot', async () => {
    const c = await campaign(['nodate@lead.example']);
    clock.set('2026-11-02T18:30:00.000Z'); // 19:30 in Berlin: 7 days later is outside the window too
    await receive(c, 'nodate@lead.example', { subject: 'Out of office', auto: true }, 'I am currently out of the office with limited access to email.');
    const l = await lead(c, 'nodate@lead.example');
    assert.equal(l.status, 'active');
    // Monday 9 November 19:30 Berlin is after hours: Tuesday 10 November 09:00 Berlin.
    assert.equal(l.nextSendAt, '2026-11-10T08:00:00.000Z');
    assert.equal(app.deps.config.oooDefaultDelay, 7 * 86_400_000);
  });

  it('a step already due (queued) goes back to scheduled until the return date; the counters follow', async () => {
    const c = await campaign(['due@lead.example']);
    clock.set('2026-11-04T18:00:00.000Z'); // step 2 came due at 09:00Z; the window closed at 16:00Z
    await dispatcher.runRound();
    const before = await stats(c);
    assert.deepEqual([before.queued, before.scheduled], [1, 0], 'step 2 is queued, waiting for the window');
    await receive(c, 'due@lead.example', { subject: 'Automatic reply: Quick question', auto: true }, "I'm out of the office and back on Monday, 9 November.");
    assert.equal((await lead(c, 'due@lead.example')).nextSendAt, '2026-11-09T08:00:00.000Z');
    const after = await stats(c);
    assert.deepEqual([after.queued, after.scheduled], [0, 1]);
    clock.set('2026-11-05T09:00:00.000Z');
    sink.received.length = 0;
    await dispatcher.runRound();
    assert.deepEqual(sent('due@lead.example'), [], 'not sent when the window opens the next day');
  });

  it('an absence stated from one date to another with the return after it waits for the return, not the first date', async () => {
    const c = await campaign(['span@lead.example']);
    // The "back" after 13 November is 16 November's; it made 9 November the return (a Monday
    // 09:00 Berlin send in the middle of the absence).
    await receive(c, 'span@lead.example', { subject: 'Automatic reply: Quick question', auto: true }, "I'm out of the office from 9 November through 13 November and back on 16 November.");
    assert.equal((await lead(c, 'span@lead.example')).nextSendAt, '2026-11-16T08:00:00.000Z');
    clock.set('2026-11-09T08:00:00.000Z');
    sink.received.length = 0;
    await dispatcher.runRound();
    assert.deepEqual(sent('span@lead.example'), []);
  });

  it('an auto-reply without a Date header dates its return day by its arrival', async () => {
    const c = await campaign(['nodateheader@lead.example']);
    // It had no reference for the year: no return date, so 7 days (Monday 9 November 10:00 Berlin).
    await receive(c, 'nodateheader@lead.example', { subject: 'Automatic reply: Quick question', auto: true, noDate: true }, "I'm out of the office and back on Tuesday, 10 November.");
    assert.equal((await lead(c, 'nodateheader@lead.example')).nextSendAt, '2026-11-10T08:00:00.000Z');
  });

  it('an auto-reply whose Date header does not parse dates its return day by its arrival, not the machine\'s clock', async () => {
    const c = await campaign(['cet@lead.example']);
    // "CET" is no zone JavaScript reads: mailparser gave the machine's time (after 24 November
    // 2026, 10 November was more than 14 days before it: 10 November 2027).
    await receive(c, 'cet@lead.example', { subject: 'Automatic reply: Quick question', auto: true, date: 'Mon, 02 Nov 2026 10:00:00 CET' }, "I'm out of the office and back on Tuesday, 10 November.");
    assert.equal((await lead(c, 'cet@lead.example')).nextSendAt, '2026-11-10T08:00:00.000Z');
  });

  it('a real reply after the out-of-office ends the sequence as before', async () => {
    const c = await campaign(['human@lead.example']);
    await receive(c, 'human@lead.example', { subject: 'Automatic reply: Quick question', auto: true }, "I'm out of the office and back on Tuesday, 10 November.");
    assert.equal((await lead(c, 'human@lead.example')).nextSendAt, '2026-11-10T08:00:00.000Z');
    clock.set('2026-11-10T07:00:00.000Z');
    await receive(c, 'human@lead.example', { subject: 'Re: Quick question' }, "Back now. Yes, this is relevant for us, let's talk on Thursday.");
    const l = await lead(c, 'human@lead.example');
    assert.equal(l.status, 'replied');
    assert.equal(l.nextSendAt, null);
    clock.set('2026-11-10T09:00:00.000Z');
    sink.received.length = 0;
    await dispatcher.runRound();
    assert.deepEqual(sent('human@lead.example'), []);
    const replies = (await app.request('GET', `/v1/replies?campaignId=${c.id}`, { key: c.key })).body as Array<{ classification: string }>;
    assert.deepEqual(replies.map((r) => r.classification).sort(), ['interested', 'out_of_office']);
  });

  it('two human replies of one lead read side by side from two mailboxes count once in replied', async () => {
    const c = await campaign(['twice@lead.example']);
    // A second mailbox of the workspace (another sender account), as its watcher holds it.
    const other = await app.services().senders.add({ workspaceId: c.workspaceId, email: `bob.${Date.now()}@acme.example`, name: 'Bob', smtpUrl: sink.url('bob@acme.example', 'pw'), imapUrl: 'imap://bob:pw@127.0.0.1:1' });
    const { rows: [w2] } = await db.query(`update mailbox_watches set lease_owner = 'test', uid_validity = 1 where sender_account_id = $1 returning id`, [other.id]);
    const answer = (watchId: string, accountId: string, n: number, body: string) =>
      app.services().inbound.ingest({
        watchId, workspaceId: c.workspaceId, senderAccountId: accountId, owner: 'test', uidValidity: 1n, uid: 1000 + n, receivedAt: clock.now(),
        raw: Buffer.from([
          'From: twice@lead.example', 'To: alice@acme.example', 'Subject: Re: Quick question', `Message-ID: <twice-${n}@lead.example>`,
          `In-Reply-To: ${c.sent.get('twice@lead.example')}`, 'Content-Type: text/plain; charset=utf-8', '', body, '',
        ].join('\r\n')),
      });
    // Both ingests reach the lead's enrollment while another transaction holds it.
    const holder = new pg.Client({ connectionString: app.databaseUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query(`select id from enrollments where campaign_id = $1 for update`, [c.id]);
      const both = Promise.all([
        answer(c.watchId, c.accountId, 1, 'Yes, interested. Call me tomorrow.'),
        answer(w2.id, other.id, 2, 'Yes, interested: send me times for a call.'),
      ]);
      await waitFor('both ingests waiting for the enrollment', async () =>
        Number((await db.query(`select count(*) as n from pg_stat_activity where wait_event_type = 'Lock' and pid <> pg_backend_pid()`)).rows[0].n) >= 2,
      );
      await holder.query('commit');
      assert.deepEqual(await both, ['reply', 'reply']);
    } finally {
      await holder.end();
    }
    const s = await stats(c);
    assert.equal(s.replied, 1, 'one lead replied');
    const replies = (await app.request('GET', `/v1/replies?campaignId=${c.id}`, { key: c.key })).body as unknown[];
    assert.equal(replies.length, 2, 'both are listed');
    assert.equal((await lead(c, 'twice@lead.example')).status, 'replied');
  });
});
