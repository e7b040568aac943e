import assert from 'node:assert/strict';
import type { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { sendingWorld, HOUR } from './world.ts';
import type { TestApp } from '../support/harness.ts';
import pg from 'pg';

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
});
