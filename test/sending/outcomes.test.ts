import assert from 'node:assert/strict';
import { type Messenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { sendingWorld } from './world.ts';
import type { TestApp } from '../support/harness.ts';
import pg from 'pg';
import type { EventType } from '../../src/modules/events/catalogue.ts';
import { waitFor } from '../support/wait.ts';

describe('sending engine: outcomes (suppression, bounces, retries, account failures, group commit)', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  const { clock, sink, setup, stats, to } = w;
  let app: TestApp, db: pg.Client, dispatcher: SendDispatcher;
  before(() => ({ app, db, dispatcher } = w));

  it('an address suppressed after it was queued is not sent to', async () => {
    const t = await setup({ leads: [{ email: 'late@lead.example' }, { email: 'fine@lead.example' }] });
    const res = await app.request('POST', '/v1/suppression-list', { key: t.key, body: { emails: ['LATE@lead.example'] } });
    assert.deepEqual(res.body, { suppressed: 1 });
    await dispatcher.runRound();
    assert.deepEqual(sink.received.map((r) => r.to[0]), ['fine@lead.example']);
    // Its transaction reached its data (the guard is answered while the data crosses the wire)
    // and was abandoned before the end of it: the server discarded it.
    assert.ok(sink.dataBegun.some((to) => to[0] === 'late@lead.example'), 'the suppressed message began its data');
    const s = await stats(t);
    assert.equal(s.queued, 0);
    assert.equal(s.sent, 1);
    const leads = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    assert.equal(leads.find((l: { email: string }) => l.email === 'late@lead.example').status, 'suppressed');
  });

  it('5xx: a hard bounce at once, address suppressed, enrollment bounced, message.bounced with the server text', async () => {
    sink.rcptAnswers.set('gone@lead.example', [550, '5.1.1 <gone@lead.example>: Recipient address rejected: User unknown']);
    const t = await setup({ leads: [{ email: 'gone@lead.example' }], steps: [{ subject: 'a', bodyHtml: 'a' }, { subject: '', bodyHtml: 'b' }] });
    await dispatcher.runRound();
    const { rows } = await db.query(`select state, bounce_type, bounce_reason, smtp_response from outbound_messages where campaign_id = $1`, [t.campaignId]);
    assert.equal(rows.length, 1, 'no follow-up is scheduled');
    assert.equal(rows[0].state, 'bounced');
    assert.equal(rows[0].bounce_type, 'hard');
    assert.match(rows[0].bounce_reason, /550 5\.1\.1 .*User unknown/);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.delivered, s.bounced, s.queued, s.scheduled], [1, 0, 1, 0, 0]);
    const sup = await db.query(`select reason from suppressions where workspace_id = $1 and email_key = 'gone@lead.example'`, [t.workspaceId]);
    assert.equal(sup.rows[0].reason, 'hard_bounce');
    const lead = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data[0];
    assert.equal(lead.status, 'bounced');
    const ev = await db.query(`select data from events where type = 'message.bounced' and data->>'campaignId' = $1`, [t.campaignId]);
    assert.equal(ev.rows[0].data.bounceType, 'hard');
    assert.match(ev.rows[0].data.bounceReason, /User unknown/);
    assert.deepEqual(Object.keys(ev.rows[0].data).sort(), ['bounceReason', 'bounceType', 'bouncedAt', 'campaignId', 'email', 'leadId', 'messageId', 'messageIdHeader', 'sequenceStep']);
  });

  it('4xx: retried on the configured delays, then a soft bounce (not suppressed)', async () => {
    sink.rcptAnswers.set('busy@lead.example', [451, '4.7.1 Try again later']);
    const t = await setup({ leads: [{ email: 'busy@lead.example' }] });
    await dispatcher.runRound();
    let m = (await db.query(`select state, attempts, due_at from outbound_messages where campaign_id = $1`, [t.campaignId])).rows[0];
    assert.equal(m.state, 'queued');
    assert.equal(m.attempts, 1);
    assert.equal(new Date(m.due_at).getTime(), clock.now().getTime() + 5 * 60_000);
    clock.advance(4 * 60_000);
    await dispatcher.runRound();
    assert.equal((await db.query(`select attempts from outbound_messages where campaign_id = $1`, [t.campaignId])).rows[0].attempts, 1);
    clock.advance(60_000);
    await dispatcher.runRound();
    clock.advance(30 * 60_000);
    await dispatcher.runRound();
    m = (await db.query(`select state, attempts, bounce_type, bounce_reason from outbound_messages where campaign_id = $1`, [t.campaignId])).rows[0];
    assert.equal(m.state, 'bounced');
    assert.equal(m.attempts, 3);
    assert.equal(m.bounce_type, 'soft');
    assert.match(m.bounce_reason, /451 4\.7\.1 Try again later/);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.delivered, s.bounced, s.queued], [1, 0, 1, 0]);
    assert.equal((await db.query(`select count(*)::int as n from suppressions where email_key = 'busy@lead.example'`)).rows[0].n, 0);
    assert.equal(sink.received.length, 0);
  });

  it('an authentication failure marks the account unhealthy and moves its messages, with no bounce', async () => {
    const leads = Array.from({ length: 4 }, (_, i) => ({ email: `auth${i}@lead.example` }));
    const t = await setup({ leads, senders: [{ email: 'broken@acme.example', password: 'wrong' }, { email: 'healthy@acme.example' }] });
    await dispatcher.runRound();
    await dispatcher.runRound();
    assert.equal(sink.received.length, 4);
    assert.ok(sink.received.every((r) => r.user === 'healthy@acme.example'));
    const accounts = (await app.request('GET', '/v1/sender-accounts', { key: t.key })).body;
    assert.equal(accounts.find((a: { email: string }) => a.email === 'broken@acme.example').health, 'auth_failed');
    assert.equal(accounts.find((a: { email: string }) => a.email === 'healthy@acme.example').health, 'ok');
    const s = await stats(t);
    assert.deepEqual([s.sent, s.bounced, s.queued], [4, 0, 0]);
    // `sender resume` clears the failure so the account is tried again.
    const broken = accounts.find((a: { email: string }) => a.email === 'broken@acme.example');
    await app.services().senders.setStatus(broken.id, 'active');
    const after = (await app.request('GET', '/v1/sender-accounts', { key: t.key })).body;
    assert.equal(after.find((a: { email: string }) => a.email === 'broken@acme.example').health, 'unknown');
  });

  it("the account's own server refusing MAIL FROM is the account's failure: no lead bounced or suppressed, another account sends", async () => {
    sink.mailFromAnswers.set('refused@acme.example', [550, '5.7.1 sender rejected: relaying denied']);
    try {
      const leads = Array.from({ length: 4 }, (_, i) => ({ email: `mf${i}@lead.example` }));
      const t = await setup({ leads, senders: [{ email: 'refused@acme.example' }, { email: 'good@acme.example' }] });
      await dispatcher.runRound();
      await dispatcher.runRound();
      assert.deepEqual(sink.received.map((r) => r.user).filter((u) => u !== 'good@acme.example'), []);
      assert.equal(sink.received.filter((r) => r.to[0].startsWith('mf')).length, 4);
      const s = await stats(t);
      assert.deepEqual([s.sent, s.bounced, s.queued], [4, 0, 0]);
      const sup = await db.query(`select count(*)::int as n from suppressions where workspace_id = $1`, [t.workspaceId]);
      assert.equal(sup.rows[0].n, 0);
      const accounts = (await app.request('GET', '/v1/sender-accounts', { key: t.key })).body;
      const refused = accounts.find((a: { email: string }) => a.email === 'refused@acme.example');
      assert.equal(refused.health, 'unreachable');
      assert.match(refused.healthError, /sender rejected/);
    } finally {
      sink.mailFromAnswers.clear();
    }
  });

  it("a refusal to relay at RCPT TO, or of the From after the data, is the account's own server refusing it: no lead bounced or suppressed", async () => {
    // The account's server would not relay for it (its URL without credentials, a login the
    // server did not take as one): mailgate submits every message to that server, so the
    // refusal says nothing of the lead's address.
    sink.rcptAnswers.set('relay1@lead.example', [554, '5.7.1 <relay1@lead.example>: Relay access denied']);
    sink.rcptAnswers.set('relay2@lead.example', [550, '5.7.54 SMTP; Unable to relay recipient in non-accepted domain']);
    // Postfix's sender restriction, answered at RCPT TO (smtpd_delay_reject).
    sink.rcptAnswers.set('relay3@lead.example', [553, '5.7.1 <norelay@acme.example>: Sender address rejected: not owned by user norelay']);
    // Microsoft 365 refusing the From after the data.
    sink.dataAnswers.set(
      'relay4@lead.example',
      [554, '5.2.0 STOREDRV.Submission.Exception:SendAsDeniedException.MapiExceptionSendAsDenied; Failed to process message due to a permanent exception with message Cannot submit message.'],
    );
    const leadList = [1, 2, 3, 4].map((i) => ({ email: `relay${i}@lead.example` }));
    const t = await setup({ leads: leadList, senders: [{ email: 'norelay@acme.example' }] });
    try {
      await dispatcher.runRound();
      await dispatcher.runRound();
    } finally {
      sink.dataAnswers.clear();
    }
    assert.equal(sink.received.length, 0);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.bounced, s.queued], [0, 0, 4]);
    const sup = await db.query(`select count(*)::int as n from suppressions where workspace_id = $1`, [t.workspaceId]);
    assert.equal(sup.rows[0].n, 0);
    const leads = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    assert.deepEqual(leads.map((l: { status: string }) => l.status), ['active', 'active', 'active', 'active']);
    const account = (await app.request('GET', '/v1/sender-accounts', { key: t.key })).body[0];
    assert.equal(account.health, 'unreachable');
    assert.match(account.healthError, /relay|sender address rejected|SendAsDenied/i);
  });

  it("an account's failure is not undone by another message's success in the same batch: its back-off holds", async () => {
    sink.rcptAnswers.set('throttled@lead.example', [421, '4.7.0 too many connections, try later']);
    const t = await setup({ leads: [{ email: 'fine1@lead.example' }, { email: 'throttled@lead.example' }], senders: [{ email: 'busy.account@acme.example' }] });
    await dispatcher.runRound();
    assert.deepEqual(sink.received.map((r) => r.to[0]), ['fine1@lead.example']);
    const account = (await app.request('GET', '/v1/sender-accounts', { key: t.key })).body[0];
    assert.equal(account.health, 'rate_limited');
    assert.ok(new Date(account.healthRetryAt).getTime() > clock.now().getTime(), 'backing off');
  });

  it('a server limiting messages per connection (421 at MAIL FROM of a reused connection): the message goes over a new connection, the account stays healthy', async () => {
    sink.messagesPerConnection = 2;
    try {
      const leads = Array.from({ length: 7 }, (_, i) => ({ email: `perconn${i}@lead.example` }));
      const t = await setup({ leads, senders: [{ email: 'exim.account@acme.example' }] });
      await dispatcher.runRound();
      assert.deepEqual(sink.received.map((r) => r.to[0]).sort(), leads.map((l) => l.email).sort(), 'each lead once, in one round');
      const s = await stats(t);
      assert.deepEqual([s.sent, s.bounced, s.queued], [7, 0, 0]);
      const account = (await app.request('GET', '/v1/sender-accounts', { key: t.key })).body[0];
      assert.deepEqual([account.health, account.healthRetryAt], ['ok', null]);
    } finally {
      sink.messagesPerConnection = 0;
    }
  });

  it('group commit: outcomes that finish together share one statement; each is recorded with its headers, sticky account and event', async () => {
    const leads = Array.from({ length: 12 }, (_, i) => ({ email: `gc${i}@lead.example` }));
    const t = await setup({ leads });
    // A server that answers four messages at once.
    let waiting: Array<() => void> = [];
    const together: Messenger = {
      send: async () => {
        const answered = new Promise<void>((resolve) => waiting.push(resolve));
        if (waiting.length === 4) for (const r of waiting.splice(0)) r();
        await answered;
        return { kind: 'accepted', response: '250 2.0.0 queued' };
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, together, { maxConnections: 4, retryDelaysMs: [60_000] });
    const r = await d.runRound();
    await d.close();
    assert.equal(r.sent, 12);
    assert.ok(d.acceptedStatements < 12, `${d.acceptedStatements} outcome statements for 12 messages`);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.delivered, s.queued], [12, 12, 0]);
    const { rows } = await db.query(
      `select m.state, m.message_id_header, m.subject, m.smtp_response, e.sender_account_id, e.status
         from outbound_messages m join enrollments e on e.id = m.enrollment_id where m.campaign_id = $1`,
      [t.campaignId],
    );
    assert.equal(rows.length, 12);
    for (const row of rows) {
      assert.equal(row.state, 'sent');
      assert.match(row.message_id_header, /^<msg_.*@acme\.example>$/);
      assert.equal(row.subject, 'Hello there');
      assert.equal(row.smtp_response, '250 2.0.0 queued');
      assert.equal(row.sender_account_id, t.senders[0]);
      assert.equal(row.status, 'completed');
    }
    const ev = await db.query(`select count(*)::int as n from events where type = 'message.sent' and data->>'campaignId' = $1`, [t.campaignId]);
    assert.equal(ev.rows[0].n, 12);
  });

  it('group commit waits for the answers of data already ended: messages answered one after another share one statement', async () => {
    const leads = Array.from({ length: 4 }, (_, i) => ({ email: `gather${i}@lead.example` }));
    const t = await setup({ leads });
    // Four messages end their data together; the server answers them one by one, 5 ms apart.
    const answers: Array<() => void> = [];
    let ended = 0;
    const staggered: Messenger = {
      send: async (_account, _mail, beforeEnd) => {
        await beforeEnd?.();
        const answered = new Promise<void>((resolve) => answers.push(resolve));
        if (++ended === 4)
          void (async () => {
            for (const answer of answers) {
              answer();
              await new Promise((r) => setTimeout(r, 5));
            }
          })();
        await answered;
        return { kind: 'accepted', response: '250 2.0.0 queued' };
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, staggered, { maxConnections: 4, retryDelaysMs: [60_000], outcomeGatherMs: 10_000 });
    const r = await d.runRound();
    await d.close();
    assert.equal(r.sent, 4);
    // Without the wait, the first answer was written alone and the others after it.
    assert.equal(d.acceptedStatements, 1);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [4, 0]);
  });

  it('the wait for answers is bounded: answers that do not come hold the others only the gather time', async () => {
    const leads = Array.from({ length: 3 }, (_, i) => ({ email: `bounded${i}@lead.example` }));
    const t = await setup({ leads });
    // All three end their data; the first is answered at once, the other two only once the
    // first's outcome is committed. Waiting on them without a bound, it was never written.
    let ended = 0;
    let allEnded: () => void = () => {};
    const sentCount = async () => (await db.query(`select count(*)::int as n from outbound_messages where campaign_id = $1 and state = 'sent'`, [t.campaignId])).rows[0].n as number;
    const slow: Messenger = {
      send: async (_account, _mail, beforeEnd) => {
        await beforeEnd?.();
        if (ended++ === 0) await new Promise<void>((resolve) => (allEnded = resolve));
        else {
          if (ended === 3) allEnded();
          await waitFor('the first outcome written while the other answers are held', async () => (await sentCount()) >= 1);
        }
        return { kind: 'accepted', response: '250 2.0.0 queued' };
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, slow, { maxConnections: 3, retryDelaysMs: [60_000], outcomeGatherMs: 50 });
    const r = await d.runRound();
    await d.close();
    assert.equal(r.sent, 3);
    assert.ok(d.acceptedStatements >= 2, `${d.acceptedStatements} statements: the first outcome went before the others' answers`);
    assert.equal(await sentCount(), 3);
  });

  it("a write does not wait for answers not due within the gather time: a slow server's, once its answer time is known", async () => {
    const leads = Array.from({ length: 4 }, (_, i) => ({ email: `slowserver${i}@lead.example` }));
    const t = await setup({ leads });
    // The server answers 600 ms after the end of the data; the second connection starts 300 ms
    // after the first. Each outcome comes while the other connection's answer is due 300 ms
    // later, past the 100 ms a write may wait: waiting for it only held this outcome's place.
    let calls = 0;
    const slow: Messenger = {
      send: async (_account, _mail, beforeEnd) => {
        if (calls++ === 1) await new Promise((r) => setTimeout(r, 300));
        await beforeEnd?.();
        await new Promise((r) => setTimeout(r, 600));
        return { kind: 'accepted', response: '250 2.0.0 queued' };
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, slow, { maxConnections: 2, retryDelaysMs: [60_000], outcomeGatherMs: 100 });
    const r = await d.runRound();
    await d.close();
    assert.equal(r.sent, 4);
    assert.equal(d.gatherWaits, 0, 'no write waited for an answer due after its wait would end');
    assert.equal(d.acceptedStatements, 4);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [4, 0]);
  });

  it('the outbox holds only events a webhook of the workspace subscribes to; the rest of the outcome is the same', async () => {
    // One workspace subscribes to bounces only, another to nothing.
    for (const subscribe of [['message.bounced'], []] as EventType[][]) {
      sink.rcptAnswers.set(`nosub.gone${subscribe.length}@lead.example`, [550, '5.1.1 no such user']);
      const t = await setup({ leads: [{ email: `nosub${subscribe.length}@lead.example` }, { email: `nosub.gone${subscribe.length}@lead.example` }], subscribe });
      await dispatcher.runRound();
      const s = await stats(t);
      assert.deepEqual([s.sent, s.delivered, s.bounced, s.queued], [2, 1, 1, 0]);
      const { rows } = await db.query(`select e.type from events e where e.workspace_id = $1 order by e.type`, [t.workspaceId]);
      assert.deepEqual(rows.map((r) => r.type), subscribe, `workspace subscribing to [${subscribe}]`);
    }
  });
});
