import assert from 'node:assert/strict';
import pg from 'pg';
import { createHmac } from 'node:crypto';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { recordEvent, holdOutbox } from '../../src/modules/events/outbox.ts';
import { insertWebhook } from '../../src/modules/webhooks/repository.ts';
import { waitFor } from '../support/wait.ts';
import { anyEvent } from '../support/events.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { webhookWorld, verifySignature, type WebhookWorld } from './helpers.ts';
import { ImapTestServer } from '../support/dovecot.ts';
import { MailboxWatcher } from '../../src/modules/inbound/watcher.ts';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('webhook events: produced by real flows, delivered signed', function () {
  this.timeout(60_000);
  let w: WebhookWorld;
  let db: pg.Client;
  let dispatcher: WebhookDispatcher;

  before(async () => {
    w = await webhookWorld();
    db = new pg.Client({ connectionString: w.app.databaseUrl });
    await db.connect();
    dispatcher = w.dispatcher();
  });
  after(async () => {
    await db.end();
    await w.close();
  });
  beforeEach(() => w.receiver.reset());

  async function campaign(key: string, name: string, leads: unknown[], poolId?: string) {
    const res = await w.app.request('POST', '/v1/campaigns', {
      key,
      body: { name, ...(poolId ? { senderPoolId: poolId } : {}), sequenceSteps: [{ subject: 'Hello {{firstName|there}}', bodyHtml: '<p>Hi</p>' }] },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal((await w.app.request('POST', `/v1/campaigns/${res.body.id}/leads/bulk`, { key, body: { leads } })).status, 200);
    return res.body.id as string;
  }

  it('campaign.started from a real start and resume: envelope, headers, data fields, signature over the raw bytes', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['campaign.started']);
    const name = 'Q3 outreach — Café ✓ "quoted"';
    const campaignId = await campaign(key, name, [{ email: 'ann@lead.example' }]);
    const started = await w.app.request('POST', `/v1/campaigns/${campaignId}/start`, { key });
    assert.equal(started.status, 200);

    const r = await dispatcher.runRound();
    assert.equal(r.delivered, 1);
    assert.equal(w.receiver.received.length, 1);
    const req = w.receiver.received[0];
    assert.equal(req.method, 'POST');
    assert.equal(req.path, '/hook');
    assert.equal(req.headers['content-type'], 'application/json');
    assert.deepEqual(Object.keys(req.json), ['id', 'event', 'timestamp', 'webhookId', 'data']);
    assert.match(req.json.id, /^evt_/);
    assert.equal(req.json.event, 'campaign.started');
    assert.match(req.json.timestamp, ISO);
    assert.equal(req.json.webhookId, hook.id);
    assert.deepEqual(req.json.data, { campaignId, name, startedAt: started.body.startedAt, resumed: false });
    assert.deepEqual(Object.keys(req.json.data), ['campaignId', 'name', 'startedAt', 'resumed']);
    assert.equal(req.headers['x-service-event-id'], req.json.id);
    assert.equal(req.headers['x-service-timestamp'], String(Math.floor(w.clock.now().getTime() / 1000)));
    // The signature: lowercase hex HMAC-SHA256 of the exact bytes, keyed with the secret.
    assert.match(String(req.headers['x-service-signature']), /^[0-9a-f]{64}$/);
    assert.ok(verifySignature(req, hook.signingSecret));
    assert.ok(req.body.includes(Buffer.from('Café ✓', 'utf8')), 'UTF-8 bytes on the wire');
    const tampered = { ...req, body: Buffer.from(req.body.toString('utf8').replace('Café', 'Cafe')) };
    assert.ok(!verifySignature(tampered, hook.signingSecret));
    assert.ok(!verifySignature(req, 'whsec_wrong'));
    // The event row is the one the campaign wrote in its transaction.
    const { rows } = await db.query(`select id, workspace_id, fanned_out_at from events where id = $1`, [req.json.id]);
    assert.equal(rows[0].workspace_id, workspaceId);
    assert.ok(rows[0].fanned_out_at);

    await w.app.request('POST', `/v1/campaigns/${campaignId}/pause`, { key });
    w.clock.advance(60_000);
    await w.app.request('POST', `/v1/campaigns/${campaignId}/start`, { key });
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 2);
    const resumed = w.receiver.received[1].json;
    assert.notEqual(resumed.id, req.json.id);
    assert.deepEqual(resumed.data, { campaignId, name, startedAt: started.body.startedAt, resumed: true });

    const log = await w.deliveries(key, hook.id);
    assert.equal(log.length, 2);
    assert.deepEqual(Object.keys(log[0]).sort(), ['attempts', 'createdAt', 'event', 'eventId', 'id', 'nextAttemptAt', 'state', 'webhookId']);
    assert.equal(log[0].eventId, resumed.id, 'newest first');
    for (const d of log) {
      assert.match(d.id, /^dlv_/);
      assert.equal(d.state, 'delivered');
      assert.equal(d.event, 'campaign.started');
      assert.equal(d.nextAttemptAt, null);
      assert.equal(d.attempts.length, 1);
      assert.equal(d.attempts[0].statusCode, 200);
      assert.equal(d.attempts[0].error, null);
      assert.match(d.attempts[0].at, ISO);
      assert.ok(Number.isInteger(d.attempts[0].durationMs) && d.attempts[0].durationMs >= 0);
    }
    // A start of a running campaign writes no event: nothing more is delivered.
    await w.app.request('POST', `/v1/campaigns/${campaignId}/start`, { key });
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 2);
  });

  it('message.sent and message.bounced from the real sending engine against an SMTP sink; each webhook gets only what it subscribed to', async () => {
    const sink = new SmtpSink();
    await sink.start();
    const messenger = new SmtpMessenger({ maxConnections: 2 });
    const sending = new SendDispatcher(w.app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000] });
    try {
      const { key, workspaceId } = await w.workspace();
      const both = await w.register(key, ['message.sent', 'message.bounced'], '/both');
      const bouncesOnly = await w.register(key, ['message.bounced'], '/bounces');
      const s = w.app.services();
      sink.users.set('sender@acme.example', 'pw');
      const sender = await s.senders.add({ workspaceId, email: 'sender@acme.example', name: 'Sender', smtpUrl: sink.url('sender@acme.example', 'pw') });
      const pool = await s.senders.createPool(workspaceId, 'pool', 100, [sender.id]);
      sink.rcptAnswers.set('gone@lead.example', [550, '5.1.1 <gone@lead.example>: no such user']);
      const campaignId = await campaign(key, 'Sends', [{ email: 'ok@lead.example', firstName: 'Ok' }, { email: 'gone@lead.example' }], pool.id);
      assert.equal((await w.app.request('POST', `/v1/campaigns/${campaignId}/start`, { key })).status, 200);
      const sent = await sending.runRound();
      assert.equal(sent.sent, 1);
      assert.equal(sent.bounced, 1);

      const r = await dispatcher.runRound();
      assert.equal(r.delivered, 3);
      const toBoth = w.receiver.received.filter((q) => q.path === '/both');
      const toBounces = w.receiver.received.filter((q) => q.path === '/bounces');
      assert.deepEqual(toBoth.map((q) => q.json.event).sort(), ['message.bounced', 'message.sent']);
      assert.deepEqual(toBounces.map((q) => q.json.event), ['message.bounced']);
      assert.ok(toBoth.every((q) => q.json.webhookId === both.id && verifySignature(q, both.signingSecret)));
      assert.ok(toBounces.every((q) => q.json.webhookId === bouncesOnly.id && verifySignature(q, bouncesOnly.signingSecret)));
      assert.ok(!verifySignature(toBounces[0], both.signingSecret), 'each webhook signs with its own secret');

      const { rows: msgs } = await db.query(`select id, lead_id, to_email, message_id_header, sent_at, bounced_at from outbound_messages where campaign_id = $1`, [campaignId]);
      const okMsg = msgs.find((m) => m.to_email === 'ok@lead.example');
      const goneMsg = msgs.find((m) => m.to_email === 'gone@lead.example');
      const sentEvt = toBoth.find((q) => q.json.event === 'message.sent')!.json;
      assert.deepEqual(Object.keys(sentEvt.data), ['campaignId', 'leadId', 'email', 'sequenceStep', 'messageId', 'messageIdHeader', 'sentAt']);
      assert.equal(sentEvt.data.campaignId, campaignId);
      assert.equal(sentEvt.data.leadId, okMsg.lead_id);
      assert.equal(sentEvt.data.email, 'ok@lead.example');
      assert.equal(sentEvt.data.sequenceStep, 0);
      assert.equal(sentEvt.data.messageId, okMsg.id);
      assert.match(sentEvt.data.messageId, /^msg_/);
      assert.equal(sentEvt.data.messageIdHeader, sink.received.find((m) => m.to.includes('ok@lead.example'))!.parsed.messageId);
      assert.match(sentEvt.data.sentAt, ISO);

      const bounced = toBounces[0].json;
      assert.deepEqual(Object.keys(bounced.data), ['campaignId', 'leadId', 'email', 'sequenceStep', 'messageId', 'messageIdHeader', 'bounceType', 'bounceReason', 'bouncedAt']);
      assert.equal(bounced.data.campaignId, campaignId);
      assert.equal(bounced.data.leadId, goneMsg.lead_id);
      assert.equal(bounced.data.email, 'gone@lead.example');
      assert.equal(bounced.data.messageId, goneMsg.id);
      assert.equal(bounced.data.bounceType, 'hard');
      assert.match(bounced.data.bounceReason, /550.*5\.1\.1/);
      assert.match(bounced.data.bouncedAt, ISO);
      // The same event reaches both webhooks with the same id (receivers dedupe by it).
      assert.equal(toBoth.find((q) => q.json.event === 'message.bounced')!.json.id, bounced.id);
      // campaign.started was written too, but no webhook here subscribes to it.
      assert.ok(!w.receiver.received.some((q) => q.json.event === 'campaign.started'));
    } finally {
      await messenger.close();
      await sending.close();
      await sink.stop();
    }
  });

  it('reply.received from a real reply appended over IMAP, classified and matched, delivered signed', async () => {
    const SENDER = 'alice@acme.example';
    const imap = new ImapTestServer();
    const sink = new SmtpSink();
    await imap.start();
    await sink.start();
    imap.addUser(SENDER, 'pw');
    sink.users.set(SENDER, 'pw');
    const messenger = new SmtpMessenger({ maxConnections: 1 });
    const sending = new SendDispatcher(w.app.deps, messenger, { maxConnections: 1, retryDelaysMs: [60_000] });
    const watcher = new MailboxWatcher(w.app.deps, () => w.app.services().inbound, { pollIntervalMs: 300, useIdle: false, tickMs: 300 });
    try {
      const { key, workspaceId } = await w.workspace();
      const hook = await w.register(key, ['reply.received']);
      const s = w.app.services();
      const account = await s.senders.add({ workspaceId, email: SENDER, name: 'Alice', smtpUrl: sink.url(SENDER, 'pw'), imapUrl: imap.url(SENDER, 'pw') });
      const pool = await s.senders.createPool(workspaceId, 'p', 100, [account.id]);
      const campaignId = await campaign(key, 'Replies', [{ email: 'ann@lead.example' }], pool.id);
      await w.app.request('POST', `/v1/campaigns/${campaignId}/start`, { key });
      await sending.runRound();
      const sentId = sink.received[0].parsed.messageId!;
      await watcher.start();
      await imap.append(
        SENDER,
        'pw',
        [
          'From: Ann <ann@lead.example>',
          `To: ${SENDER}`,
          'Subject: Re: Hello there',
          `Date: ${new Date().toUTCString()}`,
          'Message-ID: <ann-reply@lead.example>',
          `In-Reply-To: ${sentId}`,
          'Content-Type: text/plain; charset=utf-8',
          '',
          'Yes, interested. Can we talk on Tuesday?',
          '',
        ].join('\r\n'),
      );
      let replies: Array<Record<string, string>> = [];
      for (let i = 0; i < 150 && !replies.length; i++) {
        await new Promise((r) => setTimeout(r, 100));
        replies = (await w.app.request('GET', `/v1/replies?campaignId=${campaignId}`, { key })).body;
      }
      assert.equal(replies.length, 1);
      w.receiver.reset();
      await dispatcher.runRound();
      const req = w.receiver.received.find((q) => q.json.event === 'reply.received')!;
      assert.ok(req, 'delivered');
      assert.deepEqual(Object.keys(req.json.data), ['replyId', 'campaignId', 'email', 'classification', 'threadSnippet', 'receivedAt']);
      assert.deepEqual(req.json.data, {
        replyId: replies[0].id,
        campaignId,
        email: 'ann@lead.example',
        classification: 'interested',
        threadSnippet: replies[0].threadSnippet,
        receivedAt: replies[0].receivedAt,
      });
      assert.match(req.json.data.threadSnippet, /Can we talk on Tuesday/);
      assert.ok(verifySignature(req, hook.signingSecret));
    } finally {
      await watcher.stop();
      await sending.close();
      await messenger.close();
      await sink.stop();
      await imap.stop();
    }
  });

  it('reply.received: the reference data shape, in order', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['reply.received']);
    const data = { receivedAt: '2026-05-04T09:58:00.000Z', threadSnippet: 'Sounds good — let’s talk Tuesday', email: 'ann@lead.example', classification: 'interested', campaignId: 'cmp_x', replyId: 'rpl_1' };
    const id = await w.emit(workspaceId, 'reply.received', data);
    await dispatcher.runRound();
    const [req] = w.receiver.received;
    assert.equal(req.json.id, id);
    assert.equal(req.json.event, 'reply.received');
    assert.deepEqual(Object.keys(req.json.data), ['replyId', 'campaignId', 'email', 'classification', 'threadSnippet', 'receivedAt']);
    assert.deepEqual(req.json.data, data);
    assert.ok(verifySignature(req, hook.signingSecret));
  });

  it('events go only to their own workspace’s webhooks, and only to webhooks that existed when they happened', async () => {
    const a = await w.workspace();
    const b = await w.workspace();
    const hookA = await w.register(a.key, ['reply.received'], '/a');
    await w.register(b.key, ['reply.received'], '/b');
    const early = await w.emit(a.workspaceId, 'reply.received', { replyId: 'rpl_early' });
    w.clock.advance(1_000);
    const late = await w.register(a.key, ['reply.received'], '/late');
    await dispatcher.runRound();
    assert.deepEqual(
      w.receiver.received.map((q) => [q.path, q.json.id]),
      [['/a', early]],
    );
    const next = await w.emit(a.workspaceId, 'reply.received', { replyId: 'rpl_next' });
    await dispatcher.runRound();
    assert.deepEqual(w.receiver.received.slice(1).map((q) => [q.path, q.json.id]).sort(), [
      ['/a', next],
      ['/late', next],
    ]);
    assert.equal((await w.deliveries(a.key, hookA.id)).length, 2);
    assert.equal((await w.deliveries(a.key, late.id)).length, 1);
  });

  it('an event whose transaction rolls back is never delivered; a committed one always is', async () => {
    const { key, workspaceId } = await w.workspace();
    await w.register(key, ['message.sent']);
    await assert.rejects(
      w.app.deps.orm.em.fork().transactional(async (em) => {
        await recordEvent(em, workspaceId, anyEvent('message.sent', { messageId: 'msg_rolled_back' }), w.clock.now());
        throw new Error('the change failed');
      }),
      /the change failed/,
    );
    const committed = await w.emit(workspaceId, 'message.sent', { messageId: 'msg_committed' });
    await dispatcher.runRound();
    assert.deepEqual(
      w.receiver.received.map((q) => q.json.id),
      [committed],
    );
  });

  it('the outbox and a new subscription are ordered: an event written while a webhook is created waits for it and reaches it; a creation waits for the event writers in flight', async () => {
    const { key, workspaceId } = await w.workspace();
    const lockWaits = async () =>
      (await db.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`)).rows[0].n;
    // 1. A webhook's creation holds the outbox (as WebhookService.create does) while an event is written.
    let commit!: () => void;
    const committed = new Promise<void>((r) => (commit = r));
    let held!: () => void;
    const holding = new Promise<void>((r) => (held = r));
    const creating = w.app.deps.orm.em.fork().transactional(async (em) => {
      await holdOutbox(em);
      await insertWebhook(em, {
        id: 'whk_ordered', workspaceId, url: w.receiver.url('/ordered'), events: ['reply.received'], status: 'active',
        signingSecretEnc: w.app.deps.crypto.encrypt('secret'), createdAt: w.clock.now(), updatedAt: w.clock.now(),
      });
      held();
      await committed;
    });
    await holding;
    const writing = w.record(workspaceId, 'reply.received', { replyId: 'rpl_ordered' });
    try {
      await waitFor('the event writer waiting for the creation', async () => (await lockWaits()) === 1);
    } finally {
      commit();
    }
    await creating;
    const id = await writing;
    assert.ok(id, 'the event was written: its statement saw the webhook committed while it waited');
    await dispatcher.runRound();
    assert.deepEqual(w.receiver.received.map((q) => [q.path, q.json.id]), [['/ordered', id]]);

    // 2. The other way round: an event writer's transaction is open; WebhookService.create waits for it.
    let finish!: () => void;
    const finished = new Promise<void>((r) => (finish = r));
    let wrote!: () => void;
    const written = new Promise<void>((r) => (wrote = r));
    const writer = w.app.deps.orm.em.fork().transactional(async (em) => {
      await recordEvent(em, workspaceId, anyEvent('message.sent', { messageId: 'msg_before' }), w.clock.now());
      wrote();
      await finished;
    });
    await written;
    let created = false;
    const creation = w.app.request('POST', '/v1/webhooks', { key, body: { url: w.receiver.url('/late'), events: ['message.sent'] } }).then((r) => ((created = true), r));
    try {
      await waitFor('the creation waiting for the event writer', async () => (await lockWaits()) === 1);
      assert.equal(created, false);
    } finally {
      finish();
    }
    await writer;
    assert.equal((await creation).status, 201);
  });

  it('rotating the secret: the next attempt is signed with the new secret only', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const rotated = (await w.app.request('POST', `/v1/webhooks/${hook.id}/rotate-secret`, { key })).body;
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_1' });
    await dispatcher.runRound();
    const [req] = w.receiver.received;
    assert.ok(verifySignature(req, rotated.signingSecret));
    assert.ok(!verifySignature(req, hook.signingSecret));
    assert.equal(req.headers['x-service-signature'], createHmac('sha256', rotated.signingSecret).update(req.body).digest('hex'));
  });
});
