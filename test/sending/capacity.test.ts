import assert from 'node:assert/strict';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { sendingWorld, HOUR } from './world.ts';
import type { TestApp } from '../support/harness.ts';
import pg from 'pg';
import { claimForPool } from '../../src/modules/sending/capacity.ts';
import { waitFor } from '../support/wait.ts';

describe('sending engine: pool capacity, account limits and schedule', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  const { clock, sink, setup, stats, to } = w;
  let app: TestApp, db: pg.Client, dispatcher: SendDispatcher;
  before(() => ({ app, db, dispatcher } = w));

  it('pool capacity: never more than dailyCapacity in any rolling 24 hours; remainingVolume exact', async () => {
    const leads = Array.from({ length: 5 }, (_, i) => ({ email: `cap${i}@lead.example` }));
    const t = await setup({ leads, capacity: 3 });
    const pool = async () => (await app.request('GET', '/v1/sender-pools', { key: t.key })).body[0];
    await dispatcher.runRound();
    await dispatcher.runRound();
    assert.equal(sink.received.length, 3);
    assert.equal((await pool()).remainingVolume, 0);
    let s = await stats(t);
    assert.deepEqual([s.queued, s.sendersAvailable, s.blockedReason], [2, 1, 'pool_capacity_reached'], 'waiting, not dropped, and saying why');
    clock.advance(23 * HOUR);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 3);
    assert.equal((await stats(t)).blockedReason, 'pool_capacity_reached');
    clock.advance(HOUR + 1000);
    assert.equal((await pool()).remainingVolume, 3);
    s = await stats(t);
    assert.deepEqual([s.queued, s.blockedReason], [2, null]);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 5);
    assert.equal((await pool()).remainingVolume, 1);
  });

  it('account limits: dailyLimit per account, rotation across the pool, minInterval spacing', async () => {
    const leads = Array.from({ length: 6 }, (_, i) => ({ email: `lim${i}@lead.example` }));
    const t = await setup({
      leads,
      senders: [
        { email: 'one@acme.example', dailyLimit: 1 },
        { email: 'two@acme.example', dailyLimit: 2 },
      ],
    });
    await dispatcher.runRound();
    assert.equal(sink.received.length, 3);
    const { rows } = await db.query(`select sender_account_id, count(*)::int as n from outbound_messages where campaign_id = $1 and state = 'sent' group by 1`, [t.campaignId]);
    assert.deepEqual(new Map(rows.map((r) => [r.sender_account_id, r.n])), new Map([[t.senders[0], 1], [t.senders[1], 2]]));
    // The pool has room (1,000 a day); both accounts reached their own limits.
    const limited = await stats(t);
    assert.deepEqual([limited.queued, limited.sendersAvailable, limited.blockedReason], [3, 2, 'sender_limits_reached']);

    sink.received.length = 0;
    const spaced = await setup({ leads: [{ email: 'sp1@lead.example' }, { email: 'sp2@lead.example' }, { email: 'sp3@lead.example' }], senders: [{ email: 'slow@acme.example', minIntervalMs: 60_000 }] });
    await dispatcher.runRound();
    await dispatcher.runRound();
    assert.equal(sink.received.length, 1);
    clock.advance(59_000);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 1);
    clock.advance(1_000);
    await dispatcher.runRound();
    assert.equal(sink.received.length, 2);
    assert.equal((await stats(spaced)).queued, 1);
  });

  it('limits changed mid-campaign through the API: lowered below what was sent, the account and the pool stop at once; raised, they go on', async () => {
    // There was no way to change an account's dailyLimit or minInterval, or a pool's
    // dailyCapacity, once created (neither API nor CLI): a pool owner mid-campaign could only
    // pause the account (found by a review, 2026-11-29).
    const leads = Array.from({ length: 8 }, (_, i) => ({ email: `chg${i}@lead.example` }));
    const t = await setup({ leads, capacity: 5, senders: [{ email: 'chg@acme.example', dailyLimit: 3 }] });
    // Only this test's leads: other tests' campaigns may still have mail waiting for the clock.
    const sent = () => sink.received.filter((r) => r.to.some((x) => /^chg\d@lead\.example$/.test(x))).length;
    const patchAccount = (body: object) => app.request('PATCH', `/v1/sender-accounts/${t.senders[0]}`, { key: t.key, body });
    const patchPool = (body: object) => app.request('PATCH', `/v1/sender-pools/${t.poolId}`, { key: t.key, body });
    await dispatcher.runRound();
    assert.equal(sent(), 3);
    // Lowered below the 3 already sent: nothing more, and the stats say why.
    const lowered = await patchAccount({ dailyLimit: 2 });
    assert.equal(lowered.status, 200, lowered.text);
    assert.deepEqual([lowered.body.dailyLimit, lowered.body.sentLast24h], [2, 3]);
    await dispatcher.runRound();
    assert.equal(sent(), 3);
    assert.equal((await stats(t)).blockedReason, 'sender_limits_reached');
    // Raised: one more up to the new limit... then the pool's capacity, lowered to 4, holds.
    assert.equal((await patchAccount({ dailyLimit: 10 })).status, 200);
    const pool = await patchPool({ dailyCapacity: 4 });
    assert.equal(pool.status, 200, pool.text);
    assert.deepEqual([pool.body.dailyCapacity, pool.body.remainingVolume], [4, 1]);
    await dispatcher.runRound();
    assert.equal(sent(), 4);
    assert.equal((await stats(t)).blockedReason, 'pool_capacity_reached');
    // Capacity raised, an interval of 60 s set: it spaces the account's sends from its last one.
    assert.equal((await patchPool({ dailyCapacity: 100 })).body.remainingVolume, 96);
    assert.equal((await patchAccount({ minIntervalSeconds: 60 })).body.minIntervalSeconds, 60);
    await dispatcher.runRound();
    assert.equal(sent(), 4, 'inside the 60 s interval');
    clock.advance(60_000);
    await dispatcher.runRound();
    await dispatcher.runRound();
    assert.equal(sent(), 5);
    // No limit at all, no interval: the rest goes.
    assert.equal((await patchAccount({ dailyLimit: null, minIntervalSeconds: 0 })).body.dailyLimit, null);
    await dispatcher.runRound();
    assert.equal(sent(), 8);
    // Bad input: 400 in the envelope, nothing changed; another workspace's ids are 404.
    for (const body of [{}, { dailyLimit: 0 }, { dailyLimit: 1.5 }, { minIntervalSeconds: -1 }, { minIntervalSeconds: 86_401 }, { dailyLimit: 5, smtpUrl: 'smtp://x' }]) {
      const res = await patchAccount(body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, 'invalid_request');
    }
    for (const body of [{}, { dailyCapacity: -1 }, { dailyCapacity: 2.5 }, { dailyCapacity: null }, { dailyCapacity: '5' }]) {
      const res = await patchPool(body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
    }
    const { rows: [row] } = await db.query('select a.daily_limit, a.min_interval_ms, p.daily_capacity from sender_accounts a, sender_pools p where a.id = $1 and p.id = $2', [t.senders[0], t.poolId]);
    assert.deepEqual([row.daily_limit, Number(row.min_interval_ms), row.daily_capacity], [null, 0, 100]);
    const other = await setup({ leads: [{ email: 'chg-other@lead.example' }] });
    const foreignAccount = await app.request('PATCH', `/v1/sender-accounts/${t.senders[0]}`, { key: other.key, body: { dailyLimit: 1 } });
    assert.deepEqual([foreignAccount.status, foreignAccount.body.error.code], [404, 'sender_account_not_found']);
    const foreignPool = await app.request('PATCH', `/v1/sender-pools/${t.poolId}`, { key: other.key, body: { dailyCapacity: 1 } });
    assert.deepEqual([foreignPool.status, foreignPool.body.error.code], [404, 'sender_pool_not_found']);
  });

  it('rotation goes on from one claim to the next: leads that arrive one at a time take the accounts in turn', async () => {
    // Each claim started its rotation at the pool's first account (by id), so with one new lead
    // per claim (leads trickling into a running campaign) every first step went out through
    // that account until it was full (found by a review, 2026-11-29).
    const t = await setup({ leads: [{ email: 'turn0@lead.example' }], senders: [{ email: 'turn-a@acme.example' }, { email: 'turn-b@acme.example' }, { email: 'turn-c@acme.example' }] });
    await dispatcher.runRound();
    for (let i = 1; i < 6; i++) {
      clock.advance(1_000);
      const res = await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: `turn${i}@lead.example` }] } });
      assert.equal(res.status, 200, res.text);
      await dispatcher.runRound();
    }
    const { rows } = await db.query(
      `select l.email, m.sender_account_id from outbound_messages m join leads l on l.id = m.lead_id where m.campaign_id = $1 and m.state = 'sent' order by l.email`,
      [t.campaignId],
    );
    assert.equal(rows.length, 6);
    const sorted = [...t.senders].sort();
    assert.deepEqual(
      rows.map((r) => sorted.indexOf(r.sender_account_id)),
      [0, 1, 2, 0, 1, 2],
    );
  });

  it('a paused account is skipped; its leads’ follow-ups move to an active account', async () => {
    const t = await setup({
      leads: [{ email: 'mv@lead.example' }],
      senders: [{ email: 'first@acme.example' }, { email: 'second@acme.example' }],
      steps: [
        { subject: 'a', bodyHtml: 'a' },
        { subject: '', bodyHtml: 'b', delayHours: 1 },
      ],
    });
    await dispatcher.runRound();
    const first = (await db.query(`select sender_account_id from outbound_messages where campaign_id = $1 and step_index = 0`, [t.campaignId])).rows[0].sender_account_id;
    await app.services().senders.setStatus(first, 'paused');
    clock.advance(HOUR);
    await dispatcher.runRound();
    const second = (await db.query(`select sender_account_id from outbound_messages where campaign_id = $1 and step_index = 1`, [t.campaignId])).rows[0].sender_account_id;
    assert.notEqual(second, first);
    assert.equal(to('mv@lead.example').length, 2);
  });

  it('an account taken out of the pool: its leads’ next steps go from the pool’s other account, in the same thread; what it sent still counts in the pool’s capacity', async () => {
    const t = await setup({
      leads: [{ email: 'out1@lead.example' }, { email: 'out2@lead.example' }],
      senders: [{ email: 'leaving@acme.example' }, { email: 'staying@acme.example' }],
      capacity: 10,
      steps: [
        { subject: 'first', bodyHtml: 'a' },
        { subject: '', bodyHtml: 'b', delayHours: 1 },
        { subject: '', bodyHtml: 'c', delayHours: 1 },
      ],
    });
    const fromOf = (r: (typeof sink.received)[number]) => r.parsed.from?.value[0].address;
    const [leaving, staying] = t.senders;
    await dispatcher.runRound();
    // The rotation gave each account one lead: the one `leaving` wrote to is sticky to it.
    const first = sink.received.find((r) => fromOf(r) === 'leaving@acme.example')!;
    assert.ok(first, 'one lead got its first step from the account that leaves');
    const lead = first.to[0];
    const pool = async () => (await app.request('GET', '/v1/sender-pools', { key: t.key })).body.find((p: { id: string }) => p.id === t.poolId);
    assert.equal((await pool()).remainingVolume, 8);

    const removed = await app.request('DELETE', `/v1/sender-pools/${t.poolId}/members/${leaving}`, { key: t.key });
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual([removed.body.senderAccountIds, removed.body.senderCount], [[staying], 1]);
    assert.equal(removed.body.remainingVolume, 8, 'what it sent through the pool still counts');
    const again = await app.request('DELETE', `/v1/sender-pools/${t.poolId}/members/${leaving}`, { key: t.key });
    assert.deepEqual([again.status, again.body.senderAccountIds], [200, [staying]], 'not a member: a no-op');

    clock.advance(HOUR);
    await dispatcher.runRound();
    const second = to(lead)[1];
    assert.ok(second, 'the follow-up did not wait for the account the pool no longer has');
    assert.equal(fromOf(second), 'staying@acme.example');
    assert.equal(second.parsed.subject, 'Re: first');
    assert.equal(second.parsed.inReplyTo, first.parsed.messageId, 'threaded on the step sent from the old address');
    // It stays with the account that took it over.
    clock.advance(HOUR);
    await dispatcher.runRound();
    const third = to(lead)[2];
    assert.equal(fromOf(third), 'staying@acme.example');
    assert.deepEqual(third.parsed.references, [first.parsed.messageId, second.parsed.messageId]);
    assert.equal(sink.received.filter((r) => fromOf(r) === 'leaving@acme.example').length, 1, 'nothing more through the removed account');
    const s = await stats(t);
    assert.deepEqual([s.sent, s.queued, s.scheduled], [6, 0, 0]);
    assert.equal((await pool()).remainingVolume, 4);
  });

  it('messages sticky to a full account wait without holding up the rest of the pool, of this campaign or another', async () => {
    // A small batch (candidates are fetched two per batch slot), so the head of the queue is
    // only follow-ups sticky to the full account.
    const narrow = new SendDispatcher(app.deps, w.messenger, { maxConnections: 2, batchSize: 1, retryDelaysMs: [5 * 60_000] });
    const heads = Array.from({ length: 3 }, (_, i) => ({ email: `head${i}@lead.example` }));
    const t = await setup({
      leads: heads,
      senders: [{ email: 'full@acme.example', dailyLimit: 3 }],
      steps: [
        { subject: 'a', bodyHtml: 'a' },
        { subject: '', bodyHtml: 'b', delayHours: 1 },
      ],
    });
    await narrow.runRound();
    assert.equal(sink.received.length, 3, 'the first steps, all from the one account, which is now at its daily limit');
    sink.users.set('roomy@acme.example', 'pw');
    const roomy = await app.services().senders.add({ workspaceId: t.workspaceId, email: 'roomy@acme.example', name: 'Roomy', smtpUrl: sink.url('roomy@acme.example', 'pw') });
    await app.services().senders.addToPool(t.poolId, roomy.id);
    clock.advance(HOUR + 60_000);
    // Another campaign on the same pool, and a lead added to the first: both due after the
    // three follow-ups, which wait for their account.
    const other = await app.request('POST', '/v1/campaigns', { key: t.key, body: { name: 'Other', senderPoolId: t.poolId, sequenceSteps: [{ subject: 'o', bodyHtml: 'o' }] } });
    assert.equal(other.status, 201);
    assert.equal((await app.request('POST', `/v1/campaigns/${other.body.id}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'other@lead.example' }] } })).status, 200);
    assert.equal((await app.request('POST', `/v1/campaigns/${other.body.id}/start`, { key: t.key })).status, 200);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'late@lead.example' }] } })).status, 200);
    clock.advance(1000);
    await narrow.runRound();
    assert.equal(to('other@lead.example').length, 1, "another campaign's message goes out through the account with room");
    assert.equal(to('late@lead.example').length, 1, "a first step of the same campaign too");
    assert.equal(heads.filter((l) => to(l.email).length === 2).length, 0, 'the follow-ups stay with their account');
    const { rows } = await db.query(`select m.state, count(*)::int as n from outbound_messages m where m.campaign_id = $1 and m.step_index = 1 group by 1 order by 1`, [t.campaignId]);
    assert.deepEqual(rows, [{ state: 'queued', n: 3 }, { state: 'scheduled', n: 1 }], "the heads' follow-ups wait, not dropped (the late lead's is an hour away)");
    clock.advance(24 * HOUR);
    await narrow.runRound();
    assert.equal(heads.filter((l) => to(l.email).length === 2).length, 3, 'sent by their own account once it has room again');
    const sent = await db.query(
      `select m.state, m.sender_account_id from outbound_messages m
        where m.step_index = 1 and m.enrollment_id in (select enrollment_id from outbound_messages where campaign_id = $1 and step_index = 0 and sender_account_id = $2)`,
      [t.campaignId, t.senders[0]],
    );
    assert.deepEqual(sent.rows, Array(3).fill({ state: 'sent', sender_account_id: t.senders[0] }));
  });

  it("an account shared by two pools: claims of the two pools at once never take it past its daily limit", async () => {
    // One account (limit 3) in two pools, a campaign on each. Two workers claim for the two
    // pools at once: the second waits for the account's row lock while the first holds it.
    const t = await setup({ leads: Array.from({ length: 4 }, (_, i) => ({ email: `sh1.${i}@lead.example` })), senders: [{ email: 'shared@acme.example', dailyLimit: 3 }] });
    const shared = t.senders[0];
    const p2 = await app.services().senders.createPool(t.workspaceId, 'second', 1000, [shared]);
    const c2 = await app.request('POST', '/v1/campaigns', { key: t.key, body: { name: 'Two', senderPoolId: p2.id, sequenceSteps: [{ subject: 's', bodyHtml: 's' }] } });
    assert.equal(c2.status, 201);
    assert.equal((await app.request('POST', `/v1/campaigns/${c2.body.id}/leads/bulk`, { key: t.key, body: { leads: Array.from({ length: 4 }, (_, i) => ({ email: `sh2.${i}@lead.example` })) } })).status, 200);
    assert.equal((await app.request('POST', `/v1/campaigns/${c2.body.id}/start`, { key: t.key })).status, 200);
    const request = (poolId: string, campaignId: string, workerId: string) => ({
      poolId, campaignIds: [campaignId], now: clock.now(), batchSize: 50, workerId, leaseUntil: new Date(clock.now().getTime() + HOUR), held: new Set<string>(),
    });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // Worker A claims for the first pool and holds its transaction open.
    let claimedA = -1;
    const first = app.deps.orm.em.fork().transactional(async (em) => {
      claimedA = (await claimForPool(em, request(t.poolId, t.campaignId, 'worker-a'))).length;
      await gate;
    });
    await waitFor('worker A holding its claim', async () => claimedA >= 0);
    // Worker B claims for the second pool: it waits for the shared account's row.
    const second = app.deps.orm.em.fork().transactional((em) => claimForPool(em, request(p2.id, c2.body.id, 'worker-b')));
    try {
      await waitFor('worker B waiting for the account', async () =>
        (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%pool_members%' and pid <> pg_backend_pid()`)).rows.length > 0,
      );
    } finally {
      release();
    }
    await first;
    const claimedB = (await second).length;
    assert.equal(claimedA, 3);
    const { rows } = await db.query(`select count(*)::int as n from outbound_messages where sender_account_id = $1 and state in ('sending', 'sent')`, [shared]);
    assert.deepEqual([claimedB, rows[0].n], [0, 3], 'the second claim sees the first one\'s messages: nothing over the limit');
    await db.query(`update outbound_messages set state = 'queued', claimed_by = null, lease_until = null, pool_id = null, sender_account_id = null where state = 'sending' and sender_account_id = $1`, [shared]);
  });

  it('schedule window: nothing is sent outside it; sending starts when it opens', async () => {
    // 10:00Z on Monday 1 June is 12:00 in Berlin; the window opens at 14:00 local.
    clock.set('2026-06-01T10:00:00.000Z');
    const t = await setup({ leads: [{ email: 'win@lead.example' }], campaign: { schedule: { timezone: 'Europe/Berlin', days: ['mon'], start: '14:00', end: '15:00' } } });
    await dispatcher.runRound();
    assert.equal(to('win@lead.example').length, 0);
    const closed = await stats(t);
    assert.deepEqual([closed.queued, closed.blockedReason], [1, 'outside_schedule']);
    clock.advance(2 * HOUR);
    assert.equal((await stats(t)).blockedReason, null);
    await dispatcher.runRound();
    assert.equal(to('win@lead.example').length, 1);
  });

  it('a closed window is the reason even when the pool is at capacity; nextSendAt is when the window lets a message go', async () => {
    // Monday 8 June 10:00Z is 12:00 in Berlin: the weekday window 12:00-13:00 is open.
    clock.set('2026-06-08T10:00:00.000Z');
    const t = await setup({
      leads: [{ email: 'wa@lead.example' }, { email: 'wb@lead.example' }],
      capacity: 1,
      steps: [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 4 }],
      campaign: { schedule: { timezone: 'Europe/Berlin', days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '12:00', end: '13:00' } },
    });
    await dispatcher.runRound();
    assert.deepEqual([to('wa@lead.example').length, to('wb@lead.example').length], [1, 0], 'the pool sent its one message');
    const next = async () =>
      Object.fromEntries((await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data.map((l: { email: string; nextSendAt: string }) => [l.email, l.nextSendAt]));
    // Window open: wb's step 0 is due now and waits for capacity; wa's step 1 falls due at 14:00Z
    // (16:00 in Berlin, after the window): it can go when the window opens on Tuesday.
    assert.equal((await stats(t)).blockedReason, 'pool_capacity_reached');
    assert.deepEqual(await next(), { 'wa@lead.example': '2026-06-09T10:00:00.000Z', 'wb@lead.example': '2026-06-08T10:00:00.000Z' });
    // 11:30Z: the window has closed with the pool still at capacity. The window holds them both.
    clock.set('2026-06-08T11:30:00.000Z');
    assert.equal((await stats(t)).blockedReason, 'outside_schedule');
    assert.deepEqual(await next(), { 'wa@lead.example': '2026-06-09T10:00:00.000Z', 'wb@lead.example': '2026-06-09T10:00:00.000Z' });
    // Tuesday's window: capacity is back (24 hours after the send); both go.
    clock.set('2026-06-09T10:00:01.000Z');
    assert.equal((await stats(t)).blockedReason, null);
  });
});
