// A large start's first steps (docs/decisions.md, "A large start's first steps"): the start
// writes the first FIRST_STEPS_AT_ONCE enrollments' step 0 and counts the rest queued from its
// commit; the workers write the rest from the campaign's backlog, in enrollment order, each
// once, whatever ends, joins or leaves the campaign meanwhile. Real PostgreSQL, the real
// dispatcher and an smtp-server sink.
import assert from 'node:assert/strict';
import pg from 'pg';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { FIRST_STEPS_AT_ONCE, backlogCampaigns, writeBacklogChunk } from '../../src/modules/messages/queue.ts';
import { Metrics } from '../../src/adapters/metrics.ts';
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
  async function bigCampaign(prefix: string, opts: { capacity?: number; total?: number; before?: (t: Setup) => Promise<void> } = {}): Promise<Setup> {
    const t = await setup({ leads: leadsFor(prefix, 0, 10), start: false, capacity: opts.capacity ?? 1 });
    await opts.before?.(t);
    const total = opts.total ?? TOTAL;
    for (let from = 10; from < total; from += 10_000) {
      const res = await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: leadsFor(prefix, from, Math.min(total, from + 10_000)) } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
    return t;
  }
  const start = async (t: Setup) => assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
  const rows = async (t: Setup) => Number((await db.query(`select count(*) from outbound_messages where campaign_id = $1`, [t.campaignId])).rows[0].count);
  const backlog = async (t: Setup) => (await db.query(`select after_seq, through_seq from first_step_backlog where campaign_id = $1`, [t.campaignId])).rows[0];
  const lead = async (t: Setup, email: string) => {
    const all = await app.request('GET', `/v1/campaigns/${t.campaignId}/leads?q=${encodeURIComponent(email)}`, { key: t.key });
    return all.body.data.find((l: { email: string }) => l.email === email);
  };
  /** mailgate_messages{state="queued"}, read now (a new Metrics: no cached read). */
  async function queuedGauge(): Promise<number> {
    const text = await new Metrics(app.deps.orm).text();
    const m = /^mailgate_messages\{state="queued"\} (\d+)$/m.exec(text);
    assert.ok(m, text.slice(0, 2000));
    return Number(m[1]);
  }
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

  it('5,000 suppressed leads, the list and the campaign imported a moment ago: the enrollment and the start look the list up by its key; the backlog nobody writes shows in the sending lag, due since the start', async () => {
    // The first test of the file: no other campaign runs, and the suppression list's statistics
    // are the empty table's (as when a list is imported a minute before its campaign).
    const scans = async () => {
      const { rows: r } = await db.query(`select indexrelname as name, idx_scan::int as n from pg_stat_user_indexes where relname = 'suppressions'`);
      return Object.fromEntries(r.map((x) => [x.name, x.n])) as Record<string, number>;
    };
    const before = await scans();
    assert.ok('suppressions_email_search_idx' in before && 'suppressions_pkey' in before, JSON.stringify(before));
    // The first 5,000 leads are suppressed: the start writes nothing, the backlog holds the rest.
    const t = await bigCampaign('lag', {
      before: async (x) => {
        for (let from = 0; from < FIRST_STEPS_AT_ONCE; from += 1000) {
          const emails = leadsFor('lag', from, from + 1000).map((l) => l.email);
          assert.ok((await app.request('POST', '/v1/suppression-list', { key: x.key, body: { emails } })).status < 300);
        }
        // setup enrolled the first ten before the list had them: taken out of the campaign
        for (const l of leadsFor('lag', 0, 10)) assert.equal((await app.request('DELETE', `/v1/campaigns/${x.campaignId}/leads/${(await lead(x, l.email)).id}`, { key: x.key })).status, 204);
      },
    });
    await start(t);
    assert.equal(await rows(t), 0);
    assert.ok(await backlog(t));
    assert.equal((await stats(t)).queued, EXTRA);
    // The enrollment and the start each asked which of the 4,990 suppressed enrollments' addresses
    // are still listed (reactivateUnsuppressed): by the list's primary key, never through its
    // trigram index, with which each lookup rechecked the whole list (16 s each, found by this
    // test). PostgreSQL counts the scans when the app's connections go idle.
    await waitFor('the scans to be counted', async () => (await scans()).suppressions_pkey - before.suppressions_pkey >= 2 * 4_990, 30_000);
    assert.equal((await scans()).suppressions_email_search_idx, before.suppressions_email_search_idx, 'no lookup through the trigram index');

    const { rows: [{ since }] } = await db.query(`select extract(epoch from now() - $1::timestamptz)::float8 as since`, [clock.now()]);
    const lag = Number(/^mailgate_queue_oldest_due_seconds (\S+)$/m.exec(await new Metrics(app.deps.orm).text())?.[1]);
    assert.ok(Math.abs(lag - since) < 60, `the lag ${lag} s is the time since the start, ${since} s`);
  });

  it('the start writes the first 5,000 and counts every first step queued at once; the workers write the rest in enrollment order, each once', async () => {
    const t = await bigCampaign('order');
    const startedAt = clock.now().toISOString();
    const gauge0 = await queuedGauge();
    await start(t);
    assert.equal(await rows(t), FIRST_STEPS_AT_ONCE, 'the request wrote the first chunk only');
    assert.ok(await backlog(t), 'the rest is the backlog');
    let s = await stats(t);
    assert.deepEqual([s.totalEnrolled, s.queued], [TOTAL, TOTAL], 'every first step is queued from the start');
    // A lead beyond the first chunk reads as queued, due when the campaign started.
    const last = await lead(t, `order${TOTAL - 1}@big.example`);
    assert.deepEqual([last.status, last.currentStep, last.nextSendAt], ['active', 0, startedAt]);
    // The metrics' queue count says the same.
    const gauge1 = await queuedGauge();
    assert.equal(gauge1 - gauge0, TOTAL, 'the queued gauge counts the backlog');

    clock.advance(1_000);
    assert.ok((await writeAll()) >= Math.ceil(EXTRA / FIRST_STEPS_AT_ONCE));
    assert.equal(await backlog(t), undefined, 'the backlog is done');
    assert.equal(await queuedGauge(), gauge1, 'written, the first steps are counted once');
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
    const total = 2 * FIRST_STEPS_AT_ONCE + EXTRA;
    const t = await bigCampaign('pair', { total });
    await start(t);
    const before = await backlog(t);
    // A chunk whose transaction fails after writing (a worker dying mid-chunk) leaves nothing.
    await assert.rejects(
      app.deps.orm.em.fork().transactional(async (em) => {
        assert.equal(await writeBacklogChunk(em, t.campaignId, clock.now()), FIRST_STEPS_AT_ONCE);
        throw new Error('the worker died');
      }),
      /the worker died/,
    );
    assert.deepEqual(await backlog(t), before);
    assert.equal(await rows(t), FIRST_STEPS_AT_ONCE);
    assert.equal((await stats(t)).queued, total);
    // Two at once: one writes a chunk, the other skips the campaign while it is held (it does
    // not wait to write the next one behind it).
    const results = await Promise.all([0, 1].map(() => app.deps.orm.em.fork().transactional((em) => writeBacklogChunk(em, t.campaignId, clock.now()))));
    assert.deepEqual(
      results.sort((a, b) => (a ?? -1) - (b ?? -1)),
      [null, FIRST_STEPS_AT_ONCE],
    );
    assert.equal(await rows(t), 2 * FIRST_STEPS_AT_ONCE);
    assert.equal((await stats(t)).queued, total);
    await writeAll();
    assert.equal(await rows(t), total);
    assert.equal((await stats(t)).queued, total);
    await assertEnrollmentOrder(t, total);
  });

  it('a chunk waits for an enrollment ending beside it, and then does not write its step 0', async () => {
    const t = await bigCampaign('ending');
    await start(t);
    const ending = await lead(t, `ending${FIRST_STEPS_AT_ONCE + 10}@big.example`);
    // A writer ending the enrollment (an unsubscribe, a complaint, a reply: endEnrollments)
    // holds its row without the campaign's lock, and cancels its waiting messages before it
    // commits: none yet.
    const other = new pg.Client({ connectionString: app.databaseUrl });
    await other.connect();
    try {
      await other.query('begin');
      await other.query(`update enrollments set status = 'unsubscribed' where id = $1`, [ending.enrollmentId]);
      const chunk = app.deps.orm.em.fork().transactional((em) => writeBacklogChunk(em, t.campaignId, clock.now()));
      await waitFor('the chunk to wait for the enrollment', async () => (await db.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`)).rows[0].n > 0, 10_000);
      await other.query('commit');
      assert.equal(await chunk, EXTRA - 1);
    } finally {
      await other.end();
    }
    const { rows: mine } = await db.query(`select count(*)::int as n from outbound_messages where enrollment_id = $1`, [ending.enrollmentId]);
    assert.equal(mine[0].n, 0, 'no step 0 for the ended enrollment');
    const { rows: queuedRows } = await db.query(`select count(*)::int as n from outbound_messages where campaign_id = $1 and state = 'queued'`, [t.campaignId]);
    const { rows: counter } = await db.query(`select queued from campaign_counters where campaign_id = $1`, [t.campaignId]);
    assert.deepEqual([counter[0].queued, (await stats(t)).queued], [queuedRows[0].n, TOTAL - 1], 'the counter counts the rows');
  });

  it('a pause and a resume keep the backlog, the resume writing what joined meanwhile; the dispatcher writes a backlog by itself and sends in enrollment order', async () => {
    const t = await bigCampaign('resume');
    await start(t);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/pause`, { key: t.key })).status, 200);
    const kept = await backlog(t);
    assert.ok(kept, 'a pause keeps the backlog');
    // Enrolled while paused: the resume queues it, after the backlog's range.
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'paused@big.example' }] } })).status, 200);
    await start(t);
    assert.deepEqual(await backlog(t), kept, 'the resume left the backlog to the workers');
    assert.equal(await rows(t), FIRST_STEPS_AT_ONCE + 1);
    assert.equal((await stats(t)).queued, TOTAL + 1);
    await writeAll();
    assert.equal(await rows(t), TOTAL + 1);
    assert.equal((await stats(t)).queued, TOTAL + 1);

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
