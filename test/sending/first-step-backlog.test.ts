// A large start's first steps (docs/decisions.md, "A large start's first steps"): the start
// writes the first FIRST_STEPS_AT_ONCE enrollments' step 0 and counts the rest queued from its
// commit; the workers write the rest from the campaign's backlog, in enrollment order, each
// once, whatever ends, joins or leaves the campaign meanwhile. Real PostgreSQL, the real
// dispatcher and an smtp-server sink.
import assert from 'node:assert/strict';
import pg from 'pg';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { FIRST_STEPS_AT_ONCE, backlogCampaigns, writeBacklogChunk } from '../../src/modules/messages/queue.ts';
import { waitFor } from '../support/wait.ts';
import { sendingWorld, type Setup } from './world.ts';
import type { TestApp } from '../support/harness.ts';

describe('sending engine: a large start and its first-step backlog', function () {
  this.timeout(120_000);
  const w = sendingWorld();
  const { clock, setup, stats } = w;
  let app: TestApp, db: pg.Client, dispatcher: SendDispatcher;
  before(() => ({ app, db, dispatcher } = w));

  const EXTRA = 1_500;
  const TOTAL = FIRST_STEPS_AT_ONCE + EXTRA;
  const leadsFor = (prefix: string, from: number, to: number) => Array.from({ length: to - from }, (_, i) => ({ email: `${prefix}${from + i}@big.example`, firstName: `L${from + i}` }));

  /**
   * A campaign of TOTAL leads, not started: the first ten enrolled by setup, the rest in one
   * request. Its pool sends one message a day unless told (the dispatcher's round in the last
   * test sends every running campaign's).
   */
  async function bigCampaign(prefix: string, opts: { capacity?: number; before?: (t: Setup) => Promise<void> } = {}): Promise<Setup> {
    const t = await setup({ leads: leadsFor(prefix, 0, 10), start: false, capacity: opts.capacity ?? 1 });
    await opts.before?.(t);
    const res = await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: leadsFor(prefix, 10, TOTAL) } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return t;
  }
  const start = async (t: Setup) => assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
  const rows = async (t: Setup) => Number((await db.query(`select count(*) from outbound_messages where campaign_id = $1`, [t.campaignId])).rows[0].count);
  const backlog = async (t: Setup) => (await db.query(`select after_seq, through_seq from first_step_backlog where campaign_id = $1`, [t.campaignId])).rows[0];
  const lead = async (t: Setup, email: string) => {
    const all = await app.request('GET', `/v1/campaigns/${t.campaignId}/leads?q=${encodeURIComponent(email)}`, { key: t.key });
    return all.body.data.find((l: { email: string }) => l.email === email);
  };
  /** Every chunk of every backlog, as a worker writes them. */
  async function writeAll(): Promise<number> {
    let chunks = 0;
    for (let ids = await backlogCampaigns(app.deps.orm.em.fork()); ids.length; ids = await backlogCampaigns(app.deps.orm.em.fork())) {
      for (const id of ids) if ((await app.deps.orm.em.fork().transactional((em) => writeBacklogChunk(em, id, clock.now()))) !== null) chunks++;
    }
    return chunks;
  }
  /** The campaign's step-0 messages in the claim's order (due, id) give its enrollments in enrollment order, each once. */
  async function assertEnrollmentOrder(t: Setup, expected: number) {
    const { rows: seqs } = await db.query(
      `select e.seq::int as seq from outbound_messages m join enrollments e on e.id = m.enrollment_id
        where m.campaign_id = $1 and m.step_index = 0 order by m.due_at, m.id`,
      [t.campaignId],
    );
    assert.equal(seqs.length, expected);
    assert.equal(new Set(seqs.map((r) => r.seq)).size, expected, 'one step 0 per enrollment');
    const outOfOrder = seqs.findIndex((r, i) => i > 0 && r.seq < seqs[i - 1].seq);
    assert.equal(outOfOrder, -1, `the claim's order is enrollment order (message ${outOfOrder} is out of it)`);
  }

  it('the start writes the first 5,000 and counts every first step queued at once; the workers write the rest in enrollment order, each once', async () => {
    const t = await bigCampaign('order');
    const startedAt = clock.now().toISOString();
    await start(t);
    assert.equal(await rows(t), FIRST_STEPS_AT_ONCE, 'the request wrote the first chunk only');
    assert.ok(await backlog(t), 'the rest is the backlog');
    let s = await stats(t);
    assert.deepEqual([s.totalEnrolled, s.queued], [TOTAL, TOTAL], 'every first step is queued from the start');
    // A lead beyond the first chunk reads as queued, due when the campaign started.
    const last = await lead(t, `order${TOTAL - 1}@big.example`);
    assert.deepEqual([last.status, last.currentStep, last.nextSendAt], ['active', 0, startedAt]);
    // The metrics' queue count says the same.
    const metrics = await app.deps.metrics.text();
    const queued = /^mailgate_messages\{state="queued"\} (\d+)$/m.exec(metrics);
    assert.ok(queued, metrics.slice(0, 2000));
    const elsewhere = Number((await db.query(`select count(*) from outbound_messages where state = 'queued' and campaign_id <> $1`, [t.campaignId])).rows[0].count);
    assert.equal(Number(queued[1]), elsewhere + TOTAL, 'the queued gauge counts the backlog');

    clock.advance(1_000);
    assert.equal(await writeAll(), Math.ceil(EXTRA / FIRST_STEPS_AT_ONCE));
    assert.equal(await backlog(t), undefined, 'the backlog is done');
    assert.equal(await rows(t), TOTAL);
    await assertEnrollmentOrder(t, TOTAL);
    s = await stats(t);
    assert.equal(s.queued, TOTAL, 'counted once: the counter took over what the backlog counted');
    const written = await lead(t, `order${TOTAL - 1}@big.example`);
    assert.deepEqual([written.currentStep, written.nextSendAt], [0, startedAt], 'due when the campaign started, not when its row was written');
  });

  it('a lead removed, a lead enrolled and a lead taken off the suppression list while the backlog waits: each counted and written as it is, once', async () => {
    const suppressed = `late${FIRST_STEPS_AT_ONCE + 100}@big.example`;
    const t = await bigCampaign('late', {
      before: async (x) => assert.equal((await app.request('POST', '/v1/suppression-list', { key: x.key, body: { emails: [suppressed] } })).status < 300, true),
    });
    await start(t);
    assert.equal((await stats(t)).queued, TOTAL - 1, 'the suppressed lead is not queued');
    assert.equal((await lead(t, suppressed)).status, 'suppressed');

    // Removed from the campaign before its step 0 was written: no longer counted, never written.
    const removed = await lead(t, `late${TOTAL - 2}@big.example`);
    assert.equal((await app.request('DELETE', `/v1/campaigns/${t.campaignId}/leads/${removed.id}`, { key: t.key })).status, 204);
    assert.equal((await stats(t)).queued, TOTAL - 2);
    // Taken off the suppression list: active again inside the backlog's range, so the backlog
    // writes it (counted now, no row yet).
    assert.equal(await app.services().suppression.remove(t.workspaceId, [suppressed]), 1);
    assert.equal((await lead(t, suppressed)).status, 'active');
    assert.equal((await stats(t)).queued, TOTAL - 1);
    const again = await db.query(`select count(*)::int as n from outbound_messages where campaign_id = $1 and to_email = $2`, [t.campaignId, suppressed]);
    assert.equal(again.rows[0].n, 0, 'left to the backlog');
    // Enrolled into the running campaign: written at once, after the backlog's range.
    const joined = await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'joined@big.example' }] } });
    assert.equal(joined.status, 200);
    assert.equal((await stats(t)).queued, TOTAL);
    assert.equal(await rows(t), FIRST_STEPS_AT_ONCE + 1);

    await writeAll();
    assert.equal(await backlog(t), undefined);
    assert.equal(await rows(t), TOTAL, 'every active enrollment has its step 0, the removed lead none');
    const { rows: removedRows } = await db.query(`select count(*)::int as n from outbound_messages where lead_id = $1`, [removed.id]);
    assert.equal(removedRows[0].n, 0);
    assert.equal((await stats(t)).queued, TOTAL);
    const { rows: perEnrollment } = await db.query(
      `select count(*)::int as n from (select enrollment_id from outbound_messages where campaign_id = $1 group by enrollment_id having count(*) > 1) d`,
      [t.campaignId],
    );
    assert.equal(perEnrollment[0].n, 0, 'no enrollment has two first steps');
  });

  it('two workers writing one backlog at once write each first step once; a chunk rolled back leaves the backlog and the counters as they were', async () => {
    const t = await bigCampaign('pair');
    await start(t);
    const before = await backlog(t);
    // A chunk whose transaction fails after writing (a worker dying mid-chunk) leaves nothing.
    await assert.rejects(
      app.deps.orm.em.fork().transactional(async (em) => {
        assert.equal(await writeBacklogChunk(em, t.campaignId, clock.now()), EXTRA);
        throw new Error('the worker died');
      }),
      /the worker died/,
    );
    assert.deepEqual(await backlog(t), before);
    assert.equal(await rows(t), FIRST_STEPS_AT_ONCE);
    assert.equal((await stats(t)).queued, TOTAL);
    // Two at once: one writes the chunk, the other skips the campaign while it is held.
    const results = await Promise.all([0, 1].map(() => app.deps.orm.em.fork().transactional((em) => writeBacklogChunk(em, t.campaignId, clock.now()))));
    assert.deepEqual(
      results.sort((a, b) => (a ?? -1) - (b ?? -1)),
      [null, EXTRA],
    );
    assert.equal(await rows(t), TOTAL);
    assert.equal((await stats(t)).queued, TOTAL);
    await assertEnrollmentOrder(t, TOTAL);
  });

  it('a resume writes every first step left and ends the backlog; the dispatcher writes a backlog by itself and sends in enrollment order', async () => {
    const t = await bigCampaign('resume');
    await start(t);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    assert.ok(await backlog(t), 'a pause keeps the backlog');
    await start(t);
    assert.equal(await backlog(t), undefined, 'the resume wrote it');
    assert.equal(await rows(t), TOTAL);
    assert.equal((await stats(t)).queued, TOTAL);

    // A second campaign, left to the dispatcher: its round starts the backlog's writer, and
    // sends the first steps in enrollment order as the pool's capacity allows.
    const u = await bigCampaign('round', { capacity: 5 });
    await start(u);
    await dispatcher.runRound();
    await waitFor('the dispatcher to write the backlog', async () => (await backlog(u)) === undefined, 30_000);
    assert.equal(await rows(u), TOTAL);
    // The pool's capacity of 5 went to the first five enrolled (over two connections, in any order of arrival).
    const sent = w.sink.received.filter((r) => r.to[0].startsWith('round')).map((r) => r.to[0]);
    assert.deepEqual(sent.sort(), ['round0@big.example', 'round1@big.example', 'round2@big.example', 'round3@big.example', 'round4@big.example']);
    const s = await stats(u);
    assert.deepEqual([s.sent, s.queued], [5, TOTAL - 5]);
  });
});
