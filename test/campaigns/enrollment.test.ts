import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, subscribeEvents, ManualClock, type TestApp } from '../support/harness.ts';
import { enroll as enrollLeads } from '../../src/modules/messages/queue.ts';
import { sql } from '../../src/db/sql.ts';
import { SEND_CHANNEL } from '../../src/modules/messages/queue.ts';

describe('bulk enrollment, lifecycle, stats, leads view', () => {
  let app: TestApp;
  let key: string;
  let workspaceId: string;
  const clock = new ManualClock('2026-04-01T08:00:00.000Z');
  let db: pg.Client;
  before(async () => {
    app = await startTestApp({ clock });
    ({ adminKey: key, workspace: { id: workspaceId } } = await seedWorkspace(app));
    await subscribeEvents(app, workspaceId);
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await app.close();
  });

  async function campaign(steps = 2): Promise<string> {
    const res = await app.request('POST', '/v1/campaigns', {
      key,
      body: { name: `c${Math.random()}`, sequenceSteps: Array.from({ length: steps }, (_, i) => ({ subject: `s${i}`, bodyHtml: `<p>${i}</p>` })) },
    });
    return res.body.id;
  }
  const enroll = (id: string, leads: unknown[]) => app.request('POST', `/v1/campaigns/${id}/leads/bulk`, { key, body: { leads } });
  const stats = async (id: string) => (await app.request('GET', `/v1/campaigns/${id}/stats`, { key })).body;
  const leadRow = async (email: string) => (await db.query('select * from leads where workspace_id = $1 and email_key = $2', [workspaceId, email])).rows[0];

  it('creates new leads (enrolled) and updates existing ones (updated); total = enrolled + updated', async () => {
    const id = await campaign();
    const first = await enroll(id, [
      { email: 'ann@example.com', firstName: 'Ann', company: 'Acme', plan: 'pro' },
      { email: 'bob@example.com', firstName: 'Bob' },
    ]);
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, { enrolled: 2, updated: 0, total: 2 });

    // Ann again (different case and spaces) with only some fields: omitted ones keep their values.
    const second = await enroll(id, [{ email: '  ANN@Example.com ', jobTitle: 'CTO', seats: 12 }, { email: 'cy@example.com' }]);
    assert.deepEqual(second.body, { enrolled: 1, updated: 1, total: 2 });
    const ann = await leadRow('ann@example.com');
    assert.equal(ann.first_name, 'Ann');
    assert.equal(ann.company, 'Acme');
    assert.equal(ann.job_title, 'CTO');
    assert.deepEqual(ann.custom, { plan: 'pro', seats: 12 });
    // null clears a field explicitly.
    await enroll(id, [{ email: 'ann@example.com', company: null }]);
    assert.equal((await leadRow('ann@example.com')).company, null);

    // No duplicate enrollment, no duplicate lead.
    const { rows } = await db.query('select count(*)::int as n from enrollments where campaign_id = $1', [id]);
    assert.equal(rows[0].n, 3);
    assert.equal((await stats(id)).totalEnrolled, 3);
  });

  it('a lead enrolled into a second campaign counts as updated and gets its own enrollment', async () => {
    const a = await campaign();
    const b = await campaign();
    await enroll(a, [{ email: 'shared@example.com', firstName: 'Sh' }]);
    const res = await enroll(b, [{ email: 'shared@example.com' }]);
    assert.deepEqual(res.body, { enrolled: 0, updated: 1, total: 1 });
    assert.equal((await stats(b)).totalEnrolled, 1);
    assert.equal((await leadRow('shared@example.com')).first_name, 'Sh');
  });

  it('duplicates inside one request collapse to one lead; later fields win', async () => {
    const id = await campaign();
    const res = await enroll(id, [
      { email: 'dup@example.com', firstName: 'First', company: 'Keep' },
      { email: 'DUP@example.com', firstName: 'Second' },
    ]);
    assert.deepEqual(res.body, { enrolled: 1, updated: 0, total: 1 });
    const row = await leadRow('dup@example.com');
    assert.equal(row.first_name, 'Second');
    assert.equal(row.company, 'Keep');
  });

  it('422 validation_failed with an errors entry per failing index, and nothing written', async () => {
    const id = await campaign();
    const leadsBefore = (await db.query('select count(*)::int as n from leads')).rows[0].n;
    const res = await enroll(id, [
      { email: 'fine@example.com' },
      { email: 'not an email' },
      { firstName: 'no email' },
      'just a string',
      { email: 'ok@example.com', firstName: 7 },
      { email: 'ok2@example.com', unsubscribeUrl: 'x' },
      { email: 'ok3@example.com', 'bad key': 1 },
      // An own "__proto__" key, as JSON.parse makes it: assigning it would set the prototype and lose the field.
      JSON.parse('{"email": "ok4@example.com", "__proto__": "x"}'),
      // A custom value past 10,000 characters (as JSON): a message is no place for megabytes.
      { email: 'ok5@example.com', icebreaker: 'x'.repeat(10_001) },
    ]);
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(
      [...new Set(res.body.errors.map((e: { index: number }) => e.index))],
      [1, 2, 3, 4, 5, 6, 7, 8],
    );
    assert.ok(res.body.errors.find((e: { index: number; field: string; message: string }) => e.index === 8 && e.field === 'icebreaker' && /at most 10,000 characters/.test(e.message)));
    assert.ok(res.body.errors.find((e: { index: number; field: string }) => e.index === 4 && e.field === 'firstName'));
    assert.ok(res.body.errors.find((e: { index: number; field: string; message: string }) => e.index === 7 && e.field === '__proto__' && e.message === 'reserved name'));
    assert.equal((await db.query('select count(*)::int as n from leads')).rows[0].n, leadsBefore);
    assert.equal((await stats(id)).totalEnrolled, 0);
  });

  it('a standard field in another case (FirstName, Company, EMAIL) is 422 naming the spelling, not a silent custom field', async () => {
    const id = await campaign();
    const res = await enroll(id, [
      { email: 'crm1@example.com', FirstName: 'Ann', Company: 'Acme' },
      { email: 'crm2@example.com', jobtitle: 'CTO' },
      { email: 'crm3@example.com', EMAIL: 'other@example.com' },
      { email: 'crm4@example.com', firstName: 'Fine', first_name: 'a custom field of its own' },
    ]);
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(
      res.body.errors.map((e: { index: number; field: string; message: string }) => [e.index, e.field, e.message]),
      [
        [0, 'FirstName', 'reserved name in another case: the field is spelled firstName'],
        [0, 'Company', 'reserved name in another case: the field is spelled company'],
        [1, 'jobtitle', 'reserved name in another case: the field is spelled jobTitle'],
        [2, 'EMAIL', 'reserved name in another case: the field is spelled email'],
      ],
    );
    assert.equal(await leadRow('crm1@example.com'), undefined);
    assert.equal((await stats(id)).totalEnrolled, 0);
    // Spelled right it is the standard field; null still removes such a field stored before the rule.
    await db.query(`insert into leads (id, workspace_id, email, email_key, custom, created_at, updated_at) values ('lead_old_crm5', $1, 'crm5@example.com', 'crm5@example.com', '{"Company": "Old"}', now(), now())`, [workspaceId]);
    const ok = await enroll(id, [{ email: 'crm1@example.com', firstName: 'Ann', company: 'Acme' }, { email: 'crm5@example.com', Company: null, company: 'New' }]);
    assert.deepEqual(ok.body, { enrolled: 1, updated: 1, total: 2 });
    assert.equal((await leadRow('crm1@example.com')).first_name, 'Ann');
    const crm5 = await leadRow('crm5@example.com');
    assert.deepEqual([crm5.company, crm5.custom], ['New', {}]);
  });

  it('the 50 custom fields of a lead hold after the merge with those stored: 422 naming the index, nothing written', async () => {
    const id = await campaign();
    const fields = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i]));
    // A lead's custom fields are its object's other keys.
    assert.equal((await enroll(id, [{ email: 'cf@lead.example', ...fields('a', 40) }])).status, 200);
    const other = await campaign();
    const res = await enroll(other, [{ email: 'fine@lead.example' }, { email: 'CF@lead.example', ...fields('b', 20) }]);
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(res.body.errors.map((e: { index: number; field: string }) => [e.index, e.field]), [[1, 'customFields']]);
    assert.match(res.body.errors[0].message, /at most 50 custom fields per lead.*60/);
    // Nothing of the request was written: no enrollment, no new lead, the stored fields as they were.
    assert.equal((await db.query(`select count(*)::int as n from enrollments where campaign_id = $1`, [other])).rows[0].n, 0);
    assert.equal((await db.query(`select count(*)::int as n from leads where email_key = 'fine@lead.example'`)).rows[0].n, 0);
    const { rows: [lead] } = await db.query(`select (select count(*) from jsonb_object_keys(custom))::int as n from leads where email_key = 'cf@lead.example'`);
    assert.equal(lead.n, 40);
    // Overwriting stored keys stays within the limit: fine.
    assert.equal((await enroll(other, [{ email: 'cf@lead.example', ...fields('a', 40), ...fields('b', 10) }])).status, 200);
    // One lead given twice in a request merges too: named by its last item.
    const twice = await enroll(other, [{ email: 'dup@lead.example', ...fields('c', 30) }, { email: 'ok@lead.example' }, { email: 'DUP@lead.example', ...fields('d', 30) }]);
    assert.equal(twice.status, 422, twice.text);
    assert.deepEqual(twice.body.errors.map((e: { index: number; field: string }) => [e.index, e.field]), [[2, 'customFields']]);
    assert.equal((await db.query(`select count(*)::int as n from leads where email_key in ('dup@lead.example', 'ok@lead.example')`)).rows[0].n, 0);
  });

  it('a custom field set to null is removed (as null clears a standard field): a lead at 50 can swap one for another', async () => {
    const id = await campaign();
    const fields = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i]));
    const custom = async (email: string) => (await db.query(`select custom from leads where email_key = $1`, [email])).rows[0].custom as Record<string, unknown>;
    assert.equal((await enroll(id, [{ email: 'swap@lead.example', ...fields('a', 50) }, { email: 'new@lead.example', plan: 'pro', region: null }])).status, 200);
    assert.deepEqual(await custom('new@lead.example'), { plan: 'pro' }, 'a new lead is stored without it');
    const res = await enroll(id, [{ email: 'swap@lead.example', a0: null, fresh: 'yes' }]);
    assert.equal(res.status, 200, res.text);
    const stored = await custom('swap@lead.example');
    assert.equal(Object.keys(stored).length, 50);
    assert.equal('a0' in stored, false);
    assert.equal(stored.fresh, 'yes');
    assert.equal(stored.a1, 1);
  });

  it('400 for a malformed body, a missing or empty leads array, more than 10,000 leads; 404 for an unknown campaign', async () => {
    const id = await campaign();
    for (const body of [{}, { leads: [] }, { leads: {} }, { leads: [{ email: 'a@b.example' }], extra: true }]) {
      const res = await app.request('POST', `/v1/campaigns/${id}/leads/bulk`, { key, body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.error.code, 'invalid_request');
    }
    const tooMany = await enroll(id, Array.from({ length: 10_001 }, (_, i) => ({ email: `l${i}@example.com` })));
    assert.equal(tooMany.status, 400);
    assert.match(tooMany.body.error.message, /10000|10,000/);
    const missing = await enroll('cmp_nope', [{ email: 'a@b.example' }]);
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'campaign_not_found');
  });

  it('the same leads enrolled by parallel requests in opposite orders, new and existing: every request answers, nothing is doubled', async () => {
    const id = await campaign();
    for (let round = 0; round < 3; round++) {
      const leads = Array.from({ length: 200 }, (_, i) => ({ email: `par${round}-${i}@example.com`, firstName: `P${i}` }));
      const reversed = [...leads].reverse();
      // First all new (the inserts), then all existing (the updates), each from both ends at once.
      for (let pass = 0; pass < 2; pass++) {
        const answers = await Promise.all(Array.from({ length: 8 }, (_, k) => enroll(id, k % 2 ? reversed : leads)));
        for (const a of answers) assert.equal(a.status, 200, a.text);
        assert.equal(answers.reduce((n, a) => n + a.body.enrolled, 0), pass === 0 ? 200 : 0);
      }
    }
    assert.equal((await db.query('select count(*)::int as n from enrollments where campaign_id = $1', [id])).rows[0].n, 600);
    assert.equal((await stats(id)).totalEnrolled, 600);
  });

  it('10,000 leads in one request', async () => {
    const id = await campaign();
    const leads = Array.from({ length: 10_000 }, (_, i) => ({ email: `bulk${i}@example.org`, firstName: `F${i}`, idx: i }));
    const res = await enroll(id, leads);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { enrolled: 10_000, updated: 0, total: 10_000 });
    assert.equal((await stats(id)).totalEnrolled, 10_000);
    const again = await enroll(id, leads.slice(0, 10));
    assert.deepEqual(again.body, { enrolled: 0, updated: 10, total: 10 });
    assert.equal((await stats(id)).totalEnrolled, 10_000);
  });

  it('start: 400 no_leads_enrolled, 400 no_sequence_steps, 404 campaign_not_found', async () => {
    const empty = await campaign();
    let res = await app.request('POST', `/v1/campaigns/${empty}/start`, { key });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'no_leads_enrolled');
    const noSteps = await campaign(0);
    await enroll(noSteps, [{ email: 'x@example.com' }]);
    res = await app.request('POST', `/v1/campaigns/${noSteps}/start`, { key });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'no_sequence_steps');
    assert.equal((await app.request('GET', `/v1/campaigns/${noSteps}`, { key })).body.status, 'draft');
    res = await app.request('POST', '/v1/campaigns/cmp_nope/start', { key });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'campaign_not_found');
    res = await app.request('POST', `/v1/campaigns/${empty}/start`, { key, body: { now: true } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'invalid_request');
  });

  it('every transition of spec §3, with events in the outbox and step 0 queued exactly once', async () => {
    const id = await campaign();
    await app.services().suppression.add(workspaceId, ['blocked@example.com'], 'manual', 'test');
    await enroll(id, [{ email: 'l1@example.com' }, { email: 'l2@example.com' }, { email: 'blocked@example.com' }]);

    // draft -> pause: no-op
    let res = await app.request('POST', `/v1/campaigns/${id}/pause`, { key });
    assert.deepEqual(res.body, { id, status: 'draft', pausedAt: null });

    // draft -> start
    res = await app.request('POST', `/v1/campaigns/${id}/start`, { key, body: {} });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { id, status: 'running', startedAt: '2026-04-01T08:00:00.000Z' });
    let s = await stats(id);
    assert.equal(s.queued, 2, 'the suppressed lead is never queued');
    assert.equal(s.totalEnrolled, 3);

    // running -> start: no-op, same startedAt, no second event, nothing queued twice
    clock.advance(60_000);
    res = await app.request('POST', `/v1/campaigns/${id}/start`, { key });
    assert.deepEqual(res.body, { id, status: 'running', startedAt: '2026-04-01T08:00:00.000Z' });

    // enrolling into a running campaign queues step 0 at once
    await enroll(id, [{ email: 'l3@example.com' }]);
    s = await stats(id);
    assert.equal(s.queued, 3);

    // running -> pause
    res = await app.request('POST', `/v1/campaigns/${id}/pause`, { key });
    assert.deepEqual(res.body, { id, status: 'paused', pausedAt: '2026-04-01T08:01:00.000Z' });
    // paused -> pause: no-op
    clock.advance(60_000);
    res = await app.request('POST', `/v1/campaigns/${id}/pause`, { key });
    assert.deepEqual(res.body, { id, status: 'paused', pausedAt: '2026-04-01T08:01:00.000Z' });
    // while paused, queued stays and new enrollments wait
    await enroll(id, [{ email: 'l4@example.com' }]);
    s = await stats(id);
    assert.equal(s.queued, 3);

    // paused -> start (resume): l4 gets its step 0; nothing else is queued again
    res = await app.request('POST', `/v1/campaigns/${id}/start`, { key });
    assert.deepEqual(res.body, { id, status: 'running', startedAt: '2026-04-01T08:00:00.000Z' });
    s = await stats(id);
    assert.equal(s.queued, 4);
    const { rows: msgs } = await db.query(`select enrollment_id, step_index, state from outbound_messages where campaign_id = $1`, [id]);
    assert.equal(msgs.length, 4);
    assert.ok(msgs.every((m) => m.step_index === 0 && m.state === 'queued'));

    const { rows: events } = await db.query(`select type, data from events where data->>'campaignId' = $1 order by created_at, id`, [id]);
    assert.deepEqual(
      events.map((e) => [e.type, e.data.resumed]),
      [
        ['campaign.started', false],
        ['campaign.started', true],
      ],
    );
    assert.deepEqual(Object.keys(events[0].data).sort(), ['campaignId', 'name', 'resumed', 'startedAt']);
  });

  it('an address taken off the suppression list before it was ever sent to is sent to: start, resume and re-enrollment check the list again', async () => {
    const status = async (id: string) =>
      Object.fromEntries((await app.request('GET', `/v1/campaigns/${id}/leads`, { key })).body.data.map((l: { email: string; status: string }) => [l.email, l.status]));
    await app.services().suppression.add(workspaceId, ['late@example.com', 'still@example.com', 'run@example.com', 'paused@example.com'], 'manual', 'test');

    // Draft: enrolled while suppressed, removed (the dashboard's removal), then started.
    const draft = await campaign();
    await enroll(draft, [{ email: 'late@example.com' }, { email: 'still@example.com' }, { email: 'ok@example.com' }]);
    assert.deepEqual(await status(draft), { 'late@example.com': 'suppressed', 'still@example.com': 'suppressed', 'ok@example.com': 'active' });
    assert.equal(await app.services().suppression.remove(workspaceId, ['late@example.com']), 1);
    assert.equal((await app.request('POST', `/v1/campaigns/${draft}/start`, { key })).status, 200);
    assert.deepEqual(await status(draft), { 'late@example.com': 'active', 'still@example.com': 'suppressed', 'ok@example.com': 'active' });
    assert.equal((await stats(draft)).queued, 2);

    // Running: the removal itself enrolls the lead again and queues its step 0, in the
    // campaigns that are running (the draft above waited for its start); enrolling it again
    // afterwards changes nothing.
    const running = await campaign();
    await enroll(running, [{ email: 'run@example.com' }, { email: 'other@example.com' }, { email: 'still@example.com' }]);
    await app.request('POST', `/v1/campaigns/${running}/start`, { key });
    assert.equal((await stats(running)).queued, 1);
    const woken = await listenForSend(app.databaseUrl);
    try {
      assert.equal(await app.services().suppression.remove(workspaceId, ['RUN@example.com ']), 1);
      assert.deepEqual(await status(running), { 'run@example.com': 'active', 'other@example.com': 'active', 'still@example.com': 'suppressed' });
      assert.equal((await stats(running)).queued, 2);
      await woken.heard; // the workers hear of it when the removal commits
    } finally {
      await woken.close();
    }
    const again = await enroll(running, [{ email: 'run@example.com' }, { email: 'still@example.com' }]);
    assert.deepEqual(again.body, { enrolled: 0, updated: 2, total: 2 });
    const s = await stats(running);
    assert.equal(s.queued, 2);
    assert.equal(s.totalEnrolled, 3);
    const { rows: once } = await db.query(`select count(*)::int as n from outbound_messages m join leads l on l.id = m.lead_id where m.campaign_id = $1 and l.email_key = 'run@example.com'`, [running]);
    assert.equal(once[0].n, 1, 'step 0 once');
    // The draft's lead stayed as its start left it, and a paused campaign waits for its resume (below).
    assert.equal((await stats(draft)).queued, 2);

    // Paused: the resume checks again.
    const paused = await campaign();
    await enroll(paused, [{ email: 'paused@example.com' }, { email: 'p2@example.com' }]);
    await app.request('POST', `/v1/campaigns/${paused}/start`, { key });
    await app.request('POST', `/v1/campaigns/${paused}/pause`, { key });
    await app.services().suppression.remove(workspaceId, ['paused@example.com']);
    await app.request('POST', `/v1/campaigns/${paused}/start`, { key });
    assert.equal((await stats(paused)).queued, 2);
    const { rows } = await db.query(`select count(*)::int as n from outbound_messages where campaign_id = $1 and step_index = 0`, [paused]);
    assert.equal(rows[0].n, 2, 'step 0 once per lead');
  });

  it('stats: every field, rates 0 while nothing is delivered', async () => {
    const id = await campaign();
    await enroll(id, [{ email: 's1@example.com' }]);
    const s = await stats(id);
    assert.deepEqual(s, {
      campaignId: id,
      totalEnrolled: 1,
      sent: 0,
      delivered: 0,
      bounced: 0,
      replied: 0,
      queued: 0,
      scheduled: 0,
      opened: 0,
      unsubscribed: 0,
      complained: 0,
      openRate: 0,
      replyRate: 0,
      sendersAvailable: 0,
      blockedReason: 'no_sender_pool',
    });
    const bad = await app.request('GET', `/v1/campaigns/${id}/stats?x=1`, { key });
    assert.equal(bad.status, 400);
  });

  it('a request\'s leads are enrolled, listed and sent in its order, whatever the suppression list and the plan', async () => {
    // A workspace with a long suppression list: the enrollment's join to it may be planned in
    // any way (a hash on the leads, a merge in address order); the order stays the request's.
    const suppressed = Array.from({ length: 3000 }, (_, i) => `ord${String(i).padStart(5, '0')}@block.example`);
    for (let i = 0; i < suppressed.length; i += 1000) await app.services().suppression.add(workspaceId, suppressed.slice(i, i + 1000), 'manual', 'test');
    await db.query('analyze suppressions');
    // The statement itself under each join the planner may pick for it.
    for (const plan of ['enable_nestloop', 'enable_hashjoin', 'enable_mergejoin']) {
      const id = await campaign(1);
      const leads = Array.from({ length: 50 }, (_, i) => {
        const email = i % 5 === 0 ? suppressed[100 + i] : `plan.${String(999 - i).padStart(4, '0')}@lead.example`;
        return { id: `lead_plan_${plan}_${i}`, emailKey: email, email };
      });
      const enrolled = await app.deps.orm.em.fork().transactional(async (em) => {
        // only the one join method left
        for (const off of ['enable_nestloop', 'enable_hashjoin', 'enable_mergejoin'].filter((p) => p !== plan)) await sql(em, `select set_config(?, 'off', true)`, [off]);
        const [{ plan: used }] = await sql<{ plan: string }>(em, `select current_setting('enable_nestloop') || current_setting('enable_hashjoin') || current_setting('enable_mergejoin') as plan`);
        assert.equal(used, ['enable_nestloop', 'enable_hashjoin', 'enable_mergejoin'].map((p) => (p === plan ? 'on' : 'off')).join(''), 'in this transaction');
        return enrollLeads(em, workspaceId, id, leads, clock.now());
      });
      assert.deepEqual(enrolled.map((e) => e.lead_id), leads.map((l) => l.id), `${plan}: returned in the order given`);
      const { rows } = await db.query(`select lead_id from enrollments where campaign_id = $1 order by seq`, [id]);
      assert.deepEqual(rows.map((r) => r.lead_id), leads.map((l) => l.id), `${plan}: enrolled in the order given`);
    }
    for (const size of [10, 2000]) {
      // Addresses in descending order, every tenth one suppressed.
      const emails = Array.from({ length: size }, (_, i) => (i % 10 === 0 ? suppressed[2999 - i] : `ord${size}.${String(5000 - i).padStart(5, '0')}@lead.example`));
      const id = await campaign(1);
      assert.equal((await enroll(id, emails.map((email) => ({ email })))).status, 200);
      const listed: string[] = [];
      for (let offset = 0; offset < emails.length; offset += 200) {
        const page = await app.request('GET', `/v1/campaigns/${id}/leads?limit=200&offset=${offset}`, { key });
        listed.push(...page.body.data.map((l: { email: string }) => l.email));
      }
      assert.deepEqual(listed, emails, `${size} leads: listed in the order of the request`);
      assert.equal((await app.request('POST', `/v1/campaigns/${id}/start`, { key })).status, 200);
      const { rows } = await db.query(`select to_email from outbound_messages where campaign_id = $1 order by due_at, id`, [id]);
      assert.deepEqual(rows.map((r) => r.to_email), emails.filter((_, i) => i % 10 !== 0), `${size} leads: queued (and so claimed) in the order of the request`);
    }
  });

  it('GET /v1/campaigns/:id/leads: each enrollment with its lead, status, step, next send time', async () => {
    const id = await campaign();
    await app.services().suppression.add(workspaceId, ['gone@example.com'], 'manual', 'test');
    await enroll(id, [{ email: 'v1@example.com', firstName: 'Vee', tier: 'gold' }, { email: 'gone@example.com' }, { email: 'v3@example.com' }]);
    let res = await app.request('GET', `/v1/campaigns/${id}/leads?limit=2`, { key });
    assert.equal(res.status, 200);
    assert.equal(res.body.total, 3);
    assert.equal(res.body.hasMore, true);
    assert.deepEqual(Object.keys(res.body.data[0]).sort(), [
      'company', 'currentStep', 'customFields', 'email', 'enrolledAt', 'enrollmentId', 'failureReason', 'firstName', 'id', 'jobTitle', 'lastEvent', 'lastEventAt', 'lastName', 'nextSendAt', 'status',
    ]);
    assert.equal(res.body.data[0].email, 'v1@example.com');
    assert.deepEqual(res.body.data[0].customFields, { tier: 'gold' });
    assert.equal(res.body.data[0].nextSendAt, null);
    assert.equal(res.body.data[1].status, 'suppressed');
    await app.request('POST', `/v1/campaigns/${id}/start`, { key });
    res = await app.request('GET', `/v1/campaigns/${id}/leads?status=active`, { key });
    assert.equal(res.body.total, 2);
    assert.ok(res.body.data.every((d: { currentStep: number; nextSendAt: string }) => d.currentStep === 0 && d.nextSendAt === clock.now().toISOString()));
    const bad = await app.request('GET', `/v1/campaigns/${id}/leads?status=happy`, { key });
    assert.equal(bad.status, 400);
    // Repeatable, as the replies' classification and the inbox's status are.
    res = await app.request('GET', `/v1/campaigns/${id}/leads?status=active&status=suppressed`, { key });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.data.map((d: { email: string }) => d.email), ['v1@example.com', 'gone@example.com', 'v3@example.com']);
    res = await app.request('GET', `/v1/campaigns/${id}/leads?status=suppressed&status=bounced`, { key });
    assert.deepEqual([res.body.total, res.body.data[0].email], [1, 'gone@example.com']);
    const badOne = await app.request('GET', `/v1/campaigns/${id}/leads?status=active&status=happy`, { key });
    assert.equal(badOne.status, 400);
    assert.match(badOne.body.error.message, /\(got "happy"\)$/);
  });
});

/** A listener on the workers' wake-up channel: `heard` resolves at its first notification. */
async function listenForSend(url: string): Promise<{ heard: Promise<void>; close: () => Promise<void> }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`listen ${SEND_CHANNEL}`);
  const heard = new Promise<void>((resolve) => c.once('notification', () => resolve()));
  return { heard, close: () => c.end() };
}
