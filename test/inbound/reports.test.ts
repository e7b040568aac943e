import assert from 'node:assert/strict';
import pg from 'pg';
import { waitFor } from '../support/wait.ts';
import { arfReport, dsn } from '../support/mail.ts';
import { startTestApp, seedWorkspace, seedSdr, subscribeEvents, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { ImapTestServer } from '../support/dovecot.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { MailboxWatcher } from '../../src/modules/inbound/watcher.ts';

// Issue 19 through the real inbound pipeline: Dovecot over IMAP, the watcher, analysis,
// matching and effects in PostgreSQL, read back through the API.

const SENDER = 'alice@acme.example';
const PW = 'imap-pw';

const lines = (xs: string[]) => xs.join('\r\n') + '\r\n';

/** A Domino-style notice: no delivery-status part, no Status:, no copy of our Message-ID. */
function dominoNotice(lead: string): string {
  return lines([
    'Return-Path: <>',
    'From: Postmaster <postmaster@lead.example>',
    `To: ${SENDER}`,
    'Subject: DELIVERY FAILURE: User not listed in Domino Directory',
    `Date: ${new Date().toUTCString()}`,
    '<dom-1@mail.lead.example>'.replace(/^/, 'Message-ID: '),
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=iso-8859-1',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    'Your message',
    '',
    '  Subject: Quick question',
    '',
    'was not delivered to:',
    '',
    `  ${lead}`,
    '',
    'because:',
    '',
    '  User not listed in Domino Directory',
  ]);
}

/** A mailer-daemon's message whose words read like interest (a forwarding loop's echo). */
function daemonEcho(original: string): string {
  return lines([
    'From: Mail Delivery System <MAILER-DAEMON@mx.lead.example>',
    `To: ${SENDER}`,
    'Subject: Re: Quick question',
    `Date: ${new Date().toUTCString()}`,
    'Message-ID: <echo-1@mx.lead.example>',
    `In-Reply-To: ${original}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    "Yes, very interested! Let's set up a call next week, send me your pricing.",
  ]);
}


describe('inbound reports: bounces without a DSN part, automatic mail, feedback-loop complaints', function () {
  this.timeout(90_000);
  const sink = new SmtpSink();
  const imap = new ImapTestServer();
  let app: TestApp;
  let db: pg.Client;
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;
  let watcher: MailboxWatcher;
  let key: string;
  let workspaceId: string;
  let campaignId: string;
  let otherCampaignId: string;
  const sent = new Map<string, string>();

  const replies = async () => (await app.request('GET', '/v1/replies', { key })).body as Array<Record<string, string>>;
  const stats = async (id = campaignId) => (await app.request('GET', `/v1/campaigns/${id}/stats`, { key })).body;
  const leadStatus = async (email: string, id = campaignId) =>
    ((await app.request('GET', `/v1/campaigns/${id}/leads`, { key })).body.data as Array<{ email: string; status: string }>).find((l) => l.email === email)!.status;

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
    const seeded = await seedWorkspace(app);
    key = seeded.adminKey;
    workspaceId = seeded.workspace.id;
    const s = app.services();
    const account = await s.senders.add({ workspaceId, email: SENDER, name: 'Alice', smtpUrl: sink.url(SENDER, 'smtp-pw'), imapUrl: imap.url(SENDER, PW) });
    const pool = await s.senders.createPool(workspaceId, 'p', 1000, [account.id]);
    await subscribeEvents(app, workspaceId);
    const steps = [{ subject: 'Quick question', bodyHtml: '<p>Hi</p>' }, { subject: '', bodyHtml: '<p>Bump</p>', delayHours: 48 }];
    campaignId = (await app.request('POST', '/v1/campaigns', { key, body: { name: 'Reports', senderPoolId: pool.id, sequenceSteps: steps } })).body.id;
    otherCampaignId = (await app.request('POST', '/v1/campaigns', { key, body: { name: 'Other', senderPoolId: pool.id, sequenceSteps: steps } })).body.id;
    await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: ['nodsn', 'echo', 'complainer', 'mailto', 'ticket', 'quiet'].map((n) => ({ email: `${n}@lead.example` })) } });
    // The complainer is in a second campaign too: a complaint ends every enrollment of the lead.
    await app.request('POST', `/v1/campaigns/${otherCampaignId}/leads/bulk`, { key, body: { leads: [{ email: 'complainer@lead.example' }] } });
    await app.request('POST', `/v1/campaigns/${campaignId}/start`, { key });
    await dispatcher.runRound();
    for (const r of sink.received) sent.set(r.to[0], r.parsed.messageId!);
    assert.equal(sent.size, 6);
    watcher = new MailboxWatcher(app.deps, () => app.services().inbound, { pollIntervalMs: 300, useIdle: false, tickMs: 300 });
    await watcher.start();
  });
  after(async () => {
    await watcher.stop();
    await messenger.close();
    await dispatcher.close();
    await db.end();
    await app.close();
    await imap.stop();
    await sink.stop();
  });

  it('a bounce without a delivery-status part or Status: is matched by recipient and account, hard from its wording; it cannot be assigned to an SDR', async () => {
    await imap.append(SENDER, PW, dominoNotice('nodsn@lead.example'));
    const r = await waitFor('the bounce', async () => (await replies()).find((x) => x.email === 'nodsn@lead.example'));
    assert.equal(r.classification, 'bounce');
    const row = (await db.query(`select decided_by, bounce_type from replies where id = $1`, [r.id])).rows[0];
    assert.equal(row.bounce_type, 'hard');
    assert.equal(row.decided_by, 'bounce-text:mailer-daemon;type:text:unknown-user');
    assert.equal((await db.query(`select state from outbound_messages where message_id_header = $1`, [sent.get('nodsn@lead.example')])).rows[0].state, 'bounced');
    assert.equal(await leadStatus('nodsn@lead.example'), 'bounced');
    assert.equal((await db.query(`select reason from suppressions where email_key = 'nodsn@lead.example'`)).rows[0].reason, 'hard_bounce');

    // The route from the replies list to an SDR's queue refuses it, and writes nothing.
    const { sdr } = await seedSdr(app, workspaceId, 'Sam Rep', 'sam@acme.example');
    const res = await app.request('POST', `/v1/replies/${r.id}/assign`, { key, body: { sdrId: sdr.id, skipIcpCheck: true } });
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'reply_not_assignable');
    assert.equal((await db.query(`select count(*)::int as n from prospect_threads`)).rows[0].n, 0);
    assert.equal(sink.received.filter((m) => m.to.includes('sam@acme.example')).length, 0, 'nothing forwarded');
  });

  it("a mailer-daemon's message that reads like interest is never a reply: recorded unclassified, no effect, nothing for an SDR", async () => {
    await imap.append(SENDER, PW, daemonEcho(sent.get('echo@lead.example')!));
    const stored = await waitFor('the stored message', async () => (await db.query(`select kind from inbound_messages where message_id_header = '<echo-1@mx.lead.example>'`)).rows[0]);
    assert.equal(stored.kind, 'unclassified');
    assert.ok(!(await replies()).some((x) => x.email === 'echo@lead.example'), 'not in the replies list');
    assert.equal((await db.query(`select count(*)::int as n from replies where email = 'echo@lead.example'`)).rows[0].n, 0);
    assert.equal(await leadStatus('echo@lead.example'), 'active', 'the sequence goes on');
    assert.equal((await stats()).replied, 0);
    assert.equal((await db.query(`select count(*)::int as n from events where type = 'reply.received' and data->>'email' = 'echo@lead.example'`)).rows[0].n, 0);
    assert.equal((await db.query(`select count(*)::int as n from prospect_threads`)).rows[0].n, 0);
  });

  it('an ARF feedback report: suppressed as complaint, every enrollment ended, listed as unsubscribe by ARF, counted in complained, logged at warn', async () => {
    const before = await stats();
    await imap.append(SENDER, PW, arfReport({ sender: SENDER, original: sent.get('complainer@lead.example')!, lead: 'complainer@lead.example', messageId: '<arf-1@feedback.mailbox-provider.example>' }));
    const r = await waitFor('the complaint', async () => (await replies()).find((x) => x.email === 'complainer@lead.example'));
    assert.equal(r.classification, 'unsubscribe');
    assert.equal(r.campaignId, campaignId);
    assert.equal((await db.query(`select decided_by from replies where id = $1`, [r.id])).rows[0].decided_by, 'arf:rfc5965:abuse');
    assert.equal((await db.query(`select kind from inbound_messages where message_id_header = '<arf-1@feedback.mailbox-provider.example>'`)).rows[0].kind, 'complaint');
    assert.equal((await db.query(`select reason from suppressions where email_key = 'complainer@lead.example'`)).rows[0].reason, 'complaint');
    assert.equal(await leadStatus('complainer@lead.example'), 'unsubscribed');
    assert.equal(await leadStatus('complainer@lead.example', otherCampaignId), 'unsubscribed');
    const after = await stats();
    assert.equal(after.complained, before.complained + 1);
    assert.equal(after.complained, 1);
    assert.equal(after.replied, before.replied, 'a complaint is not a reply');
    assert.equal(after.unsubscribed, before.unsubscribed + 1);
    assert.equal((await db.query(`select complained from campaign_counters where campaign_id = $1`, [campaignId])).rows[0].complained, 1);
    const warn = app.logs.lines.map((l) => JSON.parse(l)).find((l) => /feedback-loop spam complaint/.test(l.msg));
    assert.ok(warn, 'a warn line');
    assert.equal(warn.level, 40);
    assert.equal(warn.email, 'complainer@lead.example');
  });

  it("an unsubscribe sent through our List-Unsubscribe mailto by the reader's mail client, marked Auto-Submitted, unsubscribes: suppressed, the sequence ended, counted in replied", async () => {
    const before = await stats();
    // What Gmail's unsubscribe button sends for the mailto (`?subject=unsubscribe`): no threading
    // headers (matched by the sender address), a sentence of its own, Auto-Submitted.
    await imap.append(
      SENDER,
      PW,
      lines([
        'From: Mia Mailto <mailto@lead.example>',
        `To: ${SENDER}`,
        'Subject: unsubscribe',
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <unsub-mailto-1@mail.lead.example>',
        'Auto-Submitted: auto-generated',
        'MIME-Version: 1.0',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'This message was automatically generated by Gmail.',
      ]),
    );
    const r = await waitFor('the unsubscribe', async () => (await replies()).find((x) => x.email === 'mailto@lead.example'));
    assert.equal(r.classification, 'unsubscribe');
    assert.equal(await leadStatus('mailto@lead.example'), 'unsubscribed');
    assert.equal((await db.query(`select reason from suppressions where email_key = 'mailto@lead.example'`)).rows[0].reason, 'reply_unsubscribe');
    const after = await stats();
    assert.equal(after.replied, before.replied + 1);
    assert.equal(after.unsubscribed, before.unsubscribed + 1);
  });

  it("a ticket system's acknowledgement without auto-reply headers is an automatic answer: listed out_of_office, the sequence goes on, not counted; the person's answer naming the ticket is interested", async () => {
    const before = await stats();
    await imap.append(
      SENDER,
      PW,
      lines([
        'From: Lead Support <support@lead.example>',
        `To: ${SENDER}`,
        'Subject: [Ticket #48213] Re: Quick question',
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <48213.freshdesk@lead.example>',
        `In-Reply-To: ${sent.get('ticket@lead.example')}`,
        'MIME-Version: 1.0',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Thank you for contacting Lead Support. We have received your message and one of our agents will get back to you within 24 hours.',
      ]),
    );
    const ack = await waitFor('the acknowledgement', async () => (await replies()).find((x) => x.email === 'ticket@lead.example'));
    assert.equal(ack.classification, 'out_of_office');
    assert.equal((await db.query(`select decided_by from replies where id = $1`, [ack.id])).rows[0].decided_by, 'pattern:auto-ack:en');
    assert.equal(await leadStatus('ticket@lead.example'), 'active', 'the sequence goes on');
    assert.equal((await stats()).replied, before.replied, 'an automatic answer is not a reply');

    await imap.append(
      SENDER,
      PW,
      lines([
        'From: Tess Ticket <ticket@lead.example>',
        `To: ${SENDER}`,
        'Subject: Re: Quick question',
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <tess-1@lead.example>',
        `In-Reply-To: ${sent.get('ticket@lead.example')}`,
        'MIME-Version: 1.0',
        'Content-Type: text/plain; charset=utf-8',
        '',
        "Ignore our helpdesk's ticket #48213, your note landed in the support queue. We're interested: can you call me on Thursday?",
      ]),
    );
    const answer = await waitFor('the answer', async () => (await replies()).find((x) => x.email === 'ticket@lead.example' && x.classification !== 'out_of_office'));
    assert.equal(answer.classification, 'interested');
    assert.equal(await leadStatus('ticket@lead.example'), 'replied');
    assert.equal((await stats()).replied, before.replied + 1);
  });

  it("the leads list's replied filter lists exactly the leads the campaign's replied counts: an unsubscribe reply's lead (unsubscribed) included, a complaint's and an auto-answer's not", async () => {
    const leads = async (q: string) => {
      const res = await app.request('GET', `/v1/campaigns/${campaignId}/leads${q}`, { key });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body as { data: Array<{ email: string; status: string }>; total: number };
    };
    const s = await stats();
    const replied = await leads('?replied=true');
    assert.deepEqual(replied.data.map((l) => [l.email, l.status]).sort(), [['mailto@lead.example', 'unsubscribed'], ['ticket@lead.example', 'replied']]);
    assert.equal(replied.total, s.replied, 'the replied stat and the list it links to agree');
    const others = await leads('?replied=false');
    assert.equal(others.total, s.totalEnrolled - s.replied);
    assert.ok(others.data.some((l) => l.email === 'complainer@lead.example' && l.status === 'unsubscribed'), 'a complaint is no reply');
    assert.deepEqual((await leads('?replied=true&status=unsubscribed')).data.map((l) => l.email), ['mailto@lead.example']);
    const bad = await app.request('GET', `/v1/campaigns/${campaignId}/leads?replied=yes`, { key });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_request');
  });

  it("the leads list's bounced filter lists the leads of the messages the campaign's bounced counts: a bounce reported after a complaint leaves its lead unsubscribed, and is listed", async () => {
    const leads = async (q: string) => {
      const res = await app.request('GET', `/v1/campaigns/${campaignId}/leads${q}`, { key });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body as { data: Array<{ id: string; email: string; status: string }>; total: number };
    };
    const before = await stats();
    // The complainer's message (accepted, complained about) is reported undeliverable after all.
    await imap.append(
      SENDER,
      PW,
      dsn({ to: SENDER, messageId: '<dsn-complainer@mx.lead.example>', original: sent.get('complainer@lead.example')!, recipient: 'complainer@lead.example', status: '5.1.1', diagnostic: '550 5.1.1 mailbox disabled' }),
    );
    await waitFor('the late bounce', async () => (await stats()).bounced === before.bounced + 1);
    const s = await stats();
    assert.equal(s.bounced, 2, 'nodsn and the complainer: messages');
    assert.equal(s.delivered, before.delivered - 1);
    assert.equal(await leadStatus('complainer@lead.example'), 'unsubscribed', 'a bounce does not replace an unsubscribe');
    // The status alone lists one lead for a number of 2.
    assert.deepEqual((await leads('?status=bounced')).data.map((l) => l.email), ['nodsn@lead.example']);
    const bounced = await leads('?bounced=true');
    assert.deepEqual(bounced.data.map((l) => [l.email, l.status]).sort(), [['complainer@lead.example', 'unsubscribed'], ['nodsn@lead.example', 'bounced']]);
    // The number counts messages; the list holds the leads of exactly those messages.
    const counted = (await db.query(`select lead_id, count(*)::int as n from outbound_messages where campaign_id = $1 and state = 'bounced' group by lead_id`, [campaignId])).rows;
    assert.deepEqual(counted.map((r) => r.lead_id).sort(), bounced.data.map((l) => l.id).sort());
    assert.equal(counted.reduce((sum, r) => sum + r.n, 0), s.bounced);
    const others = await leads('?bounced=false');
    assert.equal(others.total, s.totalEnrolled - bounced.total);
    assert.ok(!others.data.some((l) => l.email === 'complainer@lead.example' || l.email === 'nodsn@lead.example'));
    assert.deepEqual((await leads('?bounced=true&status=unsubscribed')).data.map((l) => l.email), ['complainer@lead.example']);
    const bad = await app.request('GET', `/v1/campaigns/${campaignId}/leads?bounced=1`, { key });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_request');
  });

  it("the time chart's replied counts the leads the campaign's replied counts, once each: no complaint, no bounce report, no second answer", async () => {
    // Tess answers a second time: still one replied lead.
    await imap.append(
      SENDER,
      PW,
      lines([
        'From: Tess Ticket <ticket@lead.example>',
        `To: ${SENDER}`,
        'Subject: Re: Quick question',
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <tess-2@lead.example>',
        `In-Reply-To: ${sent.get('ticket@lead.example')}`,
        'MIME-Version: 1.0',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Also, please bring your pricing for 50 seats, we are interested in the annual plan.',
      ]),
    );
    await waitFor('the second answer', async () => (await replies()).filter((x) => x.email === 'ticket@lead.example').length === 3);
    const counted = (await db.query(`select classification, decided_by from replies where campaign_id = $1 and email = 'ticket@lead.example' order by received_at, id`, [campaignId])).rows;
    assert.equal(counted.filter((r) => ['interested', 'not_interested'].includes(r.classification)).length, 2, `two answers of hers a reply count would count: ${JSON.stringify(counted)}`);
    const s = await stats();
    assert.equal(s.replied, 2, 'mailto and ticket');
    for (const bucket of ['hour', 'day']) {
      const res = await app.request('GET', `/v1/campaigns/${campaignId}/timeline?bucket=${bucket}`, { key });
      assert.equal(res.status, 200, res.text);
      const total = (k: string) => (res.body.data as Array<Record<string, number>>).reduce((sum, p) => sum + p[k], 0);
      // The complaint (listed as unsubscribe), the two bounce reports and Tess's second answer are not replied leads.
      assert.equal(total('replied'), s.replied, `${bucket}: the chart's replied and the stats' agree`);
      assert.equal(total('bounced'), s.bounced, `${bucket}: the chart's bounced counts the same messages`);
    }
  });
});
