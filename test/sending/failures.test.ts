import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, subscribeEvents, ManualClock, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger, type Messenger, type MailAccount, type OutgoingMail } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';

// One message that cannot be rendered or sent never stops the others (issue 15, part 2): it
// ends `failed` with its reason, its lead's sequence ends, and the rest of the batch goes out.
describe('sending: a message that fails on its own', function () {
  this.timeout(60_000);
  let app: TestApp;
  let db: pg.Client;
  const clock = new ManualClock('2026-05-04T10:00:00.000Z');
  const sink = new SmtpSink();
  let messenger: SmtpMessenger;
  const dispatchers: SendDispatcher[] = [];

  before(async () => {
    await sink.start();
    app = await startTestApp({ clock, config: { publicUrl: 'https://mg.example.com' } });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 2 });
  });
  after(async () => {
    for (const d of dispatchers) await d.close();
    await messenger.close();
    await db.end();
    await app.close();
    await sink.stop();
  });
  beforeEach(() => {
    sink.received.length = 0;
  });

  function dispatcher(through: Messenger = messenger): SendDispatcher {
    const d = new SendDispatcher(app.deps, through, { maxConnections: 2, retryDelaysMs: [60_000], batchSize: 100 });
    dispatchers.push(d);
    return d;
  }

  /** A workspace with one sender account in one pool. */
  async function pool() {
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const email = `sender.${Math.random().toString(36).slice(2, 8)}@acme.example`;
    sink.users.set(email, 'pw');
    const s = app.services();
    const account = await s.senders.add({ workspaceId: workspace.id, email, name: 'Alice Sender', smtpUrl: sink.url(email, 'pw') });
    const p = await s.senders.createPool(workspace.id, 'pool', 1000, [account.id]);
    // A webhook subscribes to message.sent, so the outbox records it (events/outbox.ts).
    await subscribeEvents(app, workspace.id);
    return { key, workspaceId: workspace.id, poolId: p.id };
  }

  async function campaign(at: { key: string; poolId: string }, steps: Array<{ subject: string; bodyHtml: string; delayHours?: number }>, leads: unknown[]) {
    const res = await app.request('POST', '/v1/campaigns', { key: at.key, body: { name: 'Seq', senderPoolId: at.poolId, sequenceSteps: steps } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const id: string = res.body.id;
    const enrolled = await app.request('POST', `/v1/campaigns/${id}/leads/bulk`, { key: at.key, body: { leads } });
    assert.equal(enrolled.status, 200, JSON.stringify(enrolled.body));
    assert.equal((await app.request('POST', `/v1/campaigns/${id}/start`, { key: at.key })).status, 200);
    return id;
  }

  const stats = async (key: string, id: string) => (await app.request('GET', `/v1/campaigns/${id}/stats`, { key })).body;
  const leadsOf = async (key: string, id: string) => (await app.request('GET', `/v1/campaigns/${id}/leads`, { key })).body.data;
  const to = (addr: string) => sink.received.filter((r) => r.to.includes(addr));
  const messages = async (campaignId: string) =>
    (await db.query(`select id, to_email, step_index, state, last_error, sent_at from outbound_messages where campaign_id = $1 order by to_email, step_index`, [campaignId])).rows;
  const eventsOf = async (campaignId: string) =>
    (await db.query(`select type, data->>'email' as email from events where data->>'campaignId' = $1 and type like 'message.%' order by type, data->>'email'`, [campaignId])).rows;
  /** The JSON log lines at error level or above that name the message. */
  const errorLogs = (messageId: string) =>
    app.logs.lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes(messageId))
      .map((l) => JSON.parse(l) as { level: number; msg: string; messageId?: string })
      .filter((l) => l.level >= 50);

  it('a token naming an Object.prototype member is a missing field (fallback or empty); the lead\'s own field of that name still renders', async () => {
    const at = await pool();
    const id = await campaign(
      at,
      [
        {
          subject: 'S[{{constructor}}][{{toString|friend}}][{{__proto__}}][{{hasOwnProperty|h}}]',
          bodyHtml: '<p>B[{{constructor|there}}][{{toString}}][{{__proto__|P}}][{{hasOwnProperty}}][{{valueOf}}]</p>',
        },
      ],
      [{ email: 'ann@proto.example' }, { email: 'bob@proto.example', constructor: 'Bob & Co', toString: 'Tess' }],
    );
    const r = await dispatcher().runRound();
    assert.equal(r.sent, 2);
    const ann = to('ann@proto.example')[0]?.parsed;
    const bob = to('bob@proto.example')[0]?.parsed;
    assert.ok(ann && bob, 'both delivered');
    assert.equal(ann.subject, 'S[][friend][][h]');
    assert.match(ann.html as string, /<p>B\[there\]\[\]\[P\]\[\]\[\]<\/p>/);
    assert.match(ann.text as string, /B\[there\]\[\]\[P\]\[\]\[\]/);
    assert.equal(bob.subject, 'S[Bob & Co][Tess][][h]');
    assert.match(bob.html as string, /<p>B\[Bob &amp; Co\]\[Tess\]\[P\]\[\]\[\]<\/p>/);
    assert.deepEqual((await messages(id)).map((m) => m.state), ['sent', 'sent']);
    const s = await stats(at.key, id);
    assert.deepEqual([s.sent, s.delivered, s.queued], [2, 2, 0]);
  });

  it('a message whose rendering throws ends failed with the reason, its sequence ends; the rest of the batch is delivered', async () => {
    const at = await pool();
    const followUp = { subject: '', bodyHtml: '<p>Following up</p>', delayHours: 24 };
    // Two campaigns of one pool: their due messages are claimed in one batch.
    const good = await campaign(at, [{ subject: 'Hello {{firstName|there}}', bodyHtml: '<p>Hi {{firstName|there}}</p>' }, followUp], [
      { email: 'g1@batch.example', firstName: 'Gina' },
      { email: 'g2@batch.example' },
      { email: 'g3@batch.example' },
    ]);
    // Real data that makes rendering throw: HTML nested deeper than the text conversion's
    // recursion can follow (60 KB, well within the 256 KB a step may have).
    const broken = await campaign(at, [{ subject: 'Deep', bodyHtml: '<b>'.repeat(20_000) + 'deep {{firstName}}' }, followUp], [{ email: 'deep@batch.example', firstName: 'Dee' }]);

    const r = await dispatcher().runRound();
    assert.equal(r.sent, 3);
    assert.deepEqual(sink.received.map((m) => m.to[0]).sort(), ['g1@batch.example', 'g2@batch.example', 'g3@batch.example']);
    assert.equal(to('g1@batch.example')[0].parsed.subject, 'Hello Gina');

    const [failed, ...more] = await messages(broken);
    assert.equal(more.length, 0, 'no follow-up is scheduled for the failed lead');
    assert.equal(failed.state, 'failed');
    assert.equal(failed.sent_at, null);
    assert.match(failed.last_error, /^rendering the message failed: Maximum call stack size exceeded/);
    const [lead] = await leadsOf(at.key, broken);
    assert.equal(lead.status, 'completed');
    assert.equal(lead.lastEvent, 'failed');
    assert.equal(lead.failureReason, failed.last_error);
    assert.equal(lead.nextSendAt, null);
    const logged = errorLogs(failed.id);
    assert.equal(logged.length, 1, 'logged once at error level with the message id');
    assert.match(logged[0].msg, /rendering a message failed/);

    // Counters: the failed message left `queued` and counts as neither sent nor bounced; no event.
    const b = await stats(at.key, broken);
    assert.deepEqual([b.totalEnrolled, b.queued, b.scheduled, b.sent, b.delivered, b.bounced], [1, 0, 0, 0, 0, 0]);
    assert.deepEqual(await eventsOf(broken), []);
    const g = await stats(at.key, good);
    assert.deepEqual([g.queued, g.scheduled, g.sent, g.delivered, g.bounced], [0, 3, 3, 3, 0]);
    assert.deepEqual((await eventsOf(good)).map((e) => e.type), ['message.sent', 'message.sent', 'message.sent']);
    const goodLeads = await leadsOf(at.key, good);
    assert.ok(goodLeads.every((l: { status: string; lastEvent: string; failureReason: null }) => l.status === 'active' && l.lastEvent === 'sent' && l.failureReason === null));

    // Nothing stays claimed, and the failed message is never tried again.
    assert.equal((await db.query(`select count(*)::int as n from outbound_messages where state = 'sending'`)).rows[0].n, 0);
    clock.advance(25 * 3_600_000);
    const next = await dispatcher().runRound();
    assert.equal(next.sent, 3, 'the good leads\' follow-ups');
    assert.equal(to('deep@batch.example').length, 0);
    assert.deepEqual((await messages(broken)).map((m) => m.state), ['failed']);
  });

  it('a message the messenger throws on (it cannot be composed) ends failed; the rest of the campaign is delivered', async () => {
    const at = await pool();
    const leads = ['c1', 'c2', 'poison', 'c3', 'c4'].map((n) => ({ email: `${n}@compose.example` }));
    const id = await campaign(at, [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }], leads);
    // A seam in front of the real SMTP messenger: it throws, as composing a mail does, for one recipient.
    const throwing: Messenger = {
      send: async (account: MailAccount, mail: OutgoingMail) => {
        if (mail.to === 'poison@compose.example') throw new Error('the mail cannot be composed');
        return messenger.send(account, mail);
      },
      close: async () => {},
    };
    const r = await dispatcher(throwing).runRound();
    assert.equal(r.sent, 4);
    assert.deepEqual(sink.received.map((m) => m.to[0]).sort(), ['c1@compose.example', 'c2@compose.example', 'c3@compose.example', 'c4@compose.example']);
    const poison = (await messages(id)).find((m) => m.to_email === 'poison@compose.example');
    assert.equal(poison.state, 'failed');
    assert.equal(poison.last_error, 'sending the message failed: the mail cannot be composed');
    const lead = (await leadsOf(at.key, id)).find((l: { email: string }) => l.email === 'poison@compose.example');
    assert.deepEqual([lead.status, lead.lastEvent, lead.failureReason], ['completed', 'failed', poison.last_error]);
    assert.equal(errorLogs(poison.id).length, 1);
    const s = await stats(at.key, id);
    assert.deepEqual([s.queued, s.sent, s.delivered, s.bounced], [0, 4, 4, 0]);
    assert.equal((await eventsOf(id)).length, 4);
  });
});
