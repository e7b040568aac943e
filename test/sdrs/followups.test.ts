import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, ManualClock, type TestApp } from '../support/harness.ts';
import { addBusinessDuration } from '../../src/modules/sdrs/followups.ts';
import type { ThreadStatus } from '../../src/modules/sdrs/threads-state.ts';
import { assertThreadCountsExact } from '../support/thread-counts.ts';
import { waitFor } from '../support/wait.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = '2026-04-01T12:00:00.000Z'; // a Wednesday

describe('addBusinessDuration (UTC, Saturdays and Sundays skipped)', () => {
  it('counts weekdays only', () => {
    const at = (s: string, ms: number) => addBusinessDuration(new Date(s), ms).toISOString();
    assert.equal(at('2026-04-01T12:00:00.000Z', 2 * DAY), '2026-04-03T12:00:00.000Z'); // Wed -> Fri
    assert.equal(at('2026-04-03T12:00:00.000Z', 2 * DAY), '2026-04-07T12:00:00.000Z'); // Fri -> Tue
    assert.equal(at('2026-04-03T12:00:00.000Z', 6 * HOUR), '2026-04-03T18:00:00.000Z');
    assert.equal(at('2026-04-03T12:00:00.000Z', 12 * HOUR), '2026-04-06T00:00:00.000Z'); // ends at Sat 00:00 -> Mon 00:00
    assert.equal(at('2026-04-04T10:00:00.000Z', 3 * HOUR), '2026-04-06T03:00:00.000Z'); // Sat start counts from Monday
    assert.equal(at('2026-04-01T12:00:00.000Z', 10 * DAY), '2026-04-15T12:00:00.000Z'); // two business weeks
    assert.equal(at('2026-04-03T12:00:00.000Z', 5 * DAY + HOUR), '2026-04-10T13:00:00.000Z');
  });
});

describe('Follow-ups', () => {
  let app: TestApp;
  let db: pg.Client;
  const clock = new ManualClock(T0);

  before(async () => {
    app = await startTestApp({ clock });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await app.close();
  });
  beforeEach(() => clock.set(T0));

  async function desk() {
    const ws = await seedWorkspace(app);
    const a = await seedSdr(app, ws.workspace.id, 'Ann');
    const b = await seedSdr(app, ws.workspace.id, 'Bob');
    return { wsId: ws.workspace.id, sdrA: a.sdr.id, keyA: a.sdrKey, sdrB: b.sdr.id, keyB: b.sdrKey };
  }

  async function rule(wsId: string, o: { afterMs: number; businessDays?: boolean; categories?: string[]; maxAttempts?: number }) {
    return app.services().sdrs.addFollowupRule(wsId, { name: `r-${randomBytes(2).toString('hex')}`, ...o });
  }

  let n = 0;
  async function thread(wsId: string, sdrId: string, o: { status?: ThreadStatus; category?: 'A' | 'B' | 'C'; lastMessageAt?: string } = {}) {
    const id = `thr_fup${++n}${randomBytes(3).toString('hex')}`;
    await db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, status, category, last_message_at, created_at, updated_at)
       values ($1, $2, $3, $4, $5, $6, $7, $7, $7)`,
      [id, wsId, sdrId, `p${n}@prospect.example`, o.status ?? 'awaiting_reply', o.category ?? 'B', o.lastMessageAt ?? T0],
    );
    return id;
  }

  async function tasks(threadId: string) {
    const { rows } = await db.query('select * from followup_tasks where thread_id = $1 order by attempt, created_at, id', [threadId]);
    return rows;
  }
  async function threadRow(id: string) {
    const { rows } = await db.query('select status, priority_score, last_message_at from prospect_threads where id = $1', [id]);
    return rows[0];
  }
  const schedule = () => app.services().followups.scheduleDue();
  /** What the send path does: the thread is awaiting_reply again with a new lastMessageAt. */
  async function sent(threadId: string, at: string) {
    await app.services().followups.onSend(threadId);
    await db.query(`update prospect_threads set status = 'awaiting_reply', last_message_at = $2 where id = $1`, [threadId, at]);
  }

  describe('scheduleDue', () => {
    it('creates one pending task per awaiting_reply thread at lastMessageAt + after; idempotent', async () => {
      const d = await desk();
      const r = await rule(d.wsId, { afterMs: 2 * DAY });
      const t = await thread(d.wsId, d.sdrA);
      const fresh = await thread(d.wsId, d.sdrA, { status: 'new' });
      const replied = await thread(d.wsId, d.sdrA, { status: 'replied' });
      const noRules = await desk();
      const other = await thread(noRules.wsId, noRules.sdrA);

      await schedule();
      await schedule();
      const rows = await tasks(t);
      assert.equal(rows.length, 1);
      assert.match(rows[0].id, /^fup_/);
      assert.equal(rows[0].status, 'pending');
      assert.equal(rows[0].rule_id, r.id);
      assert.equal(rows[0].attempt, 1);
      assert.equal(rows[0].sdr_id, d.sdrA);
      assert.equal(rows[0].workspace_id, d.wsId);
      assert.equal(rows[0].due_at.toISOString(), '2026-04-03T12:00:00.000Z');
      assert.equal(rows[0].created_at.toISOString(), T0);
      for (const id of [fresh, replied, other]) assert.equal((await tasks(id)).length, 0);
      assert.equal((await threadRow(t)).status, 'awaiting_reply');
    });

    it('business days: the duration skips the weekend', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: 2 * DAY, businessDays: true });
      const t = await thread(d.wsId, d.sdrA, { lastMessageAt: '2026-04-03T12:00:00.000Z' }); // Friday
      await schedule();
      assert.equal((await tasks(t))[0].due_at.toISOString(), '2026-04-07T12:00:00.000Z'); // Tuesday
    });

    it('per-category rules: a rule applies only to its categories; the earliest applicable rule wins', async () => {
      const d = await desk();
      const onlyA = await rule(d.wsId, { afterMs: 1 * DAY, categories: ['A'] });
      const all = await rule(d.wsId, { afterMs: 3 * DAY });
      const onlyC = await rule(d.wsId, { afterMs: 5 * DAY, categories: ['C'] });
      const ta = await thread(d.wsId, d.sdrA, { category: 'A' });
      const tb = await thread(d.wsId, d.sdrA, { category: 'B' });
      const tc = await thread(d.wsId, d.sdrA, { category: 'C' });
      await schedule();
      const [a] = await tasks(ta);
      const [b] = await tasks(tb);
      const [c] = await tasks(tc);
      assert.deepEqual([a.rule_id, a.due_at.toISOString()], [onlyA.id, '2026-04-02T12:00:00.000Z']);
      assert.deepEqual([b.rule_id, b.due_at.toISOString()], [all.id, '2026-04-04T12:00:00.000Z']);
      assert.deepEqual([c.rule_id, c.due_at.toISOString()], [all.id, '2026-04-04T12:00:00.000Z']);
      assert.ok(onlyC.id);
      assert.equal((await tasks(ta)).length + (await tasks(tb)).length + (await tasks(tc)).length, 3);
    });

    it('a due task makes an awaiting_reply thread needs_followup and raises its priority; attempts stop at maxAttempts', async () => {
      const d = await desk();
      const r = await rule(d.wsId, { afterMs: DAY, maxAttempts: 2 });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      clock.set('2026-04-02T11:59:59.000Z');
      await schedule();
      assert.equal((await threadRow(t)).status, 'awaiting_reply');
      const before = Number((await threadRow(t)).priority_score);

      clock.set('2026-04-02T12:00:00.000Z');
      await schedule();
      const row = await threadRow(t);
      assert.equal(row.status, 'needs_followup');
      assert.ok(Number(row.priority_score) > before + 9, `priority ${row.priority_score} includes the overdue follow-up`);

      // The SDR sends: attempt 1 done, attempt 2 counted from the new lastMessageAt.
      clock.set('2026-04-02T15:00:00.000Z');
      await sent(t, '2026-04-02T15:00:00.000Z');
      await schedule();
      let rows = await tasks(t);
      assert.deepEqual(
        rows.map((x) => [x.attempt, x.status, x.rule_id, x.due_at.toISOString()]),
        [
          [1, 'done', r.id, '2026-04-02T12:00:00.000Z'],
          [2, 'pending', r.id, '2026-04-03T15:00:00.000Z'],
        ],
      );
      assert.equal(rows[0].completed_at.toISOString(), '2026-04-02T15:00:00.000Z');

      clock.set('2026-04-03T16:00:00.000Z');
      await schedule();
      assert.equal((await threadRow(t)).status, 'needs_followup');
      await sent(t, '2026-04-03T16:00:00.000Z');
      clock.set('2026-04-20T00:00:00.000Z');
      await schedule();
      rows = await tasks(t);
      assert.equal(rows.length, 2, 'no third attempt');
      assert.equal((await threadRow(t)).status, 'awaiting_reply');
    });

    it('only awaiting_reply threads become needs_followup', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: HOUR });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      await db.query(`update prospect_threads set status = 'meeting_booked' where id = $1`, [t]);
      clock.advance(2 * HOUR);
      await schedule();
      assert.equal((await threadRow(t)).status, 'meeting_booked');
    });

    it("a deactivated SDR's follow-ups wait: no new task (nor from an out-of-office), none falls due; activated again, the next round catches up", async () => {
      const d = await desk();
      const r = await rule(d.wsId, { afterMs: DAY });
      const tasked = await thread(d.wsId, d.sdrA);
      const others = await thread(d.wsId, d.sdrB);
      await schedule();
      await app.services().sdrs.setActive(d.sdrA, false);
      // A thread the SDR answered just before the deactivation, before a round made its task.
      const untasked = await thread(d.wsId, d.sdrA);
      clock.set('2026-04-03T12:00:00.000Z');
      await schedule();
      assert.equal((await threadRow(others)).status, 'needs_followup');
      assert.equal((await tasks(untasked)).length, 0, 'no new task for a deactivated SDR');
      assert.equal((await threadRow(tasked)).status, 'awaiting_reply', 'its due task makes nothing due');
      assert.deepEqual((await tasks(tasked)).map((t) => t.status), ['pending'], 'the task waits, not skipped');
      // An early out-of-office makes no task for the deactivated SDR either.
      await app.services().followups.onProspectAnswer(untasked, { returnDate: new Date('2026-04-06T09:00:00.000Z') });
      assert.equal((await tasks(untasked)).length, 0);

      await app.services().sdrs.setActive(d.sdrA, true);
      await schedule();
      const [made] = await tasks(untasked);
      assert.deepEqual([made.rule_id, made.status, made.due_at.toISOString()], [r.id, 'pending', '2026-04-02T12:00:00.000Z']);
      assert.equal((await threadRow(tasked)).status, 'needs_followup');
      assert.equal((await threadRow(untasked)).status, 'needs_followup');
    });

    it('concurrent rounds create one task per thread', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await thread(d.wsId, d.sdrA));
      const results = await Promise.all([schedule(), schedule(), schedule()]);
      assert.equal(results.reduce((s, r) => s + r.created, 0), 20);
      const { rows } = await db.query(`select thread_id, count(*)::int as n from followup_tasks where thread_id = any($1) group by thread_id`, [ids]);
      assert.equal(rows.length, 20);
      assert.ok(rows.every((r) => r.n === 1));
    });
  });

  describe('hooks', () => {
    it('onProspectAnswer without a return date cancels the pending task', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      clock.set('2026-04-01T18:00:00.000Z');
      assert.equal(await app.services().followups.onProspectAnswer(t, null), 1);
      const [row] = await tasks(t);
      assert.equal(row.status, 'cancelled');
      assert.equal(row.completed_at.toISOString(), '2026-04-01T18:00:00.000Z');
    });

    it('onProspectAnswer with an out-of-office return date moves dueAt to the next UTC day and keeps it pending', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      await app.services().followups.onProspectAnswer(t, { returnDate: new Date('2026-04-10T15:30:00.000Z') });
      const [row] = await tasks(t);
      assert.equal(row.status, 'pending');
      assert.equal(row.due_at.toISOString(), '2026-04-11T00:00:00.000Z');
      assert.equal(row.completed_at, null);
      clock.set('2026-04-05T00:00:00.000Z');
      await schedule();
      assert.equal((await threadRow(t)).status, 'awaiting_reply', 'not due before the return');
      assert.equal((await tasks(t)).length, 1);
    });

    it('an out-of-office return on a Friday moves a business-days rule\'s task to Monday, not the Saturday after', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY, businessDays: true });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      // Back on Friday 10 April: it was due Saturday 00:00 UTC, on the weekend the rule skips.
      await app.services().followups.onProspectAnswer(t, { returnDate: new Date('2026-04-10T00:00:00.000Z') });
      const [row] = await tasks(t);
      assert.equal(row.status, 'pending');
      assert.equal(row.due_at.toISOString(), '2026-04-13T00:00:00.000Z');
      clock.set('2026-04-12T12:00:00.000Z');
      await schedule();
      assert.equal((await threadRow(t)).status, 'awaiting_reply', 'not due on the weekend');
    });

    it('an out-of-office with a return date that comes before the scheduler made the task (seconds after the send) still holds the follow-up until the return', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const t = await thread(d.wsId, d.sdrA);
      // No round yet: the auto-reply arrived right after the SDR's send.
      assert.equal((await tasks(t)).length, 0);
      await app.services().followups.onProspectAnswer(t, { returnDate: new Date('2026-04-10T15:30:00.000Z') });
      clock.set('2026-04-05T00:00:00.000Z');
      await schedule();
      assert.equal((await threadRow(t)).status, 'awaiting_reply', 'not due while the prospect is away');
      const all = await tasks(t);
      assert.equal(all.length, 1);
      assert.equal(all[0].status, 'pending');
      assert.equal(all[0].attempt, 1);
      assert.equal(all[0].due_at.toISOString(), '2026-04-11T00:00:00.000Z');
      clock.set('2026-04-11T00:01:00.000Z');
      await schedule();
      assert.equal((await threadRow(t)).status, 'needs_followup', 'due after the return');
      assert.equal((await tasks(t)).length, 1);
    });

    it('an out-of-office without a return date is no answer: the pending task stays as it was', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      const [before] = await tasks(t);
      assert.equal(await app.services().followups.onProspectAnswer(t, { returnDate: null }), 0);
      const [row] = await tasks(t);
      assert.equal(row.status, 'pending');
      assert.equal(row.due_at.toISOString(), before.due_at.toISOString());
    });

    it('an out-of-office with a return date sends a thread that needed its follow-up back to awaiting_reply until the return', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      const [task] = await tasks(t);
      clock.set(new Date(task.due_at.getTime() + 60_000));
      await schedule();
      assert.equal((await threadRow(t)).status, 'needs_followup');
      const back = new Date(task.due_at.getTime() + 5 * DAY);
      await app.services().followups.onProspectAnswer(t, { returnDate: back });
      assert.equal((await threadRow(t)).status, 'awaiting_reply', 'nothing is due while the prospect is away');
      const [moved] = await tasks(t);
      assert.equal(moved.status, 'pending');
      clock.set(new Date(moved.due_at.getTime() + 60_000));
      await schedule();
      assert.equal((await threadRow(t)).status, 'needs_followup', 'due again after the return');
    });

    it('an out-of-office never brings a follow-up forward: a return before the task was due, or one already past (read late), leaves it due when it was', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: 7 * DAY });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      const [task] = await tasks(t);
      // Back long before the follow-up was due: it stays due when the SDR's rule said.
      assert.equal(await app.services().followups.onProspectAnswer(t, { returnDate: new Date(task.due_at.getTime() - 5 * DAY) }), 1);
      let [row] = await tasks(t);
      assert.equal(row.status, 'pending');
      assert.equal(row.due_at.toISOString(), task.due_at.toISOString());
      // Due now; an out-of-office read late whose return date has passed leaves it due.
      clock.set(new Date(task.due_at.getTime() + 60_000));
      await schedule();
      assert.equal((await threadRow(t)).status, 'needs_followup');
      await app.services().followups.onProspectAnswer(t, { returnDate: new Date(task.due_at.getTime() - 2 * DAY) });
      [row] = await tasks(t);
      assert.equal(row.due_at.toISOString(), task.due_at.toISOString());
      assert.equal((await threadRow(t)).status, 'needs_followup', 'still due: the prospect is back');
    });

    it('onSend completes the pending task; without one it does nothing', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const t = await thread(d.wsId, d.sdrA);
      assert.equal(await app.services().followups.onSend(t), 0);
      await schedule();
      assert.equal(await app.services().followups.onSend(t), 1);
      assert.equal((await tasks(t))[0].status, 'done');
    });
  });

  describe('endpoints', () => {
    it('GET /v1/sdr/followups/due: the key’s SDR’s pending tasks, due first; includeUpcoming; limit', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY });
      const t1 = await thread(d.wsId, d.sdrA, { lastMessageAt: '2026-03-30T12:00:00.000Z' });
      const t2 = await thread(d.wsId, d.sdrA, { lastMessageAt: '2026-03-29T12:00:00.000Z' });
      const t3 = await thread(d.wsId, d.sdrA, { lastMessageAt: '2026-04-01T10:00:00.000Z' });
      const tb = await thread(d.wsId, d.sdrB, { lastMessageAt: '2026-03-29T12:00:00.000Z' });
      await schedule();

      let res = await app.request('GET', '/v1/sdr/followups/due', { key: d.keyA });
      assert.equal(res.status, 200);
      assert.deepEqual(
        res.body.data.map((x: any) => x.threadId),
        [t2, t1],
      );
      const [first] = res.body.data;
      assert.deepEqual(Object.keys(first).sort(), ['attempt', 'createdAt', 'dueAt', 'id', 'ruleId', 'sdrId', 'status', 'thread', 'threadId']);
      // Who and what it is about, without opening the thread.
      const { rows: [t2row] } = await db.query('select contact_email, contact_name, subject from prospect_threads where id = $1', [t2]);
      assert.deepEqual(first.thread, { contactEmail: t2row.contact_email, contactName: t2row.contact_name, subject: t2row.subject });
      assert.equal(first.status, 'pending');
      assert.equal(first.sdrId, d.sdrA);
      assert.equal(first.dueAt, '2026-03-30T12:00:00.000Z');

      res = await app.request('GET', '/v1/sdr/followups/due?includeUpcoming=true', { key: d.keyA });
      assert.deepEqual(
        res.body.data.map((x: any) => x.threadId),
        [t2, t1, t3],
      );
      res = await app.request('GET', '/v1/sdr/followups/due?includeUpcoming=true&limit=1', { key: d.keyA });
      assert.deepEqual(
        res.body.data.map((x: any) => x.threadId),
        [t2],
      );
      res = await app.request('GET', '/v1/sdr/followups/due', { key: d.keyB });
      assert.deepEqual(
        res.body.data.map((x: any) => x.threadId),
        [tb],
      );
      for (const q of ['limit=201', 'limit=0', 'includeUpcoming=yes', 'foo=1']) {
        res = await app.request('GET', `/v1/sdr/followups/due?${q}`, { key: d.keyA });
        assert.equal(res.status, 400, q);
        assert.equal(res.body.error.code, 'invalid_request');
      }
      res = await app.request('GET', '/v1/sdr/followups/due?limit=200', { key: d.keyA });
      assert.equal(res.status, 200);
      const admin = await seedWorkspace(app);
      res = await app.request('GET', '/v1/sdr/followups/due', { key: admin.adminKey });
      assert.equal(res.status, 403);
      res = await app.request('GET', '/v1/sdr/followups/due');
      assert.equal(res.status, 401);
    });

    it('complete and skip: pending only, own tasks only; the thread goes back to awaiting_reply', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY, maxAttempts: 3 });
      const t1 = await thread(d.wsId, d.sdrA);
      const t2 = await thread(d.wsId, d.sdrA);
      await schedule();
      clock.set('2026-04-02T13:00:00.000Z');
      await schedule();
      assert.equal((await threadRow(t1)).status, 'needs_followup');
      const [task1] = await tasks(t1);
      const [task2] = await tasks(t2);

      let res = await app.request('POST', `/v1/sdr/followups/${task1.id}/complete`, { key: d.keyB });
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'followup_not_found');
      res = await app.request('POST', '/v1/sdr/followups/fup_missing/skip', { key: d.keyA });
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'followup_not_found');

      res = await app.request('POST', `/v1/sdr/followups/${task1.id}/complete`, { key: d.keyA });
      assert.equal(res.status, 200);
      assert.equal(res.body.data.id, task1.id);
      assert.equal(res.body.data.status, 'done');
      assert.equal((await tasks(t1))[0].completed_at.toISOString(), '2026-04-02T13:00:00.000Z');
      assert.equal((await threadRow(t1)).status, 'awaiting_reply');

      res = await app.request('POST', `/v1/sdr/followups/${task1.id}/skip`, { key: d.keyA });
      assert.equal(res.status, 409);
      assert.equal(res.body.error.code, 'followup_not_pending');

      res = await app.request('POST', `/v1/sdr/followups/${task2.id}/skip`, { key: d.keyA });
      assert.equal(res.status, 200);
      assert.equal(res.body.data.status, 'skipped');
      res = await app.request('POST', `/v1/sdr/followups/${task2.id}/complete`, { key: d.keyA });
      assert.equal(res.status, 409);

      // The next attempt counts from when the previous one was closed.
      await schedule();
      const rows = await tasks(t2);
      assert.deepEqual(
        rows.map((x) => [x.attempt, x.status, x.due_at.toISOString()]),
        [
          [1, 'skipped', '2026-04-02T12:00:00.000Z'],
          [2, 'pending', '2026-04-03T13:00:00.000Z'],
        ],
      );
    });

    it('closing a thread skips its pending follow-up; a reopen schedules nothing until the next send', async () => {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY, maxAttempts: 3 });
      const lost = await thread(d.wsId, d.sdrA);
      const booked = await thread(d.wsId, d.sdrA);
      await schedule();
      clock.set('2026-04-02T13:00:00.000Z');
      await schedule();
      assert.equal((await threadRow(lost)).status, 'needs_followup');
      const before = Number((await threadRow(lost)).priority_score);

      let res = await app.request('PATCH', `/v1/sdr/threads/${lost}`, { key: d.keyA, body: { status: 'lost_timing' } });
      assert.equal(res.status, 200);
      assert.deepEqual(
        (await tasks(lost)).map((x) => [x.status, x.completed_at?.toISOString()]),
        [['skipped', '2026-04-02T13:00:00.000Z']],
      );
      // The overdue follow-up no longer counts in the priority.
      assert.ok(res.body.data.priorityScore < before, `${res.body.data.priorityScore} < ${before}`);
      res = await app.request('GET', '/v1/sdr/followups/due', { key: d.keyA });
      assert.deepEqual(res.body.data.map((t: { threadId: string }) => t.threadId), [booked]);

      res = await app.request('PATCH', `/v1/sdr/threads/${booked}`, { key: d.keyA, body: { status: 'meeting_booked' } });
      assert.equal(res.status, 200);
      assert.equal((await tasks(booked))[0].status, 'skipped');
      // Between closed statuses there is no task to end; a reopened thread is `new`, not
      // awaiting a reply, so the scheduler makes none for it.
      res = await app.request('PATCH', `/v1/sdr/threads/${lost}`, { key: d.keyA, body: { status: 'new' } });
      assert.equal(res.status, 200);
      clock.set('2026-04-05T13:00:00.000Z');
      await schedule();
      assert.equal((await tasks(lost)).length, 1);
      res = await app.request('GET', '/v1/sdr/followups/due', { key: d.keyA });
      assert.deepEqual(res.body.data, []);
    });
  });

  describe('a round against a send or a close of the same thread', () => {
    async function dueThread() {
      const d = await desk();
      await rule(d.wsId, { afterMs: DAY, maxAttempts: 3 });
      const t = await thread(d.wsId, d.sdrA);
      await schedule();
      clock.set('2026-04-02T13:00:00.000Z');
      const [task] = await tasks(t);
      return { ...d, t, task };
    }
    const lockWait = async (table: string) =>
      (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like $1 and pid <> pg_backend_pid()`, [`%${table}%`])).rows.length > 0;

    it('a send committing while the round waits: the thread awaits the reply, not a follow-up already done', async () => {
      const d = await dueThread();
      const sender = new pg.Client({ connectionString: app.databaseUrl });
      await sender.connect();
      try {
        // What the desk's send does, in its order: the thread, then its task.
        await sender.query('begin');
        await sender.query(`update prospect_threads set status = 'awaiting_reply', last_message_at = $2 where id = $1`, [d.t, '2026-04-02T12:59:00.000Z']);
        await sender.query(`update followup_tasks set status = 'done', completed_at = $2 where thread_id = $1 and status = 'pending'`, [d.t, '2026-04-02T12:59:00.000Z']);
        let settled = false;
        const round = schedule().finally(() => (settled = true));
        await waitFor('the round past the thread or waiting for it', async () => settled || (await lockWait('prospect_threads')));
        await sender.query('commit');
        await round;
      } finally {
        await sender.end();
      }
      assert.equal((await threadRow(d.t)).status, 'awaiting_reply');
      assert.deepEqual((await tasks(d.t)).map((x) => x.status), ['done']);
      // The next round makes the next attempt from the send.
      await schedule();
      assert.deepEqual((await tasks(d.t)).map((x) => [x.attempt, x.status, x.due_at.toISOString()]), [
        [1, 'done', '2026-04-02T12:00:00.000Z'],
        [2, 'pending', '2026-04-03T12:59:00.000Z'],
      ]);
    });

    it('a skip while a round holds the thread: the skip waits for it and the thread goes back to awaiting_reply', async () => {
      const d = await dueThread();
      const round = new pg.Client({ connectionString: app.databaseUrl });
      await round.connect();
      try {
        // What markFollowupsDue does, in its order: the thread locked, then made needs_followup.
        await round.query('begin');
        await round.query('select id from prospect_threads where id = $1 for update', [d.t]);
        let settled = false;
        const skipping = app.request('POST', `/v1/sdr/followups/${d.task.id}/skip`, { key: d.keyA }).finally(() => (settled = true));
        await waitFor('the skip done or waiting for the thread', async () => settled || (await lockWait('prospect_threads')));
        await round.query(`update prospect_threads set status = 'needs_followup' where id = $1`, [d.t]);
        await round.query('commit');
        const res = await skipping;
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.data.status, 'skipped');
      } finally {
        await round.end();
      }
      assert.equal((await threadRow(d.t)).status, 'awaiting_reply');
    });
  });

  // Added with migration 0003: whatever the tests above wrote, the inbox counters still match
  // (a describe of its own, so it runs after the nested describes above).
  describe('afterwards', () => {
    it('prospect_thread_counts equal a count of the threads', async () => {
      await assertThreadCountsExact(db);
    });
  });
});
