// `mailgate campaign remove-lead`: the CLI's side of DELETE /v1/campaigns/:campaignId/leads/:leadId,
// naming the lead by id or by address, against a real database the HTTP API shares.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { runCliCaptured } from '../support/cli.ts';
import { createTestDatabase, startTestApp, type TestApp } from '../support/harness.ts';

describe('mailgate CLI: campaign remove-lead', function () {
  this.timeout(60_000);
  const secret = randomBytes(32);
  let env: NodeJS.ProcessEnv;
  let app: TestApp;
  let key: string;
  let campaignId: string;
  let otherCampaignId: string;

  const cli = (...argv: string[]) => runCliCaptured(env, argv);
  const api = (method: string, path: string, body?: unknown) => app.request(method, path, { key, body });
  const leads = async (id = campaignId) => (await api('GET', `/v1/campaigns/${id}/leads?limit=100`)).body.data as Array<Record<string, any>>;
  const leadOf = async (email: string, id = campaignId) => (await leads(id)).find((l) => l.email === email)!;
  const stats = async () => (await api('GET', `/v1/campaigns/${campaignId}/stats`)).body;

  before(async () => {
    const db = await createTestDatabase();
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: secret.toString('hex'), LOG_LEVEL: 'warn' };
    app = await startTestApp({ database: db, secretKey: secret });
    assert.equal((await cli('workspace', 'create', '--name', 'acme', '--json')).code, 0);
    key = (await cli('key', 'create', '--workspace', 'acme', '--json')).json.key;
    const steps = [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1 }];
    campaignId = (await api('POST', '/v1/campaigns', { name: 'Main', sequenceSteps: steps })).body.id;
    otherCampaignId = (await api('POST', '/v1/campaigns', { name: 'Other', sequenceSteps: steps })).body.id;
    const enrolled = await api('POST', `/v1/campaigns/${campaignId}/leads/bulk`, {
      leads: ['Jane.Doe@Lead.example', 'bob@lead.example', 'carol@lead.example', 'dan@lead.example', 'erin@lead.example'].map((email) => ({ email })),
    });
    assert.equal(enrolled.status, 200, enrolled.text);
    await api('POST', `/v1/campaigns/${otherCampaignId}/leads/bulk`, { leads: [{ email: 'Jane.Doe@Lead.example' }, { email: 'olga@lead.example' }] });
    // Running: every lead's step 0 is queued (no pool: it waits, and start still succeeds).
    assert.equal((await api('POST', `/v1/campaigns/${campaignId}/start`)).status, 200);
    assert.equal((await stats()).queued, 5);
  });
  after(async () => {
    await app.close();
  });

  it('by address (any case): the enrollment ends `removed`, its queued step is cancelled, and --json prints the row as the API lists it', async () => {
    const r = await cli('campaign', 'remove-lead', campaignId, 'JANE.DOE@lead.EXAMPLE', '--json');
    assert.equal(r.code, 0, r.err);
    assert.equal(r.err, '');
    assert.equal(r.json.status, 'removed');
    assert.equal(r.json.lastEvent, 'removed');
    assert.equal(r.json.email, 'Jane.Doe@Lead.example');
    assert.deepEqual(r.json, await leadOf('Jane.Doe@Lead.example'), 'the same object GET /v1/campaigns/:id/leads shows');
    assert.equal((await stats()).queued, 4, 'her queued step 0 is cancelled');
    // Only this campaign: her enrollment in the other one goes on.
    assert.equal((await leadOf('Jane.Doe@Lead.example', otherCampaignId)).status, 'active');
  });

  it('by lead id, and without --json one line saying what happened', async () => {
    const bob = await leadOf('bob@lead.example');
    const r = await cli('campaign', 'remove-lead', campaignId, bob.id);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, `removed bob@lead.example (${bob.id}) from campaign ${campaignId}: it gets nothing more from it\n`);
    assert.equal((await leadOf('bob@lead.example')).status, 'removed');
    assert.equal((await stats()).queued, 3);
  });

  it('again, or on an enrollment that has ended otherwise: left as it is, exit 0, the row says its status', async () => {
    const again = await cli('campaign', 'remove-lead', campaignId, 'bob@lead.example', '--json');
    assert.equal(again.code, 0, again.err);
    assert.equal(again.json.status, 'removed');
    // Carol unsubscribes through her message's one-click link (POST /u/<token>, RFC 8058).
    const carol = await leadOf('carol@lead.example');
    const client = new pg.Client({ connectionString: app.databaseUrl });
    await client.connect();
    const [msg] = (await client.query<{ id: string }>(`select id from outbound_messages where lead_id = $1 and campaign_id = $2`, [carol.id, campaignId])).rows;
    await client.end();
    const unsub = await fetch(`${app.url}/u/${app.deps.crypto.sign(`u.${msg.id}`)}`, { method: 'POST', body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(unsub.status, 200, await unsub.text());
    const carolBefore = await leadOf('carol@lead.example');
    assert.equal(carolBefore.status, 'unsubscribed');
    const ended = await cli('campaign', 'remove-lead', campaignId, 'carol@lead.example');
    assert.equal(ended.code, 0, ended.err);
    assert.equal(ended.out, `carol@lead.example (${carolBefore.id}) had already left campaign ${campaignId} (${carolBefore.status}): left as it is\n`);
    assert.deepEqual(await leadOf('carol@lead.example'), carolBefore);
  });

  it('errors: one line on stderr, nothing on stdout, nothing changed; exit 1 for what is not there, 2 for what is not a lead', async () => {
    const before = await leads();
    const otherBefore = await leads(otherCampaignId);
    const olga = await leadOf('olga@lead.example', otherCampaignId);
    const cases: [string[], number, RegExp][] = [
      [['cmp_missing', 'dan@lead.example'], 1, /^error: campaign cmp_missing not found\n$/],
      [[campaignId, 'nobody@lead.example'], 1, new RegExp(`^error: no lead with the address nobody@lead.example is enrolled in campaign ${campaignId}\\n$`)],
      // Enrolled in the workspace's other campaign, not in this one.
      [[campaignId, 'olga@lead.example'], 1, /no lead with the address olga@lead.example is enrolled/],
      [[campaignId, olga.id], 1, new RegExp(`^error: lead ${olga.id} is not enrolled in campaign ${campaignId}\\n$`)],
      [[campaignId, 'lead_nope'], 1, /lead lead_nope is not enrolled/],
      [[campaignId, 'dan'], 2, /^error: the lead: "dan" is neither a lead id \(lead_\.\.\.\) nor an email address\n$/],
      [[campaignId, 'dan@'], 2, /"dan@" is neither/],
      [[campaignId], 2, /missing required argument 'lead'/],
    ];
    for (const [args, code, pattern] of cases) {
      const r = await cli('campaign', 'remove-lead', ...args, '--json');
      assert.equal(r.code, code, `${args.join(' ')}: ${r.err}`);
      assert.equal(r.out, '', args.join(' '));
      assert.match(r.err, pattern);
    }
    assert.deepEqual(await leads(), before);
    assert.deepEqual(await leads(otherCampaignId), otherBefore);
  });

  it('another workspace\'s campaign is found by its id, as the other commands find ids', async () => {
    assert.equal((await cli('workspace', 'create', '--name', 'beta', '--json')).code, 0);
    const betaKey = (await cli('key', 'create', '--workspace', 'beta', '--json')).json.key;
    const beta = (await app.request('POST', '/v1/campaigns', { key: betaKey, body: { name: 'Beta' } })).body.id;
    await app.request('POST', `/v1/campaigns/${beta}/leads/bulk`, { key: betaKey, body: { leads: [{ email: 'dan@lead.example' }] } });
    const r = await cli('campaign', 'remove-lead', beta, 'dan@lead.example', '--json');
    assert.equal(r.code, 0, r.err);
    assert.equal(r.json.status, 'removed');
    // The same address in the first workspace's campaign is untouched.
    assert.equal((await leadOf('dan@lead.example')).status, 'active');
  });
});
