import assert from 'node:assert/strict';
import pg from 'pg';
import { SmtpMessenger, type Messenger, type MailAccount, type OutgoingMail } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { requeueExpired } from '../../src/modules/messages/transitions.ts';
import { postponeNextStep } from '../../src/modules/messages/enrollments.ts';
import { SendWakeup } from '../../src/modules/sending/wakeup.ts';
import { transactionRetries } from '../../src/db/transaction.ts';
import { waitFor } from '../support/wait.ts';
import { afterFirstGuard, sendingWorld } from './world.ts';
import type { TestApp } from '../support/harness.ts';

describe('sending engine: pause, wake-up, shutdown, leases and crash bounds', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  const { clock, sink, setup, stats, to } = w;
  let app: TestApp, db: pg.Client, messenger: SmtpMessenger, dispatcher: SendDispatcher;
  before(() => ({ app, db, messenger, dispatcher } = w));

  it('pause: a message whose guard passed finishes; nothing else is sent after the pause commits; resume sends the rest once', async () => {
    const leads = Array.from({ length: 6 }, (_, i) => ({ email: `pz${i}@lead.example` }));
    const t = await setup({ leads });
    // The pause commits after the first message's guard passed, before the end of its data.
    const pausing = afterFirstGuard(messenger, async () => {
      assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    });
    const d = new SendDispatcher(app.deps, pausing, { maxConnections: 1, retryDelaysMs: [60_000] });
    await d.runRound();
    await d.close();
    assert.equal(sink.received.length, 1, 'only the in-flight message went out');
    let s = await stats(t);
    assert.equal(s.queued, 5);
    assert.equal(s.sent, 1);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 1, 'paused: nothing more');
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 6);
    assert.equal(new Set(sink.received.map((r) => r.to[0])).size, 6, 'no duplicates');
    s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [6, 0]);
  });

  it("a sender account paused mid-round: its messages not yet past their guard go back to the queue; they go out once it resumes", async () => {
    const leads = Array.from({ length: 6 }, (_, i) => ({ email: `ap${i}@lead.example` }));
    const t = await setup({ leads });
    const pausing = afterFirstGuard(messenger, async () => {
      await app.services().senders.setStatus(t.senders[0], 'paused');
    });
    const d = new SendDispatcher(app.deps, pausing, { maxConnections: 1, retryDelaysMs: [60_000] });
    await d.runRound();
    await d.close();
    assert.equal(sink.received.length, 1, 'only the message past its guard went out');
    let s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [1, 5]);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 1, 'a paused account sends nothing');
    await app.services().senders.setStatus(t.senders[0], 'active');
    await dispatcher.runRound();
    assert.equal(sink.received.length, 6);
    assert.equal(new Set(sink.received.map((r) => r.to[0])).size, 6, 'no duplicates');
    s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [6, 0]);
  });

  it('an account taken out of its pool mid-round: what it had claimed finishes; the pool claims nothing more for it', async () => {
    const leads = Array.from({ length: 6 }, (_, i) => ({ email: `rm${i}@lead.example` }));
    const t = await setup({ leads, senders: [{ email: 'gone@acme.example' }, { email: 'kept@acme.example' }] });
    const fromOf = (r: (typeof sink.received)[number]) => r.parsed.from?.value[0].address;
    // The removal commits after the first message's guard passed: the whole batch (three
    // messages for each account, in rotation) was claimed before it.
    const removing = afterFirstGuard(messenger, async () => {
      const r = await app.request('DELETE', `/v1/sender-pools/${t.poolId}/members/${t.senders[0]}`, { key: t.key });
      assert.equal(r.status, 200, r.text);
    });
    const d = new SendDispatcher(app.deps, removing, { maxConnections: 1, retryDelaysMs: [60_000] });
    await d.runRound();
    await d.close();
    assert.equal(sink.received.length, 6);
    assert.equal(sink.received.filter((r) => fromOf(r) === 'gone@acme.example').length, 3, 'its claimed messages finished');
    // New leads: only the account still in the pool sends.
    await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'rm6@lead.example' }, { email: 'rm7@lead.example' }] } });
    await dispatcher.runRound();
    assert.equal(sink.received.length, 8);
    assert.deepEqual(sink.received.slice(6).map(fromOf), ['kept@acme.example', 'kept@acme.example']);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [8, 0]);
  });

  it('a sending window that closes mid-round: messages claimed but not yet sent go back to the queue, and none is claimed after it', async () => {
    const leads = Array.from({ length: 6 }, (_, i) => ({ email: `win${i}@lead.example` }));
    // The world's clock stands on a Monday at 10:00 UTC; the window closes at 10:01.
    const t = await setup({ leads, campaign: { schedule: { timezone: 'UTC', days: ['mon'], start: '09:00', end: '10:01' } } });
    let closed = false;
    const closing: Messenger = {
      send: async (account: MailAccount, mail: OutgoingMail, beforeEnd?: () => Promise<void>) => {
        const outcome = await messenger.send(account, mail, beforeEnd);
        if (!closed) {
          closed = true;
          clock.advance(2 * 60_000);
        }
        return outcome;
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, closing, { maxConnections: 1, retryDelaysMs: [60_000] });
    await d.runRound();
    await d.close();
    assert.equal(sink.received.filter((r) => r.to[0].startsWith('win')).length, 1, 'only the message sent inside the window');
    const s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [1, 5]);
    const states = (await db.query(`select state, count(*)::int as n from outbound_messages where campaign_id = $1 group by state order by state`, [t.campaignId])).rows;
    assert.deepEqual(states, [{ state: 'queued', n: 5 }, { state: 'sent', n: 1 }]);
  });

  it("an account found unreachable gives back its other claimed messages at once instead of trying each against the same server", async () => {
    const leads = Array.from({ length: 6 }, (_, i) => ({ email: `dead${i}@lead.example` }));
    const t = await setup({ leads });
    let tries = 0;
    const dead: Messenger = {
      send: async () => {
        tries++;
        return { kind: 'unreachable', response: 'connect ETIMEDOUT 192.0.2.1:25' };
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, dead, { maxConnections: 1, retryDelaysMs: [60_000] });
    await d.runRound();
    await d.close();
    // Kept out of the later tests' rounds.
    await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key });
    // The first failure, and at most one more from a batch claimed while it was under way (a
    // claim overlaps the sends); before, each of the six waited its turn at the same server.
    assert.ok(tries <= 2, `${tries} attempts against the dead server`);
    const s = await stats(t);
    assert.deepEqual([s.sent, s.bounced, s.queued], [0, 0, 6]);
    const account = (await app.request('GET', '/v1/sender-accounts', { key: t.key })).body[0];
    assert.equal(account.health, 'unreachable');
  });

  it("pools are sent for side by side in a round: one whose server hangs does not hold up another's mail", async () => {
    const a = await setup({ leads: [{ email: 'hang@lead.example' }] });
    const b = await setup({ leads: [{ email: 'quick@lead.example' }] });
    // The pool a round would reach first (campaigns in id order) is the one whose server hangs.
    const [slow, fast] = a.campaignId < b.campaignId ? [a, b] : [b, a];
    let quickSent!: () => void;
    const quick = new Promise<void>((resolve) => (quickSent = resolve));
    let waitedOut = false;
    const hanging: Messenger = {
      send: async (account: MailAccount, mail: OutgoingMail, beforeEnd?: () => Promise<void>) => {
        if (account.id === slow.senders[0]) {
          // Hangs until the other pool's message went out (a server that never answers, within reason).
          await Promise.race([quick, new Promise<void>((r) => setTimeout(() => ((waitedOut = true), r()), 5_000))]);
        }
        const outcome = await messenger.send(account, mail, beforeEnd);
        if (account.id === fast.senders[0]) quickSent();
        return outcome;
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, hanging, { maxConnections: 1, retryDelaysMs: [60_000] });
    await d.runRound();
    await d.close();
    assert.equal(waitedOut, false, "the other pool's message went out while the first pool's server hung");
    assert.deepEqual(sink.received.map((r) => r.to[0]).filter((to) => to === 'hang@lead.example' || to === 'quick@lead.example').sort(), ['hang@lead.example', 'quick@lead.example']);
  });

  it('steps removed while paused: a lead waiting for a removed step completes at once (stats, leads, its message cancelled); nothing of it is sent after resume', async () => {
    const t = await setup({
      leads: [{ email: 'cut1@lead.example' }, { email: 'cut2@lead.example' }],
      steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1 }, { subject: '', bodyHtml: 'three', delayHours: 1 }],
    });
    await dispatcher.runRound();
    assert.equal(sink.received.length, 2);
    let s = await stats(t);
    assert.deepEqual([s.sent, s.scheduled, s.queued], [2, 2, 0]);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    // Two steps stay: the scheduled step 1 is still there, so nothing ends.
    const keepTwo = await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1 }] } });
    assert.equal(keepTwo.status, 200, keepTwo.text);
    s = await stats(t);
    assert.equal(s.scheduled, 2);
    // One step: step 1 is gone, and the leads waiting for it have finished the sequence.
    const keepOne = await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }] } });
    assert.equal(keepOne.status, 200, keepOne.text);
    s = await stats(t);
    assert.deepEqual([s.sent, s.scheduled, s.queued], [2, 0, 0]);
    const leads = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    assert.deepEqual(leads.map((l: { status: string; nextSendAt: string | null }) => [l.status, l.nextSendAt]), [['completed', null], ['completed', null]]);
    const { rows } = await db.query(`select state, cancel_reason from outbound_messages where campaign_id = $1 and step_index = 1`, [t.campaignId]);
    assert.deepEqual(rows.map((r) => [r.state, r.cancel_reason]), [['cancelled', 'completed'], ['cancelled', 'completed']]);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
    clock.advance(2 * 3600_000);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 2, 'nothing more is sent');
  });

  it('every step removed from a started campaign is 400 and changes nothing: its leads go on with their sequence at resume', async () => {
    const t = await setup({
      leads: [{ email: 'none1@lead.example' }],
      steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1 }],
    });
    await dispatcher.runRound();
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    const none = await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { name: 'Emptied', sequenceSteps: [] } });
    assert.equal(none.status, 400, none.text);
    assert.equal(none.body.error.code, 'invalid_request');
    assert.deepEqual(none.body.errors.map((e: { field: string }) => e.field), ['sequenceSteps']);
    const campaign = (await app.request('GET', `/v1/campaigns/${t.campaignId}`, { key: t.key })).body;
    assert.deepEqual([campaign.name, campaign.sequenceStepCount], ['Seq', 2], 'nothing written');
    const [lead] = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    assert.equal(lead.status, 'active');
    assert.equal((await stats(t)).scheduled, 1);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
    clock.advance(3600_000);
    await dispatcher.runRound();
    assert.deepEqual(to('none1@lead.example').map((r) => r.parsed.text), ['one', 'two']);
  });

  it("delays changed while paused: each waiting follow-up is due its new delay after the previous step was sent (queued ones go back to waiting); an out-of-office postponement stays the floor, however often the delay changes", async () => {
    const H = 3600_000;
    const t = await setup({
      leads: [{ email: 'dl1@lead.example' }, { email: 'dl2@lead.example' }, { email: 'dl3@lead.example' }],
      steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 2 }],
    });
    const sentAt = clock.now().getTime();
    await dispatcher.runRound();
    assert.equal(sink.received.length, 3);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    // dl3 answered "out of office until later": its follow-up moves to sent + 10 h.
    const { rows: [away] } = await db.query(`select e.id from enrollments e join leads l on l.id = e.lead_id where e.campaign_id = $1 and l.email = 'dl3@lead.example'`, [t.campaignId]);
    await app.deps.orm.em.fork().transactional((em) => postponeNextStep(em, away.id, new Date(sentAt + 10 * H), clock.now()));
    clock.advance(3 * H);
    await dispatcher.runRound(); // paused: nothing sent, but dl1's and dl2's follow-ups came due (queued)
    let s = await stats(t);
    assert.deepEqual([s.sent, s.queued, s.scheduled], [3, 2, 1]);

    const longer = await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 5 }] } });
    assert.equal(longer.status, 200, longer.text);
    const next = async () =>
      Object.fromEntries(
        (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data.map((l: { email: string; nextSendAt: string }) => [l.email, l.nextSendAt]),
      );
    assert.deepEqual(await next(), {
      'dl1@lead.example': new Date(sentAt + 5 * H).toISOString(),
      'dl2@lead.example': new Date(sentAt + 5 * H).toISOString(),
      'dl3@lead.example': new Date(sentAt + 10 * H).toISOString(),
    });
    s = await stats(t);
    assert.deepEqual([s.queued, s.scheduled], [0, 3], 'the queued follow-ups wait again');
    // Longer than the postponement, then back under it: the postponement stays the floor.
    const steps = (h: number) => ({ sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: h }] });
    assert.equal((await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: steps(12) })).status, 200);
    assert.deepEqual(Object.values(await next()), Array(3).fill(new Date(sentAt + 12 * H).toISOString()));
    assert.equal((await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: steps(2) })).status, 200);
    assert.deepEqual(await next(), {
      'dl1@lead.example': new Date(sentAt + 2 * H).toISOString(),
      'dl2@lead.example': new Date(sentAt + 2 * H).toISOString(),
      'dl3@lead.example': new Date(sentAt + 10 * H).toISOString(),
    });

    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
    await dispatcher.runRound();
    assert.deepEqual(sink.received.slice(3).map((r) => r.to[0]).sort(), ['dl1@lead.example', 'dl2@lead.example'], 'due (2 h after the first step) at resume');
    clock.set(new Date(sentAt + 10 * H - 1000));
    await dispatcher.runRound();
    assert.equal(sink.received.length, 5, 'not before the lead is back');
    clock.set(new Date(sentAt + 10 * H));
    await dispatcher.runRound();
    assert.deepEqual(sink.received.slice(5).map((r) => r.to[0]), ['dl3@lead.example']);
    s = await stats(t);
    assert.deepEqual([s.sent, s.queued, s.scheduled], [6, 0, 0]);
  });

  it('a change of steps that ends some leads and moves others does not deadlock with a promotion holding a moved message', async () => {
    const H = 3600_000;
    const t = await setup({
      leads: [{ email: 'dd1@lead.example' }],
      steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1 }, { subject: '', bodyHtml: 'three', delayHours: 1 }],
    });
    await dispatcher.runRound();
    clock.advance(H);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'dd2@lead.example' }] } })).status, 200);
    await dispatcher.runRound();
    // dd1 waits for step 2, dd2 for step 1.
    assert.deepEqual([to('dd1@lead.example').length, to('dd2@lead.example').length], [2, 1]);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    // A promotion in flight, as promoteDue makes one: dd2's follow-up locked, the counters next.
    const promotion = new pg.Client({ connectionString: app.databaseUrl });
    await promotion.connect();
    const retriesBefore = transactionRetries(app.deps.orm);
    try {
      await promotion.query('begin');
      await promotion.query(
        `select m.id from outbound_messages m join enrollments e on e.id = m.enrollment_id join leads l on l.id = e.lead_id
          where m.campaign_id = $1 and l.email = 'dd2@lead.example' and m.step_index = 1 for update of m`,
        [t.campaignId],
      );
      // Step 2 goes (dd1 completes, a counter moves) and step 1 waits 3 h (dd2's follow-up moves).
      const patch = app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 3 }] } });
      await waitFor('the change waiting for the locked follow-up', async () =>
        (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%outbound_messages%' and pid <> pg_backend_pid()`)).rows.length > 0,
      );
      await promotion.query(`update campaign_counters set scheduled = scheduled where campaign_id = $1`, [t.campaignId]);
      await promotion.query('commit');
      const res = await patch;
      assert.equal(res.status, 200, res.text);
      // A deadlock would be retried and succeed too: only the count shows there was none.
      assert.equal(transactionRetries(app.deps.orm), retriesBefore, 'no deadlock, no retry');
    } finally {
      await promotion.end();
    }
    const leads = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    const byEmail = Object.fromEntries(leads.map((l: { email: string; status: string; nextSendAt: string | null }) => [l.email, [l.status, l.nextSendAt]]));
    assert.deepEqual(byEmail, { 'dd1@lead.example': ['completed', null], 'dd2@lead.example': ['active', new Date(clock.now().getTime() + 3 * H).toISOString()] });
  });

  it('a request whose transaction PostgreSQL aborts in a deadlock runs it again and succeeds (not a 500)', async () => {
    const H = 3600_000;
    const t = await setup({ leads: [{ email: 'dl-retry@lead.example' }], steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1 }] });
    const sentAt = clock.now().getTime();
    await dispatcher.runRound();
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    // Another transaction takes the waiting follow-up, then the campaign: the opposite order of
    // a change of steps (the campaign, then its waiting messages). A lock cycle.
    const other = new pg.Client({ connectionString: app.databaseUrl });
    await other.connect();
    const retriesBefore = transactionRetries(app.deps.orm);
    try {
      await other.query('begin');
      await other.query(`select id from outbound_messages where campaign_id = $1 and state = 'scheduled' for update`, [t.campaignId]);
      const patch = app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 5 }] } });
      await waitFor('the change holding the campaign, waiting for the follow-up', async () =>
        (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%outbound_messages%' and pid <> pg_backend_pid()`)).rows.length > 0,
      );
      // The change waited first, so its deadlock check fires first: PostgreSQL aborts it, and
      // this gets the campaign.
      await other.query(`select id from campaigns where id = $1 for update`, [t.campaignId]);
      await other.query('commit');
      const res = await patch;
      assert.equal(res.status, 200, res.text);
      assert.equal(transactionRetries(app.deps.orm), retriesBefore + 1, 'aborted once, run again once');
    } finally {
      await other.end();
    }
    const [lead] = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    assert.equal(lead.nextSendAt, new Date(sentAt + 5 * H).toISOString(), 'the retried change is the one written');
    const metrics = await app.deps.metrics.text();
    assert.match(metrics, new RegExp(`^mailgate_db_transaction_retries_total ${retriesBefore + 1}$`, 'm'));
  });

  it('a lead away for less than the wait: shortening the delay later still waits for the lead to be back', async () => {
    const H = 3600_000;
    const t = await setup({ leads: [{ email: 'away@lead.example' }], steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 48 }] });
    const sentAt = clock.now().getTime();
    await dispatcher.runRound();
    const { rows: [e] } = await db.query(`select e.id from enrollments e where e.campaign_id = $1`, [t.campaignId]);
    // Back in 10 h: the follow-up, 48 h away, does not move.
    assert.equal(await app.deps.orm.em.fork().transactional((em) => postponeNextStep(em, e.id, new Date(sentAt + 10 * H), clock.now())), null);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    assert.equal((await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 2 }] } })).status, 200);
    const [lead] = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    assert.equal(lead.nextSendAt, new Date(sentAt + 10 * H).toISOString());
  });

  it('a shorter delay set while paused: the follow-up goes out when the new delay is over', async () => {
    const H = 3600_000;
    const t = await setup({ leads: [{ email: 'short@lead.example' }], steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 48 }] });
    const sentAt = clock.now().getTime();
    await dispatcher.runRound();
    assert.equal(to('short@lead.example').length, 1);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    const shorter = await app.request('PATCH', `/v1/campaigns/${t.campaignId}`, { key: t.key, body: { sequenceSteps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1.5 }] } });
    assert.equal(shorter.status, 200, shorter.text);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
    clock.set(new Date(sentAt + 1.5 * H));
    await dispatcher.runRound();
    assert.equal(to('short@lead.example').length, 2, 'sent 1.5 h after the first step, not 48 h');
    assert.deepEqual([(await stats(t)).sent, (await stats(t)).scheduled], [2, 0]);
  });

  it('pause: a message whose guard is answered after the pause commits is abandoned after its data began (the server discards it) and sent once after resume', async () => {
    const leads = Array.from({ length: 3 }, (_, i) => ({ email: `pw${i}@lead.example` }));
    const t = await setup({ leads });
    const mine = () => sink.received.filter((r) => r.to[0].startsWith('pw'));
    const begun = () => sink.dataBegun.filter((to) => to[0].startsWith('pw'));
    // The first message's outcome cannot commit (its campaign's counter row is locked): the
    // outcome writer's statement waits, and every statement after it, which answers the guards
    // of the messages after the first, starts only after the pause below has committed.
    const blocker = new pg.Client({ connectionString: app.databaseUrl });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('select 1 from campaign_counters where campaign_id = $1 for update', [t.campaignId]);
    const real = new SmtpMessenger({ maxConnections: 1 });
    const d = new SendDispatcher(app.deps, real, { maxConnections: 1, retryDelaysMs: [60_000] });
    const round = d.runRound();
    // The first message is accepted; the second one's data has reached the server.
    await waitFor('the second message at its data', async () => mine().length === 1 && begun().length === 2);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    await blocker.query('commit');
    await blocker.end();
    await round;
    await d.close();
    await real.close();
    // The second message's guard may have shared the blocked statement (its snapshot taken
    // before the pause: it goes out) or come after it (it is abandoned); the third one's guard
    // came after. Either way exactly one message reached its data and was discarded, and none
    // began after that (its campaign's next messages wait for their guard first).
    const sent = mine().length;
    assert.ok(sent === 1 || sent === 2, `${sent} sent before the pause took effect`);
    assert.equal(begun().length, sent + 1, 'one message abandoned after its data began, none begun after it');
    let s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [sent, 3 - sent]);
    const { rows } = await db.query(`select state, claimed_by from outbound_messages where campaign_id = $1 and state <> 'sent'`, [t.campaignId]);
    assert.deepEqual(rows, Array.from({ length: 3 - sent }, () => ({ state: 'queued', claimed_by: null })));
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
    await dispatcher.runRound();
    assert.equal(mine().length, 3);
    assert.equal(new Set(mine().map((r) => r.to[0])).size, 3, 'no duplicates');
    s = await stats(t);
    assert.deepEqual([s.sent, s.queued], [3, 0]);
  });

  it('a campaign start wakes the worker: its messages go out without waiting for a scheduled round', async () => {
    const t = await setup({ leads: [{ email: 'wake1@lead.example' }, { email: 'wake2@lead.example' }], start: false });
    // No runRound call here: only the notification of the start can make this worker send.
    const d = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000] });
    const wakeup = new SendWakeup(app.databaseUrl, () => d.wake(), app.deps.log);
    await wakeup.start();
    try {
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(to('wake1@lead.example').length, 0, 'nothing before the start');
      assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
      await waitFor('both messages', async () => to('wake1@lead.example').length + to('wake2@lead.example').length === 2, 5_000);
      // Leads added to the running campaign wake it too.
      const more = await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'wake3@lead.example' }] } });
      assert.equal(more.status, 200);
      await waitFor('the added lead', async () => to('wake3@lead.example').length === 1, 5_000);
    } finally {
      await wakeup.stop();
      d.stop();
      await d.close();
    }
    assert.deepEqual([(await stats(t)).sent, to('wake1@lead.example').length, to('wake2@lead.example').length], [3, 1, 1]);
  });

  it('shutdown: a woken round drains (its message in SMTP finishes and is recorded) before the messenger closes', async () => {
    const t = await setup({ leads: [{ email: 'drain@lead.example' }] });
    let entered!: () => void;
    const inSmtp = new Promise<void>((r) => (entered = r));
    const slow: Messenger = {
      send: async (account: MailAccount, mail: OutgoingMail) => {
        entered();
        await new Promise((r) => setTimeout(r, 300));
        return messenger.send(account, mail);
      },
      close: async () => {},
    };
    const d = new SendDispatcher(app.deps, slow, { maxConnections: 1, retryDelaysMs: [60_000] });
    d.wake();
    await inSmtp;
    d.stop();
    await d.drain(5_000);
    assert.equal(to('drain@lead.example').length, 1);
    assert.equal((await stats(t)).sent, 1);
    await d.close();
  });

  it('an expired claim (a worker that died) goes back to the queue and is sent once', async () => {
    const t = await setup({ leads: [{ email: 'crash@lead.example' }] });
    // A worker claimed it and died before its SMTP transaction: its lease runs out.
    await db.query(`update outbound_messages set state = 'sending', claimed_by = 'dead.worker', lease_until = $2 where campaign_id = $1`, [
      t.campaignId,
      new Date(clock.now().getTime() + 60_000),
    ]);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 0, 'still leased');
    clock.advance(61_000);
    const r = await dispatcher.runRound();
    assert.equal(r.released, 1);
    assert.equal(to('crash@lead.example').length, 1);
    assert.equal((await stats(t)).sent, 1);
  });

  it('a worker keeps the lease of the messages it holds: a long wait does not let them expire', async () => {
    const t = await setup({ leads: [{ email: 'slow@lead.example' }] });
    let meanwhile: { state: string; claimed_by: string } | undefined;
    let d: SendDispatcher;
    const slow: Messenger = {
      send: async (account, mail) => {
        clock.advance(1000); // the claim's 300 ms lease has run out on the clock...
        // ...and the renewal (every 100 ms) moves it past the new time; a fixed wait could end
        // before a renewal computed after the move has committed, on a loaded machine.
        await waitFor('the lease renewed past the moved clock', async () => {
          const [row] = (await db.query(`select lease_until from outbound_messages where campaign_id = $1`, [t.campaignId])).rows;
          return row.lease_until > clock.now();
        });
        await requeueExpired(app.deps.orm.em.fork(), clock.now());
        meanwhile = (await db.query(`select state, claimed_by from outbound_messages where campaign_id = $1`, [t.campaignId])).rows[0];
        return messenger.send(account, mail);
      },
      close: async () => {},
    };
    d = new SendDispatcher(app.deps, slow, { maxConnections: 1, retryDelaysMs: [60_000], leaseMs: 300 });
    await d.runRound();
    await d.close();
    assert.deepEqual(meanwhile, { state: 'sending', claimed_by: d.workerId });
    assert.equal(to('slow@lead.example').length, 1);
    assert.equal((await stats(t)).sent, 1);
  });

  it('when outcomes cannot be committed, the server has at most one message per connection unrecorded', async () => {
    const leads = Array.from({ length: 20 }, (_, i) => ({ email: `stall${i}@lead.example` }));
    const t = await setup({ leads });
    const mine = () => sink.received.filter((r) => r.to[0].startsWith('stall'));
    // The real messenger and server; the count of transactions that reached the end of their
    // data (where the dispatcher makes them wait for an acceptance place).
    const real = new SmtpMessenger({ maxConnections: 2 });
    let atEnd = 0;
    let waiting = 0;
    const watched: Messenger = {
      send: (account, mail, beforeEnd) =>
        real.send(account, mail, beforeEnd && (async () => {
          atEnd++;
          waiting++;
          try {
            await beforeEnd();
          } finally {
            waiting--;
          }
        })),
      close: () => real.close(),
    };
    // PostgreSQL stalls for the outcomes: the campaign's counter row is locked.
    const blocker = new pg.Client({ connectionString: app.databaseUrl });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('select 1 from campaign_counters where campaign_id = $1 for update', [t.campaignId]);
    const d = new SendDispatcher(app.deps, watched, { maxConnections: 2, retryDelaysMs: [60_000] });
    const round = d.runRound();
    // Either too many accepted (the bug), or the standstill: both connections hold a message
    // whose data is sent and which waits to end it (for an acceptance place, held by accepted
    // messages whose outcomes wait for the lock, or for its guard, whose statement is queued
    // behind that write), so nothing else can move until the lock goes. The standstill may come
    // with one message accepted, not two: the first connection's next message can take the
    // second place before the other connection's first message reaches the end of its data, and
    // then waits there for its guard, behind the blocked write (seen once in a full run, 2026-11-30).
    // So: both connections waiting, at least one message past the first two at the end of its
    // data, and nothing moving for half a second (without the bound, acceptances went on).
    try {
      // Not "both waiting" alone: the first two messages wait there too, for their acceptance
      // place and guard, before either is accepted; on a loaded machine the poll saw that
      // moment and the check below found only those two at the end of their data.
      let state = '';
      let since = Date.now();
      await waitFor('too many accepted, or both connections waiting at the end of their data, unchanged for 500 ms', async () => {
        if (mine().length > 2) return true;
        const now = `${mine().length} accepted, ${atEnd} at the end, ${waiting} waiting`;
        if (now !== state) [state, since] = [now, Date.now()];
        return waiting === 2 && atEnd >= 3 && Date.now() - since >= 500;
      }).catch((err: Error) => {
        throw new Error(`${err.message} (${state})`);
      });
      assert.ok(mine().length <= 2, `${mine().length} accepted unrecorded messages, more than the 2 connections`);
      assert.ok(atEnd >= 3, 'the next messages reached the end of their data');
    } finally {
      await blocker.query('commit');
      await blocker.end();
    }
    await round;
    await d.close();
    await real.close();
    assert.equal(mine().length, 20);
    assert.equal(new Set(mine().map((r) => r.to[0])).size, 20);
    assert.equal((await stats(t)).sent, 20);
  });
});
