// The /v1 read routes the dashboard added (issue 17, docs/dashboard.md): the API key list, the
// suppression list with search and paging, the campaign timeline. Driven with API keys and with
// a dashboard session; bad input is a 400 in the envelope.
import assert from 'node:assert/strict';
import pg from 'pg';
import { seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';
import { signIn } from '../support/dashboard.ts';
import { dashboardWorld } from './world.ts';

describe('dashboard /v1 reads: API keys, suppression list, campaign timeline', function () {
  this.timeout(60_000);
  const w = dashboardWorld();
  let app: TestApp;
  let db: pg.Client;
  before(() => ({ app, db } = w));

  it('GET /v1/api-keys lists the workspace\u2019s keys newest first, with last use and revocation, never a secret', async () => {
    const { workspace, adminKey, adminKeyId } = await seedWorkspace(app);
    const { sdr, sdrKey, sdrKeyId } = await seedSdr(app, workspace.id);
    const s = app.services();
    const old = await s.workspaces.createKey({ workspace: workspace.id, role: 'admin', name: 'old' });
    await s.workspaces.revokeKey(old.id);
    await seedWorkspace(app);
    const res = await app.request('GET', '/v1/api-keys', { key: adminKey });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.total, 3);
    assert.equal(res.body.hasMore, false);
    assert.deepEqual(new Set(res.body.data.map((k: { id: string }) => k.id)), new Set([adminKeyId, sdrKeyId, old.id]));
    const byId = new Map(res.body.data.map((k: any) => [k.id, k]));
    assert.ok((byId.get(adminKeyId) as any).lastUsedAt, 'the calling key was just used');
    assert.equal((byId.get(sdrKeyId) as any).sdrId, sdr.id);
    assert.equal((byId.get(sdrKeyId) as any).role, 'sdr');
    assert.ok((byId.get(old.id) as any).revokedAt);
    for (const secret of [adminKey, sdrKey, old.key]) assert.ok(!res.text.includes(secret.slice(10)), 'no secret in the list');
    assert.ok(!/key_hash|keyHash/.test(res.text));
    const page = await app.request('GET', '/v1/api-keys?limit=2&offset=0', { key: adminKey });
    assert.equal(page.body.data.length, 2);
    assert.equal(page.body.hasMore, true);
    const session = await signIn(app, adminKey);
    assert.equal((await session.request('GET', '/v1/api-keys')).body.total, 3);
    // A key in use through a dashboard session is in use: its last use moves as a bearer's does
    // (at most once a minute), and only with a request that succeeded.
    const lastUsed = async () => (await db.query('select last_used_at from api_keys where id = $1', [adminKeyId])).rows[0].last_used_at as Date;
    await db.query(`update api_keys set last_used_at = now() - interval '10 minutes' where id = $1`, [adminKeyId]);
    const stale = await lastUsed();
    assert.equal((await session.request('GET', '/v1/api-keys?limit=0')).status, 400);
    assert.equal((await lastUsed()).getTime(), stale.getTime(), 'a refused request notes nothing');
    assert.equal((await session.request('GET', '/v1/api-keys')).status, 200);
    assert.ok(Date.now() - (await lastUsed()).getTime() < 60_000, 'noted by the session\'s request');
    assert.equal((await app.request('GET', '/v1/api-keys', { key: sdrKey })).status, 403);
    for (const q of ['limit=0', 'limit=201', 'offset=-1', 'limit=abc', 'secret=1']) {
      const bad = await app.request('GET', `/v1/api-keys?${q}`, { key: adminKey });
      assert.equal(bad.status, 400, q);
      assert.equal(bad.body.error.code, 'invalid_request');
    }
  });

  it('GET /v1/suppression-list searches by part of an address, filters by reason and pages', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const other = await seedWorkspace(app);
    const s = app.services();
    await s.suppression.add(workspace.id, Array.from({ length: 30 }, (_, i) => `lead${i}@Acme.example`), 'manual', 'api');
    await s.suppression.add(workspace.id, ['bounce_1@other.example', 'bounce%2@other.example'], 'hard_bounce', 'msg_x');
    await s.suppression.add(other.workspace.id, ['lead1@acme.example'], 'manual', 'api');

    const all = await app.request('GET', '/v1/suppression-list', { key: adminKey });
    assert.equal(all.status, 200, all.text);
    assert.equal(all.body.total, 32);
    assert.equal(all.body.data.length, 32);
    assert.deepEqual(Object.keys(all.body.data[0]).sort(), ['createdAt', 'email', 'reason', 'source']);

    const acme = await app.request('GET', '/v1/suppression-list?q=ACME&limit=10&offset=25', { key: adminKey });
    assert.equal(acme.body.total, 30);
    assert.equal(acme.body.data.length, 5);
    assert.equal(acme.body.hasMore, false);
    const one = await app.request('GET', '/v1/suppression-list?q=lead1%40', { key: adminKey });
    assert.deepEqual(one.body.data.map((r: { email: string }) => r.email), ['lead1@Acme.example']);
    // LIKE wildcards in the search are plain characters.
    const underscore = await app.request('GET', '/v1/suppression-list?q=_', { key: adminKey });
    assert.deepEqual(underscore.body.data.map((r: { email: string }) => r.email), ['bounce_1@other.example']);
    const percent = await app.request('GET', '/v1/suppression-list?q=%25', { key: adminKey });
    assert.deepEqual(percent.body.data.map((r: { email: string }) => r.email), ['bounce%2@other.example']);
    const bounces = await app.request('GET', '/v1/suppression-list?reason=hard_bounce', { key: adminKey });
    assert.equal(bounces.body.total, 2);
    assert.equal(bounces.body.data[0].source, 'msg_x');
    for (const q of ['reason=spam', 'limit=500', `q=${'x'.repeat(400)}`, 'page=2']) {
      const bad = await app.request('GET', `/v1/suppression-list?${q}`, { key: adminKey });
      assert.equal(bad.status, 400, q);
    }
  });

  it('GET /v1/campaigns/:id/timeline counts sends, deliveries, opens, bounces and replies per UTC hour or day, zero-filled', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const s = app.services();
    const campaign = await s.campaigns.create(workspace.id, { name: 'timeline', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }, { subject: '', bodyHtml: '<p>Again</p>' }] });
    const otherCampaign = await s.campaigns.create(workspace.id, { name: 'other', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] });
    await s.campaigns.enroll(workspace.id, campaign.id, [{ email: 'a@x.example' }, { email: 'b@x.example' }, { email: 'c@x.example' }]);
    await s.campaigns.enroll(workspace.id, otherCampaign.id, [{ email: 'a@x.example' }]);
    const { rows: enrollments } = await db.query('select id, campaign_id, lead_id, workspace_id from enrollments where workspace_id = $1 order by seq', [workspace.id]);
    let n = 0;
    async function message(e: { id: string; campaign_id: string; lead_id: string; workspace_id: string }, step: number, fields: Record<string, unknown>) {
      const cols = Object.keys(fields);
      const { rows } = await db.query(
        `insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, due_at, to_email, created_at, updated_at${cols.map((c) => `, ${c}`).join('')})
         values ($1, $2, $3, $4, $5, $6, now(), 'x@x.example', now(), now()${cols.map((_, i) => `, $${i + 7}`).join('')}) returning id`,
        [`msg_t${++n}`, e.workspace_id, e.campaign_id, e.id, e.lead_id, step, ...Object.values(fields)],
      );
      return rows[0].id as string;
    }
    const [ea, eb, ec, eOther] = enrollments;
    const sentA = await message(ea, 0, { state: 'sent', sent_at: '2026-05-04T09:10:00Z', opened_at: '2026-05-04T11:59:59Z' });
    await message(eb, 0, { state: 'bounced', sent_at: '2026-05-04T09:50:00Z', bounce_type: 'hard', bounced_at: '2026-05-04T10:05:00Z' });
    await message(ec, 0, { state: 'sent', sent_at: '2026-05-04T10:00:00Z' });
    await message(ea, 1, { state: 'sent', sent_at: '2026-05-05T08:00:00Z' });
    await message(ec, 1, { state: 'queued' });
    await message(eOther, 0, { state: 'sent', sent_at: '2026-05-04T09:30:00Z' });
    for (const [e, classification, at] of [
      [ea, 'interested', '2026-05-04T12:30:00Z'],
      [ec, 'out_of_office', '2026-05-04T12:40:00Z'],
      [eb, 'bounce', '2026-05-04T10:05:00Z'],
    ] as const)
      await db.query(
        `insert into replies (id, workspace_id, campaign_id, lead_id, enrollment_id, outbound_message_id, email, classification, decided_by, confidence, received_at, created_at)
         values ($1, $2, $3, $4, $5, $6, 'x@x.example', $7, 'rules', 1, $8, now())`,
        [`rpl_t${++n}`, e.workspace_id, e.campaign_id, e.lead_id, e.id, sentA, classification, at],
      );

    const hourly = await app.request('GET', `/v1/campaigns/${campaign.id}/timeline?bucket=hour&from=2026-05-04T08:30:00Z&to=2026-05-04T13:00:00%2B00:00`, { key: adminKey });
    assert.equal(hourly.status, 200, hourly.text);
    assert.equal(hourly.body.bucket, 'hour');
    assert.equal(hourly.body.from, '2026-05-04T08:00:00.000Z');
    assert.equal(hourly.body.to, '2026-05-04T13:00:00.000Z');
    const compact = hourly.body.data.map((p: any) => `${p.t.slice(11, 13)} s${p.sent} d${p.delivered} o${p.opened} b${p.bounced} r${p.replied}`);
    assert.deepEqual(compact, ['08 s0 d0 o0 b0 r0', '09 s2 d1 o0 b0 r0', '10 s1 d1 o0 b1 r0', '11 s0 d0 o1 b0 r0', '12 s0 d0 o0 b0 r1', '13 s0 d0 o0 b0 r0']);

    const daily = await app.request('GET', `/v1/campaigns/${campaign.id}/timeline?bucket=day&from=2026-05-03T00:00:00Z&to=2026-05-05T23:00:00Z`, { key: adminKey });
    assert.deepEqual(
      daily.body.data.map((p: any) => [p.t, p.sent, p.bounced, p.replied]),
      [
        ['2026-05-03T00:00:00.000Z', 0, 0, 0],
        ['2026-05-04T00:00:00.000Z', 3, 1, 1],
        ['2026-05-05T00:00:00.000Z', 1, 0, 0],
      ],
    );
    // Defaults: up to now, 48 hourly buckets.
    const recent = await app.request('GET', `/v1/campaigns/${campaign.id}/timeline`, { key: adminKey });
    assert.equal(recent.body.data.length, 48);
    const session = await signIn(app, adminKey);
    assert.equal((await session.request('GET', `/v1/campaigns/${campaign.id}/timeline?bucket=day`)).body.data.length, 30);

    const other = await seedWorkspace(app);
    const foreign = await app.request('GET', `/v1/campaigns/${campaign.id}/timeline`, { key: other.adminKey });
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error.code, 'campaign_not_found');
    const bad = [
      'bucket=minute',
      'from=yesterday',
      'from=2026-05-05T00:00:00Z&to=2026-05-04T00:00:00Z',
      'bucket=hour&from=2026-01-01T00:00:00Z&to=2026-05-01T00:00:00Z',
      'bucket=day&bucket=hour',
      'since=2026-01-01T00:00:00Z',
    ];
    for (const q of bad) {
      const res = await app.request('GET', `/v1/campaigns/${campaign.id}/timeline?${q}`, { key: adminKey });
      assert.equal(res.status, 400, `${q}: ${res.text}`);
      assert.equal(res.body.error.code, 'invalid_request');
    }
  });
});
