// Recency decays: the stored priorityScore of recent threads is refreshed by the priority job,
// and a send or a prospect's answer recomputes it at once.
import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, ManualClock, type TestApp } from '../support/harness.ts';
import { priorityScore } from '../../src/modules/sdrs/priority.ts';
import { ThreadService } from '../../src/modules/sdrs/threads.ts';
import { FollowupService } from '../../src/modules/sdrs/followups.ts';

const T0 = new Date('2026-03-02T09:00:00Z');
const DAY = 86_400_000;

describe('priorityScore over time', () => {
  const clock = new ManualClock(T0);
  let app: TestApp;
  let db: pg.Client;
  let ws: string;
  let sdr: string;
  before(async () => {
    app = await startTestApp({ clock });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    ws = (await seedWorkspace(app)).workspace.id;
    sdr = (await seedSdr(app, ws, 'Ann')).sdr.id;
  });
  after(async () => {
    await db.end();
    await app.close();
  });

  const thread = async (id: string, lastMessageAt: Date, category = 'A') => {
    const score = priorityScore({ category: category as 'A', classification: null, lastMessageAt, overdueFollowups: 0, now: clock.now() });
    await db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
       values ($1, $2, $3, $1 || '@lead.example', '', 'Re: x', 'new', $4, $5, $6, $6, $6)`,
      [id, ws, sdr, category, score, lastMessageAt],
    );
  };
  const stored = async (id: string) => Number((await db.query('select priority_score from prospect_threads where id = $1', [id])).rows[0].priority_score);
  const refresh = () => new ThreadService(app.deps, app.deps.orm.em.fork()).refreshPriorities(2);

  it('the job brings recent threads to the score as of now, leaves settled ones alone, and writes only what moved', async () => {
    await thread('thr_fresh', T0);
    await thread('thr_yesterday', new Date(T0.getTime() - DAY));
    await thread('thr_old', new Date(T0.getTime() - 60 * DAY));
    await thread('thr_followup', new Date(T0.getTime() - 60 * DAY), 'C');
    await db.query(
      `insert into followup_tasks (id, workspace_id, thread_id, sdr_id, attempt, status, due_at, created_at) values ('fup_p', $1, 'thr_followup', $2, 1, 'pending', $3, $3)`,
      [ws, sdr, new Date(T0.getTime() + DAY)],
    );
    const before = { fresh: await stored('thr_fresh'), yesterday: await stored('thr_yesterday'), old: await stored('thr_old'), followup: await stored('thr_followup') };
    assert.equal(before.fresh, 80, 'A 50 + unknown 10 + recency 20');
    assert.equal(await refresh(), 0, 'nothing moved yet');

    clock.advance(2 * DAY);
    assert.equal(await refresh(), 3, 'fresh, yesterday, and the one whose follow-up is now overdue (batches of 2)');
    assert.equal(await stored('thr_fresh'), 65, '20 * 0.5^2 = 5');
    assert.equal(await stored('thr_yesterday'), 62.5, '20 * 0.5^3 = 2.5');
    assert.equal(await stored('thr_old'), before.old, 'outside the window: untouched');
    assert.equal(await stored('thr_followup'), before.followup + 10, 'an overdue follow-up adds 10');
    assert.equal(await refresh(), 0, 'a second run writes nothing');
  });

  it('a send or a prospect answer recomputes the score at once (recency back to its top)', async () => {
    clock.advance(5 * DAY);
    await refresh();
    const decayed = await stored('thr_fresh');
    assert.ok(decayed < 61, String(decayed));
    await db.query('update prospect_threads set last_message_at = $1 where id = $2', [clock.now(), 'thr_fresh']);
    await new FollowupService(app.deps, app.deps.orm.em.fork()).onProspectAnswer('thr_fresh');
    assert.equal(await stored('thr_fresh'), 80);
    clock.advance(DAY);
    await db.query('update prospect_threads set last_message_at = $1 where id = $2', [clock.now(), 'thr_yesterday']);
    await new FollowupService(app.deps, app.deps.orm.em.fork()).onSend('thr_yesterday');
    assert.equal(await stored('thr_yesterday'), 80);
  });
});
