// The admin's /v1 routes for the dashboard (issue 17, docs/dashboard.md): SDR profiles, the
// campaign step preview with the real renderer, and lead search in a campaign.
import assert from 'node:assert/strict';
import pg from 'pg';
import { seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';
import { signIn } from '../support/dashboard.ts';
import { dashboardWorld } from './world.ts';

describe('dashboard /v1 admin: SDR profiles, step preview, lead search', function () {
  this.timeout(60_000);
  const w = dashboardWorld({ config: { publicUrl: 'https://mail.example.com' } });
  let app: TestApp;
  let db: pg.Client;
  before(() => ({ app, db } = w));

  it('creates, lists, reads and edits SDR profiles; an invalid edit changes nothing; the SDR desk keys are refused', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const { sdr, sdrKey } = await seedSdr(app, workspace.id, 'Sam', 'sam@acme.example');
    const admin = await signIn(app, adminKey);
    const created = await admin.request('POST', '/v1/sdr-profiles', {
      body: { name: 'Dana', email: 'dana@acme.example', tone: 'warm, concise', calendarUrl: 'https://cal.example/dana', language: 'pt-BR', signature: 'Dana\nAcme' },
    });
    assert.equal(created.status, 200, created.text);
    assert.deepEqual(
      { ...created.body, id: typeof created.body.id, createdAt: typeof created.body.createdAt },
      {
        id: 'string',
        name: 'Dana',
        email: 'dana@acme.example',
        active: true,
        tone: 'warm, concise',
        signature: 'Dana\nAcme',
        calendarUrl: 'https://cal.example/dana',
        language: 'pt-BR',
        mailConnected: false,
        mailEmail: null,
        healthState: 'disconnected',
        lastSyncError: null,
        lastSyncedAt: null,
        openThreads: 0,
        createdAt: 'string',
      },
    );
    const sdrs = async () => Number((await db.query('select count(*)::int as n from sdrs where workspace_id = $1', [workspace.id])).rows[0].n);
    // A bad profile field refuses the whole creation.
    const badCreate = await admin.request('POST', '/v1/sdr-profiles', { body: { name: 'Eve', email: 'eve@acme.example', calendarUrl: 'http://insecure.example' } });
    assert.equal(badCreate.status, 400);
    assert.match(badCreate.body.error.message, /calendarUrl/);
    assert.equal(await sdrs(), 2);
    assert.equal((await admin.request('POST', '/v1/sdr-profiles', { body: { name: 'Dup', email: 'DANA@acme.example' } })).status, 409);
    for (const body of [{ name: 'x' }, { name: 'x', email: 'not-mail' }, { name: 'x', email: 'x@y.example', role: 'boss' }, { name: 'x', email: 'x@y.example', tone: 'x'.repeat(501) }]) {
      assert.equal((await admin.request('POST', '/v1/sdr-profiles', { body })).status, 400, JSON.stringify(body));
    }
    assert.equal(await sdrs(), 2);

    const list = await app.request('GET', '/v1/sdr-profiles', { key: adminKey });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.data.map((s: { name: string }) => s.name), ['Sam', 'Dana']);
    const dana = created.body.id as string;

    const edited = await app.request('PATCH', `/v1/sdr-profiles/${dana}`, { key: adminKey, body: { name: 'Dana M.', tone: '', active: false } });
    assert.equal(edited.status, 200, edited.text);
    assert.equal(edited.body.name, 'Dana M.');
    assert.equal(edited.body.tone, null);
    assert.equal(edited.body.active, false);
    assert.equal(edited.body.language, 'pt-BR');
    const inactive = await app.request('GET', '/v1/sdr-profiles?active=false', { key: adminKey });
    assert.deepEqual(inactive.body.data.map((s: { id: string }) => s.id), [dana]);
    // An edit with one bad field writes none of its fields.
    const bad = await app.request('PATCH', `/v1/sdr-profiles/${sdr.id}`, { key: adminKey, body: { name: 'Samuel', active: false, language: 'not a tag!' } });
    assert.equal(bad.status, 400);
    const sam = await app.request('GET', `/v1/sdr-profiles/${sdr.id}`, { key: adminKey });
    assert.deepEqual([sam.body.name, sam.body.active, sam.body.language], ['Sam', true, null]);
    // Deactivating an SDR closes its keys (403), as `mailgate sdr deactivate` does.
    assert.equal((await app.request('PATCH', `/v1/sdr-profiles/${sdr.id}`, { key: adminKey, body: { active: false } })).status, 200);
    assert.equal((await app.request('GET', '/v1/sdr/inbox', { key: sdrKey })).status, 403);
    assert.equal((await app.request('PATCH', `/v1/sdr-profiles/${sdr.id}`, { key: adminKey, body: { active: true } })).body.active, true);
    assert.equal((await app.request('GET', '/v1/sdr/inbox', { key: sdrKey })).status, 200);

    const other = await seedWorkspace(app);
    assert.equal((await app.request('GET', `/v1/sdr-profiles/${sdr.id}`, { key: other.adminKey })).status, 404);
    assert.equal((await app.request('PATCH', `/v1/sdr-profiles/${sdr.id}`, { key: other.adminKey, body: { name: 'stolen' } })).body.error.code, 'sdr_not_found');
    assert.equal((await app.request('GET', '/v1/sdr-profiles', { key: sdrKey })).status, 403);
    assert.equal((await app.request('PATCH', `/v1/sdr-profiles/${sdr.id}`, { key: adminKey, body: { email: 'new@acme.example' } })).status, 400);
  });

  it('previews a step for a lead with the sending renderer: tokens, escaping, fallbacks, Re: subjects; nothing written', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const s = app.services();
    const campaign = await s.campaigns.create(workspace.id, {
      name: 'preview',
      sequenceSteps: [
        { subject: 'Hi {{firstName|there}} at {{company}}', bodyHtml: '<p>Hello {{firstName|there}}, {{plan}} fits {{company}}.</p><p><a href="{{unsubscribeUrl}}">unsubscribe</a></p>' },
        { subject: '', bodyHtml: '<p>Following up, {{firstName}}</p>' },
      ],
    });
    const before = (await db.query('select count(*)::int as n from outbound_messages')).rows[0].n;

    const sample = await app.request('POST', `/v1/campaigns/${campaign.id}/preview`, { key: adminKey, body: {} });
    assert.equal(sample.status, 200, sample.text);
    assert.equal(sample.body.lead.source, 'sample');
    assert.equal(sample.body.subject, 'Hi Alex at Example Inc');
    assert.equal(sample.body.stepIndex, 0);
    // Every field is optional, so is the body: none previews the same as {}.
    const bare = await app.request('POST', `/v1/campaigns/${campaign.id}/preview`, { key: adminKey });
    assert.equal(bare.status, 200, bare.text);
    assert.deepEqual(bare.body, sample.body);

    await s.campaigns.enroll(workspace.id, campaign.id, [{ email: 'ann@corp.example', firstName: 'Ann', company: 'Corp & <Co>', plan: 'Pro' }, { email: 'bo@corp.example' }]);
    const first = await app.request('POST', `/v1/campaigns/${campaign.id}/preview`, { key: adminKey, body: { stepIndex: 0 } });
    assert.equal(first.body.lead.source, 'first_enrolled');
    assert.equal(first.body.lead.email, 'ann@corp.example');
    assert.equal(first.body.subject, 'Hi Ann at Corp & <Co>');
    assert.equal(first.body.html, '<p>Hello Ann, Pro fits Corp &amp; &lt;Co&gt;.</p><p><a href="https://mail.example.com/u/preview">unsubscribe</a></p>');
    assert.match(first.body.text, /Hello Ann, Pro fits Corp & <Co>\./);

    const bo = (await db.query(`select id from leads where email_key = 'bo@corp.example' and workspace_id = $1`, [workspace.id])).rows[0].id;
    const followUp = await app.request('POST', `/v1/campaigns/${campaign.id}/preview`, { key: adminKey, body: { stepIndex: 1, leadId: bo } });
    assert.equal(followUp.body.subject, 'Re: Hi there at');
    assert.equal(followUp.body.html, '<p>Following up, </p>');
    assert.deepEqual(followUp.body.lead, { source: 'lead', leadId: bo, email: 'bo@corp.example' });

    const session = await signIn(app, adminKey);
    const unsaved = await session.request('POST', `/v1/campaigns/${campaign.id}/preview`, {
      body: { subject: 'New {{title|idea}}\r\nBcc: x@evil.example', bodyHtml: '<b>{{firstName}}</b> {{title}}', lead: { email: 'z@z.example', firstName: '<script>', title: 'CTO' } },
    });
    assert.equal(unsaved.status, 200, unsaved.text);
    assert.equal(unsaved.body.subject, 'New CTO Bcc: x@evil.example');
    assert.equal(unsaved.body.html, '<b>&lt;script&gt;</b> CTO');
    assert.equal(unsaved.body.stepIndex, null);
    assert.equal(unsaved.body.lead.source, 'inline');

    const cases: Array<[unknown, number, string]> = [
      [{ stepIndex: 2 }, 400, 'invalid_request'],
      [{ subject: 'only a subject' }, 200, ''],
      [{ leadId: 'lead_nope' }, 404, 'lead_not_found'],
      [{ lead: { firstName: 'no email' } }, 422, 'validation_failed'],
      [{ leadId: bo, lead: { email: 'a@b.example' } }, 400, 'invalid_request'],
      [{ bodyHtml: '' }, 400, 'invalid_request'],
      [{ stepIndex: -1 }, 400, 'invalid_request'],
      [{ step: 0 }, 400, 'invalid_request'],
    ];
    for (const [body, status, code] of cases) {
      const res = await app.request('POST', `/v1/campaigns/${campaign.id}/preview`, { key: adminKey, body });
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      if (code) assert.equal(res.body.error.code, code);
    }
    const other = await seedWorkspace(app);
    assert.equal((await app.request('POST', `/v1/campaigns/${campaign.id}/preview`, { key: other.adminKey, body: {} })).body.error.code, 'campaign_not_found');
    const otherLead = await app.request('POST', `/v1/campaigns/${campaign.id}/preview`, { key: adminKey, body: { leadId: bo } });
    assert.equal(otherLead.status, 200);
    assert.equal((await db.query('select count(*)::int as n from outbound_messages')).rows[0].n, before);
  });

  it('searches a campaign\u2019s leads by email, name or company, with status filter, paging, last event and next send', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const s = app.services();
    const campaign = await s.campaigns.create(workspace.id, { name: 'search', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>x</p>' }] });
    await s.campaigns.enroll(workspace.id, campaign.id, [
      { email: 'ann@globex.example', firstName: 'Ann', company: 'Globex' },
      { email: 'bob@initech.example', firstName: 'Bob', lastName: 'Annan', company: 'Initech' },
      { email: 'cy@umbrella.example', firstName: 'Cy', company: 'Umbrella 100%' },
      { email: 'sisyphos@hellas.example', firstName: 'ΣΊΣΥΦΟΣ', company: 'İstanbul Kargo' },
    ]);
    const search = async (q: string, extra = '') => {
      const res = await app.request('GET', `/v1/campaigns/${campaign.id}/leads?q=${encodeURIComponent(q)}${extra}`, { key: adminKey });
      assert.equal(res.status, 200, res.text);
      return res.body;
    };
    assert.deepEqual((await search('ANN')).data.map((l: { email: string }) => l.email), ['ann@globex.example', 'bob@initech.example']);
    assert.deepEqual((await search('initech')).data.map((l: { email: string }) => l.email), ['bob@initech.example']);
    assert.deepEqual((await search('100%')).data.map((l: { email: string }) => l.email), ['cy@umbrella.example']);
    assert.equal((await search('%')).total, 1);
    assert.equal((await search('_')).total, 0);
    // Names as stored, whatever the database's locale: the term is lower-cased by PostgreSQL
    // like the names (in JavaScript, 'ΣΊΣΥΦΟΣ' became 'σίσυφος' and 'İ' two code points).
    for (const q of ['ΣΊΣΥΦΟΣ', 'İstanbul', 'ΣΊΣ']) assert.deepEqual((await search(q)).data.map((l: { email: string }) => l.email), ['sisyphos@hellas.example'], q);
    const paged = await search('a', '&limit=1&offset=1');
    assert.equal(paged.total, 4);
    assert.equal(paged.data.length, 1);
    assert.equal(paged.hasMore, true);
    assert.equal((await search('ann', '&status=completed')).total, 0);
    const row = (await search('cy')).data[0];
    for (const field of ['status', 'lastEvent', 'lastEventAt', 'nextSendAt', 'currentStep']) assert.ok(field in row, field);
    assert.equal((await app.request('GET', `/v1/campaigns/${campaign.id}/leads?q=${'x'.repeat(321)}`, { key: adminKey })).status, 400);
  });
});
