import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, ManualClock, type TestApp } from '../support/harness.ts';

describe('campaigns: create, list, get, patch', () => {
  let app: TestApp;
  let key: string;
  let workspaceId: string;
  const clock = new ManualClock('2026-04-01T08:00:00.000Z');
  before(async () => {
    app = await startTestApp({ clock });
    ({ adminKey: key, workspace: { id: workspaceId } } = await seedWorkspace(app));
  });
  after(async () => app.close());

  async function count(table: string): Promise<number> {
    const c = new pg.Client({ connectionString: app.databaseUrl });
    await c.connect();
    const { rows } = await c.query(`select count(*)::int as n from ${table}`);
    await c.end();
    return rows[0].n;
  }

  it('POST /v1/campaigns answers 201 with the flat reference shape, status draft', async () => {
    const res = await app.request('POST', '/v1/campaigns', {
      key,
      body: { name: 'Q2 outreach', sequenceSteps: [{ subject: 'Hi {{firstName}}', bodyHtml: '<p>Hello</p>' }, { subject: '', bodyHtml: '<p>Bump</p>', delayHours: 72 }] },
    });
    assert.equal(res.status, 201);
    assert.match(res.body.id, /^cmp_/);
    assert.deepEqual(res.body, {
      id: res.body.id,
      name: 'Q2 outreach',
      status: 'draft',
      sequenceSteps: [
        { stepIndex: 0, subject: 'Hi {{firstName}}', bodyHtml: '<p>Hello</p>', delayHours: 0 },
        { stepIndex: 1, subject: '', bodyHtml: '<p>Bump</p>', delayHours: 72 },
      ],
      sequenceStepCount: 2,
      senderPoolId: null,
      schedule: null,
      trackOpens: true,
      createdAt: '2026-04-01T08:00:00.000Z',
      startedAt: null,
      pausedAt: null,
    });
  });

  it('defaults: no steps, the workspace’s oldest pool, delayHours 48', async () => {
    const s = app.services();
    const oldest = await s.senders.createPool(workspaceId, 'first', 100);
    clock.advance(1000);
    await s.senders.createPool(workspaceId, 'second', 100);
    const res = await app.request('POST', '/v1/campaigns', { key, body: { name: 'Bare' } });
    assert.equal(res.status, 201);
    assert.deepEqual(res.body.sequenceSteps, []);
    assert.equal(res.body.sequenceStepCount, 0);
    assert.equal(res.body.senderPoolId, oldest.id);
    const two = await app.request('POST', '/v1/campaigns', { key, body: { name: 'Two', sequenceSteps: [{ subject: 'a', bodyHtml: 'b' }, { subject: 'c', bodyHtml: 'd' }] } });
    assert.equal(two.body.sequenceSteps[1].delayHours, 48);
    const withSchedule = await app.request('POST', '/v1/campaigns', {
      key,
      body: { name: 'Sched', schedule: { timezone: 'Europe/Berlin', days: ['mon', 'tue'], start: '09:00', end: '17:30' }, trackOpens: false },
    });
    assert.equal(withSchedule.status, 201);
    assert.deepEqual(withSchedule.body.schedule, { timezone: 'Europe/Berlin', days: ['mon', 'tue'], start: '09:00', end: '17:30' });
    assert.equal(withSchedule.body.trackOpens, false);
  });

  it('every field is validated: 400 invalid_request naming the field, nothing written', async () => {
    const before = await count('campaigns');
    const cases: Array<[unknown, RegExp]> = [
      [{}, /name/],
      [{ name: '' }, /name/],
      [{ name: '   ' }, /name/],
      [{ name: 'x'.repeat(201) }, /name/],
      [{ name: 42 }, /name/],
      [{ name: 'n', sequenceSteps: {} }, /sequenceSteps/],
      [{ name: 'n', sequenceSteps: [{ subject: 'a' }] }, /sequenceSteps\[0\]\.bodyHtml/],
      [{ name: 'n', sequenceSteps: [{ subject: 'a', bodyHtml: 'b', extra: 1 }] }, /extra/],
      [{ name: 'n', sequenceSteps: [{ subject: '', bodyHtml: 'b' }] }, /sequenceSteps\[0\]\.subject/],
      // A first subject of tokens alone would be sent empty to a lead without those fields.
      [{ name: 'n', sequenceSteps: [{ subject: '{{firstName}} {{ company }}', bodyHtml: 'b' }] }, /sequenceSteps\[0\]\.subject: .*fallback/],
      [{ name: 'n', sequenceSteps: [{ subject: '{{firstName|}}', bodyHtml: 'b' }] }, /sequenceSteps\[0\]\.subject/],
      [{ name: 'n', sequenceSteps: [{ subject: 's'.repeat(999), bodyHtml: 'b' }] }, /sequenceSteps\[0\]\.subject/],
      [{ name: 'n', sequenceSteps: [{ subject: 's', bodyHtml: 'b'.repeat(256 * 1024 + 1) }] }, /sequenceSteps\[0\]\.bodyHtml/],
      [{ name: 'n', sequenceSteps: Array.from({ length: 21 }, () => ({ subject: 's', bodyHtml: 'b' })) }, /sequenceSteps.*20/],
      [{ name: 'n', sequenceSteps: [{ subject: 's', bodyHtml: 'b' }, { subject: 's', bodyHtml: 'b', delayHours: -1 }] }, /delayHours/],
      [{ name: 'n', schedule: { timezone: 'Mars/Olympus', days: ['mon'], start: '09:00', end: '17:00' } }, /schedule\.timezone/],
      [{ name: 'n', schedule: { timezone: 'UTC', days: ['funday'], start: '09:00', end: '17:00' } }, /schedule\.days/],
      [{ name: 'n', schedule: { timezone: 'UTC', days: [], start: '09:00', end: '17:00' } }, /schedule\.days/],
      [{ name: 'n', schedule: { timezone: 'UTC', days: ['mon'], start: '9am', end: '17:00' } }, /schedule\.start/],
      [{ name: 'n', schedule: { timezone: 'UTC', days: ['mon'], start: '09:00', end: '09:00' } }, /schedule\.end/],
      [{ name: 'n', senderPoolId: 'pool_nope' }, /senderPoolId/],
      // An empty id names no pool (PATCH says the same); it used to fall back to the default pool.
      [{ name: 'n', senderPoolId: '' }, /senderPoolId/],
      [{ name: 'n', trackOpens: 'yes' }, /trackOpens/],
      [{ name: 'n', color: 'red' }, /color/],
    ];
    for (const [body, match] of cases) {
      const res = await app.request('POST', '/v1/campaigns', { key, body });
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 200));
      assert.equal(res.body.error.code, 'invalid_request');
      assert.match(res.body.error.message, match, JSON.stringify(body).slice(0, 100));
    }
    const malformed = await app.request('POST', '/v1/campaigns', { key, raw: '{"name": "x"', headers: { 'content-type': 'application/json' } });
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.error.code, 'invalid_request');
    // A pool of another workspace is unknown here.
    const other = await seedWorkspace(app);
    const foreignPool = await app.services().senders.createPool(other.workspace.id, 'theirs', 10);
    const foreign = await app.request('POST', '/v1/campaigns', { key, body: { name: 'n', senderPoolId: foreignPool.id } });
    assert.equal(foreign.status, 400);
    assert.match(foreign.body.error.message, /senderPoolId/);
    assert.equal(await count('campaigns'), before);
  });

  it('GET /v1/campaigns pages newest first; GET /v1/campaigns/:id; 404 campaign_not_found across workspaces', async () => {
    const list = await app.request('GET', '/v1/campaigns?limit=2', { key });
    assert.equal(list.status, 200);
    assert.equal(list.body.data.length, 2);
    assert.equal(list.body.hasMore, true);
    const total = list.body.total;
    const rest = await app.request('GET', `/v1/campaigns?limit=200&offset=2`, { key });
    assert.equal(rest.body.data.length, total - 2);
    assert.equal(rest.body.hasMore, false);
    const names = [...list.body.data, ...rest.body.data].map((c: { name: string }) => c.name);
    assert.equal(names[names.length - 1], 'Q2 outreach');
    for (const q of ['limit=0', 'limit=201', 'offset=-1', 'limit=abc', 'page=2']) {
      const bad = await app.request('GET', `/v1/campaigns?${q}`, { key });
      assert.equal(bad.status, 400, q);
      assert.equal(bad.body.error.code, 'invalid_request');
    }
    // Query numbers are decimal digits: what Number() would also take is refused, naming the text.
    for (const [q, text] of [['limit=0x10', '"0x10"'], ['limit=1e1', '"1e1"'], ['limit=', '""'], ['offset=1.5', '"1.5"'], ['limit=abc', '"abc"'], ['limit=1&limit=2', 'a repeated parameter']]) {
      const bad = await app.request('GET', `/v1/campaigns?${q}`, { key });
      assert.equal(bad.status, 400, q);
      const field = q.split('=')[0];
      assert.equal(bad.body.error.message, `query ${field}: must be an integer written in decimal digits, not ${text}`, q);
    }
    const padded = await app.request('GET', '/v1/campaigns?limit=002', { key });
    assert.equal(padded.status, 200);
    assert.equal(padded.body.data.length, 2);
    const one = await app.request('GET', `/v1/campaigns/${list.body.data[0].id}`, { key });
    assert.deepEqual(one.body, list.body.data[0]);
    const other = await seedWorkspace(app);
    for (const path of [`/v1/campaigns/${one.body.id}`, '/v1/campaigns/cmp_missing', `/v1/campaigns/${one.body.id}/stats`, `/v1/campaigns/${one.body.id}/leads`]) {
      const res = await app.request('GET', path, { key: other.adminKey });
      assert.equal(res.status, 404, path);
      assert.equal(res.body.error.code, 'campaign_not_found');
    }
    for (const action of ['start', 'pause']) {
      const res = await app.request('POST', `/v1/campaigns/${one.body.id}/${action}`, { key: other.adminKey });
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'campaign_not_found');
    }
    const patch = await app.request('PATCH', `/v1/campaigns/${one.body.id}`, { key: other.adminKey, body: { name: 'x' } });
    assert.equal(patch.body.error.code, 'campaign_not_found');
  });

  it('PATCH changes name, schedule, steps while not running; steps of a running campaign are 409', async () => {
    const created = await app.request('POST', '/v1/campaigns', { key, body: { name: 'Patchable', sequenceSteps: [{ subject: 'a', bodyHtml: 'b' }] } });
    const id = created.body.id;
    const res = await app.request('PATCH', `/v1/campaigns/${id}`, {
      key,
      body: { name: 'Renamed', sequenceSteps: [{ subject: 'x', bodyHtml: 'y' }, { subject: '', bodyHtml: 'z', delayHours: 1.5 }], schedule: { timezone: 'America/New_York', days: ['fri'], start: '22:00', end: '06:00' } },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'Renamed');
    assert.equal(res.body.sequenceStepCount, 2);
    assert.equal(res.body.sequenceSteps[1].delayHours, 1.5);
    assert.equal(res.body.schedule.timezone, 'America/New_York');
    const cleared = await app.request('PATCH', `/v1/campaigns/${id}`, { key, body: { schedule: null } });
    assert.equal(cleared.body.schedule, null);
    assert.equal(cleared.body.sequenceStepCount, 2);
    // A draft that never started may be left without steps (as it may be created without).
    const emptied = await app.request('PATCH', `/v1/campaigns/${id}`, { key, body: { sequenceSteps: [] } });
    assert.deepEqual([emptied.status, emptied.body.sequenceStepCount], [200, 0]);
    await app.request('PATCH', `/v1/campaigns/${id}`, { key, body: { sequenceSteps: [{ subject: 'x', bodyHtml: 'y' }, { subject: '', bodyHtml: 'z', delayHours: 1.5 }] } });
    const bad = await app.request('PATCH', `/v1/campaigns/${id}`, { key, body: { status: 'running' } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /status/);

    await app.request('POST', `/v1/campaigns/${id}/leads/bulk`, { key, body: { leads: [{ email: 'p@x.example' }] } });
    assert.equal((await app.request('POST', `/v1/campaigns/${id}/start`, { key })).status, 200);
    const running = await app.request('PATCH', `/v1/campaigns/${id}`, { key, body: { sequenceSteps: [{ subject: 'n', bodyHtml: 'n' }] } });
    assert.equal(running.status, 409);
    assert.equal(running.body.error.code, 'campaign_running');
    assert.equal((await app.request('PATCH', `/v1/campaigns/${id}`, { key, body: { name: 'Still renamable' } })).body.name, 'Still renamable');
    await app.request('POST', `/v1/campaigns/${id}/pause`, { key });
    assert.equal((await app.request('PATCH', `/v1/campaigns/${id}`, { key, body: { sequenceSteps: [{ subject: 'n', bodyHtml: 'n' }] } })).status, 200);
  });

  it('a campaign made before its workspace had a pool takes the oldest pool when it starts; with none, it starts and waits', async () => {
    const other = await seedWorkspace(app);
    const k = other.adminKey;
    const made = await app.request('POST', '/v1/campaigns', { key: k, body: { name: 'Early', sequenceSteps: [{ subject: 'a', bodyHtml: 'b' }] } });
    assert.equal(made.body.senderPoolId, null);
    await app.request('POST', `/v1/campaigns/${made.body.id}/leads/bulk`, { key: k, body: { leads: [{ email: 'early@example.com' }] } });
    // No pool yet: the start succeeds (contract §4) and the campaign keeps none.
    assert.equal((await app.request('POST', `/v1/campaigns/${made.body.id}/start`, { key: k })).status, 200);
    assert.equal((await app.request('GET', `/v1/campaigns/${made.body.id}`, { key: k })).body.senderPoolId, null);
    await app.request('POST', `/v1/campaigns/${made.body.id}/pause`, { key: k });
    const oldest = await app.services().senders.createPool(other.workspace.id, 'first', 100);
    clock.advance(1000);
    await app.services().senders.createPool(other.workspace.id, 'second', 100);
    const resumed = await app.request('POST', `/v1/campaigns/${made.body.id}/start`, { key: k });
    assert.equal(resumed.status, 200, resumed.text);
    assert.equal((await app.request('GET', `/v1/campaigns/${made.body.id}`, { key: k })).body.senderPoolId, oldest.id);
    // A pool set by hand is kept.
    const chosen = await app.request('POST', '/v1/campaigns', { key: k, body: { name: 'Chosen', senderPoolId: oldest.id, sequenceSteps: [{ subject: 'a', bodyHtml: 'b' }] } });
    await app.request('PATCH', `/v1/campaigns/${chosen.body.id}`, { key: k, body: { senderPoolId: (await app.services().senders.createPool(other.workspace.id, 'third', 100)).id } });
    await app.request('POST', `/v1/campaigns/${chosen.body.id}/leads/bulk`, { key: k, body: { leads: [{ email: 'chosen@example.com' }] } });
    await app.request('POST', `/v1/campaigns/${chosen.body.id}/start`, { key: k });
    assert.notEqual((await app.request('GET', `/v1/campaigns/${chosen.body.id}`, { key: k })).body.senderPoolId, oldest.id);
  });
});
