// A new operator's first hour, in a real Chromium against a real `mailgate serve` (a review of
// 2026-11-30 that walked it: a key, a sender, a pool, a two-step campaign, a CSV import, the
// start): a sender's SMTP health says what it means and what to do; Start with step edits not
// saved says so instead of "no sequence steps" (or sending the saved text); a campaign made
// before any pool shows the pool Start gave it, and saving its settings keeps it; a CSV file's
// columns fit a 390 px phone; the activity chart's totals name the span they count.
import assert from 'node:assert/strict';
import pg from 'pg';
import type { BrowserContext } from 'playwright-core';
import { seedWorkspace } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { World, UserPage, axeLog, axeSummary } from './env.ts';

describe('dashboard in Chromium: a new operator\'s first hour', function () {
  this.timeout(180_000);
  const world = new World();
  let axeFrom = 0;
  let key: string;
  let workspaceId: string;
  let ctx: BrowserContext;
  let u: UserPage;
  /** A campaign made before the workspace had a pool (senderPoolId null), with a step and a lead. */
  let early: string;

  let made = 0;
  const campaign = async (name: string, steps: { subject: string; bodyHtml: string }[]) => {
    const c = await world.app.request('POST', '/v1/campaigns', { key, body: { name, ...(steps.length ? { sequenceSteps: steps } : {}) } });
    assert.equal(c.status, 201, c.text);
    const leads = await world.app.request('POST', `/v1/campaigns/${c.body.id}/leads/bulk`, { key, body: { leads: [{ email: `ada${++made}@lead.example`, firstName: 'Ada' }] } });
    assert.equal(leads.status, 200, leads.text);
    return c.body.id as string;
  };
  const campaignNow = async (id: string) => (await world.app.request('GET', `/v1/campaigns/${id}`, { key })).body;

  before(async () => {
    axeFrom = axeLog.length;
    await world.start();
    const ws = await seedWorkspace(world.app, 'Acme');
    key = ws.adminKey;
    workspaceId = ws.workspace.id;
    early = await campaign('Made first', [{ subject: 'Hi {{firstName}}', bodyHtml: '<p>Hi</p>' }]);
    assert.equal((await campaignNow(early)).senderPoolId, null);
    const s = world.app.services();
    const accounts = [];
    for (const email of ['fresh@acme.example', 'refused@acme.example', 'down@acme.example']) {
      world.sink.users.set(email, 'pw');
      accounts.push(await s.senders.add({ workspaceId, email, name: email.split('@')[0], smtpUrl: world.sink.url(email, 'pw') }));
    }
    await s.senders.createPool(workspaceId, 'Main', 100, []);
    // Health comes from real sends (senders/health.ts); set here as a failed login and a refused
    // connection would leave it, so the page is what is tested.
    const db = new pg.Client({ connectionString: world.app.databaseUrl });
    await db.connect();
    try {
      await db.query(`update sender_accounts set health = 'auth_failed', health_error = '535 5.7.8 Authentication credentials invalid', health_retry_at = null where id = $1`, [accounts[1].id]);
      await db.query(`update sender_accounts set health = 'unreachable', health_error = 'connect ECONNREFUSED 10.0.0.9:587', health_retry_at = now() + interval '14 minutes' where id = $1`, [accounts[2].id]);
    } finally {
      await db.end();
    }
    ctx = await world.context();
    u = await world.page(ctx);
    await u.signIn(key);
  });
  afterEach(async function () {
    if (this.currentTest?.state === 'failed') await u?.dump(`first-hour ${this.currentTest.title}`);
  });
  after(async () => {
    await ctx?.close();
    await world.stop();
    console.log(`      ${axeSummary(axeFrom)}`);
  });

  it("a sender's SMTP health says what it means for its sending and what to do: the server's words, when it is tried again", async () => {
    const p = u.page;
    await u.nav('Senders');
    // The SMTP health column.
    const health = (email: string) => p.locator(`tr[data-sender="${email}"] td`).nth(2);
    await health('down@acme.example').waitFor();
    // A new account shows "unknown" beside a login it just passed: the word is explained.
    assert.equal(await health('fresh@acme.example').innerText(), 'unknown\nKnown after its next send.');
    assert.equal(
      await health('refused@acme.example').innerText(),
      'auth failed\nThe server said: 535 5.7.8 Authentication credentials invalid\nSends nothing until it can log in: press Change and give the current SMTP password (many providers need an app password).',
    );
    assert.match(await health('down@acme.example').innerText(), /^unreachable\nThe server said: connect ECONNREFUSED 10\.0\.0\.9:587\nSkipped for now: tried again in 1[34] minutes\. If it lasts, check the host, port and TLS setting \(Change\)\.$/);
    // The exact time of the retry on hover, as every relative time.
    assert.match((await health('down@acme.example').locator('time').getAttribute('title'))!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    await u.check('senders, health explained');
  });

  it('Start with step edits not saved says to save them first, and starts nothing; saved, it starts', async () => {
    const p = u.page;
    const id = await campaign('Two steps', []);
    await p.goto(`/campaigns/${id}`);
    await p.getByRole('button', { name: 'Add a step' }).click();
    await p.getByLabel('Step 1 subject').fill('Hello {{firstName}}');
    await p.getByLabel('Step 1 HTML body').fill('<p>Hi {{firstName}}</p>');
    await p.getByRole('button', { name: 'Add a step' }).click();
    await p.getByLabel('Step 2 HTML body').fill('<p>Any thoughts?</p>');
    const start = p.locator('.page-head').getByRole('button', { name: 'Start' });
    await start.click();
    // It said "the campaign has no sequence steps" with two steps on the page (and with some
    // saved, it started the saved text and locked the edits away).
    const refusal = p.getByRole('alert').filter({ hasText: /^Start: / });
    await refusal.waitFor();
    assert.equal(await refusal.innerText(), 'Start: The steps have changes that are not saved, and the campaign sends the saved ones: press Save steps (or undo the changes), then Start.');
    assert.equal((await campaignNow(id)).status, 'draft', 'nothing started');
    await u.check('campaign, start with unsaved steps');
    await p.getByRole('button', { name: 'Save steps' }).click();
    await p.getByRole('status').filter({ hasText: 'Steps saved.' }).waitFor();
    await refusal.waitFor({ state: 'detached' });
    await start.click();
    await p.locator('.page-head .pill', { hasText: 'running' }).waitFor();
    const running = await campaignNow(id);
    assert.deepEqual(running.sequenceSteps.map((s: { subject: string }) => s.subject), ['Hello {{firstName}}', '']);
  });

  it("a campaign made before any pool shows the pool Start gave it, and saving its settings keeps that pool", async () => {
    const p = u.page;
    await p.goto(`/campaigns/${early}`);
    const pool = p.getByLabel('Sender pool');
    await pool.waitFor();
    assert.equal(await pool.inputValue(), '', 'no pool yet');
    await p.locator('.page-head').getByRole('button', { name: 'Start' }).click();
    await p.locator('.page-head .pill', { hasText: 'running' }).waitFor();
    const given = (await campaignNow(early)).senderPoolId;
    assert.match(given, /^pool_/, 'Start gave it the workspace\'s pool');
    // The choice said "(none: the campaign cannot send)" while it sent, and the next save of the
    // schedule took the pool away.
    await waitFor('the choice to show the pool', async () => (await pool.inputValue()) === given);
    await p.getByLabel('Track opens').uncheck();
    await p.getByRole('button', { name: 'Save schedule and sending' }).click();
    await p.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    const saved = await campaignNow(early);
    assert.deepEqual([saved.senderPoolId, saved.trackOpens], [given, false]);
    await u.check('campaign started with the default pool');
  });

  it("a CSV file's columns fit a 390 px phone: the table scrolls in its place, the page does not", async () => {
    const p = u.page;
    await p.setViewportSize({ width: 390, height: 844 });
    try {
      const id = await campaign('On a phone', [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }]);
      await p.goto(`/campaigns/${id}`);
      const csv = ['Email,First Name,Last name,Company,Title', 'ada.lovelace@analytical-engines.example,Ada,Lovelace,Analytical Engines,Chief Technology Officer', ''].join('\r\n');
      await p.getByLabel('CSV file').setInputFiles({ name: 'leads.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
      await p.getByRole('group', { name: 'Columns of leads.csv (1 rows)' }).waitFor();
      await u.assertNoHorizontalScroll('campaign, CSV columns at 390 px');
      const button = (await p.getByRole('button', { name: 'Import 1 rows' }).boundingBox())!;
      assert.ok(button.x >= 0 && button.x + button.width <= 390, `the Import button at x ${Math.round(button.x)}..${Math.round(button.x + button.width)} of a 390 px window`);
      await u.check('campaign, CSV columns at 390 px');
    } finally {
      await p.setViewportSize({ width: 1280, height: 860 });
    }
  });

  it("the activity chart's totals name the span they count (the last 48 hours, the last 30 days), not the campaign's whole life", async () => {
    const p = u.page;
    await u.nav('Overview');
    const legend = p.locator('.legend');
    await legend.waitFor();
    assert.match(await legend.innerText(), /^In the last 48 hours:\s+sent \d+/);
    assert.match((await p.locator('.chart').getAttribute('aria-label'))!, /: \d+ sent, \d+ opened, \d+ replied, \d+ bounced in the last 48 hours$/);
    await p.getByLabel('Bucket', { exact: true }).selectOption('day');
    await waitFor('the 30 days', async () => /^In the last 30 days:/.test(await legend.innerText()));
    assert.equal(await p.getByLabel('Bucket', { exact: true }).locator('option:checked').innerText(), 'per day, last 30 days');
    await u.check('overview, chart period');
  });
});
