// The admin's flows in a real Chromium against a real `mailgate serve`: sign in, add a sender
// (probe fails, then passes), create a pool and a campaign, write a step with its preview,
// import a CSV, start the campaign and watch the stats change as the sink receives the mail,
// create a key and see it once, remove a suppressed address, retry a failed webhook delivery.
// Every page is checked with axe-core, for console errors and for CSP violations.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { BrowserContext } from 'playwright-core';
import { seedWorkspace } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { World, UserPage, axeLog, axeSummary } from './env.ts';

describe('dashboard in Chromium: the admin', function () {
  this.timeout(180_000);
  const world = new World();
  let axeFrom = 0;
  let ctx: BrowserContext;
  let u: UserPage;
  let key: string;
  let workspaceId: string;
  const SENDER = 'outreach@acme.example';

  before(async () => {
    axeFrom = axeLog.length;
    await world.start();
    const ws = await seedWorkspace(world.app, 'Acme');
    key = ws.adminKey;
    workspaceId = ws.workspace.id;
    world.sink.users.set(SENDER, 'smtp-pw');
    world.imap.addUser(SENDER, 'imap-pw');
    ctx = await world.context();
    u = await world.page(ctx);
  });
  afterEach(async function () {
    if (this.currentTest?.state === 'failed') await u?.dump(`admin ${this.currentTest.title}`);
  });
  after(async () => {
    await ctx?.close();
    await world.stop();
    console.log(`      ${axeSummary(axeFrom)}`);
  });

  it('serves the dashboard with its security headers, and a wrong key is refused in plain words', async () => {
    const res = await fetch(world.daemon.url + '/');
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline/);
    const html = await res.text();
    assert.doesNotMatch(html, /<script>|<script(?![^>]*\bsrc=)[^>]*>|<style|style="/, 'no inline script or style in index.html');

    await u.page.goto('/');
    await u.page.getByRole('heading', { name: 'Sign in to mailgate' }).waitFor();
    await u.check('sign-in');
    await u.screenshot('sign-in.png');
    await u.page.getByLabel('API key').fill('mgk_not_a_real_key');
    await u.page.getByRole('button', { name: 'Sign in' }).click();
    await u.page.getByRole('alert').filter({ hasText: /key/i }).waitFor();
    await u.check('sign-in, refused');
  });

  it('signs in with an admin key: the overview of a new workspace teaches the first steps', async () => {
    await u.signIn(key);
    await u.page.getByRole('heading', { name: 'No campaigns yet' }).waitFor();
    assert.match(await u.page.locator('.top').innerText(), /Acme/);
    // The session is an HttpOnly cookie: the page's script cannot read it.
    assert.equal(await u.page.evaluate(() => document.cookie), '');
    const cookie = (await ctx.cookies()).find((c) => c.name === 'mailgate_session');
    assert.ok(cookie?.httpOnly);
    assert.equal(cookie?.sameSite, 'Strict');
    await u.check('overview, empty');
  });

  it('adds a sender account: the probe fails with the server\'s words, then passes and the account is saved', async () => {
    const p = u.page;
    await u.nav('Senders');
    await p.getByRole('button', { name: 'Add a sender account' }).click();
    await p.getByLabel('From address').fill(SENDER);
    await p.getByLabel('Display name').fill('Acme Outreach');
    await p.getByLabel('Daily limit').fill('500');
    await p.getByLabel('SMTP host').fill('127.0.0.1');
    await p.getByLabel('SMTP port').fill(String(world.sink.port));
    await p.getByLabel('SMTP user').fill(SENDER);
    await p.getByLabel('SMTP password').fill('wrong-password');
    await p.getByRole('button', { name: 'Test connection' }).click();
    const refused = p.getByRole('alert').filter({ hasText: 'The SMTP server refused the login' });
    await refused.waitFor();
    assert.match(await refused.innerText(), /535|Invalid username or password/);
    await u.check('senders, probe failed');

    await p.getByLabel('SMTP password').fill('smtp-pw');
    await p.getByText('IMAP (replies and bounces are read from here)').click();
    await p.getByLabel('IMAP host').fill('127.0.0.1');
    await p.getByLabel('IMAP port').fill(String(world.imap.port));
    await p.getByLabel('IMAP: implicit TLS').uncheck();
    await p.getByLabel('IMAP user').fill(SENDER);
    await p.getByLabel('IMAP password').fill('imap-pw');
    await p.getByRole('button', { name: 'Test connection' }).click();
    await p.getByRole('status').filter({ hasText: 'SMTP login works. IMAP login works.' }).waitFor();
    await p.getByRole('button', { name: 'Test and save' }).click();
    const row = p.locator(`tr[data-sender="${SENDER}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /active/);
    assert.match(await row.innerText(), /0 \/ 500/);
    const saved = (await world.app.request('GET', '/v1/sender-accounts', { key })).body;
    assert.deepEqual(saved.map((s: { email: string }) => s.email), [SENDER]);
    await u.check('senders');
  });

  it('creates a pool with the sender in it', async () => {
    const p = u.page;
    await p.getByLabel('New pool name').fill('Main pool');
    await p.getByLabel('Daily capacity').fill('1000');
    await p.getByRole('button', { name: 'Create pool' }).click();
    const pool = p.locator('tr[data-pool="Main pool"]');
    await pool.waitFor();
    await pool.getByRole('button', { name: 'Add to Main pool' }).click();
    await waitFor('the sender to be a member', async () => (await pool.innerText()).includes(SENDER));
    await u.check('senders with a pool');
    await u.screenshot('senders.png');
  });

  it('registers a webhook (the secret shown once) whose first deliveries fail', async () => {
    world.receiver.respond = () => 503;
    const p = u.page;
    await u.nav('Webhooks');
    await p.getByLabel('HTTPS URL').fill(world.receiver.url('/hook'));
    await p.getByLabel('message.sent').check();
    await p.getByRole('button', { name: 'Register' }).click();
    const secret = await p.getByTestId('secret-value').innerText();
    assert.match(secret, /\S{16,}/);
    firstSecret = secret;
    await p.getByRole('button', { name: 'Copy' }).click();
    await p.getByText('Copied to the clipboard.').waitFor();
    assert.equal(await p.evaluate(() => navigator.clipboard.readText()), secret);
    await u.check('webhooks, secret shown once');
    await p.getByRole('button', { name: 'Done' }).click();
    assert.equal(await p.getByTestId('secret-value').count(), 0);
  });

  let campaignId = '';
  let firstSecret = '';

  it('creates a campaign, writes a step with a live preview, imports a CSV (one invalid row, downloadable) and starts it', async () => {
    const p = u.page;
    await u.nav('Overview');
    await p.getByRole('button', { name: 'Create the first campaign' }).click();
    await p.getByLabel('Name').fill('Q4 outreach');
    await p.getByLabel('Sender pool').selectOption({ label: 'Main pool' });
    await p.getByRole('button', { name: 'Create draft' }).click();
    await p.getByRole('heading', { name: 'Q4 outreach', level: 1 }).waitFor();
    campaignId = p.url().split('/campaigns/')[1];
    assert.match(campaignId, /^cmp_/);

    await p.getByRole('button', { name: 'Add a step' }).click();
    await p.getByLabel('Step 1 subject').fill('Hello {{firstName}}');
    await p.getByLabel('Step 1 HTML body').fill('<p>Hi {{firstName}}, a quick idea for {{company}}.</p>');
    // The preview is the server's renderer with a sample lead's tokens, in a sandboxed frame.
    await waitFor('the preview subject', async () => /^Hello \S+/.test(await p.getByTestId('preview-subject').innerText()) && !(await p.getByTestId('preview-subject').innerText()).includes('{{'));
    const frame = p.frameLocator('iframe[title="Rendered HTML body"]');
    await frame.getByText(/a quick idea for/).waitFor();
    assert.equal(await p.locator('iframe[title="Rendered HTML body"]').getAttribute('sandbox'), '');
    await p.getByRole('button', { name: 'Save steps' }).click();
    await p.getByRole('status').filter({ hasText: 'Steps saved.' }).waitFor();
    await u.check('campaign, step and preview');

    const csv = ['Email,First Name,Company,Plan', 'ada@lead.example,Ada,Analytical Engines,gold', 'not-an-address,Bob,Nowhere,silver', '"grace@lead.example","Grace","Navy, US",gold', ''].join('\r\n');
    await p.getByLabel('CSV file').setInputFiles({ name: 'leads.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await p.getByRole('group', { name: /Columns of leads.csv/ }).waitFor();
    assert.equal(await p.getByLabel('Column Plan becomes').inputValue(), 'custom:Plan');
    await p.getByRole('button', { name: 'Import 3 rows' }).click();
    const summary = p.getByTestId('import-summary');
    await summary.waitFor();
    assert.equal(await summary.innerText(), 'Import finished: 2 enrolled, 0 updated, 1 invalid.');
    const [download] = await Promise.all([p.waitForEvent('download'), p.getByRole('link', { name: 'Download the 1 invalid rows' }).click()]);
    const invalid = readFileSync((await download.path())!, 'utf8');
    assert.match(invalid, /^Email,First Name,Company,Plan,line,error\r\nnot-an-address,Bob,Nowhere,silver,3,/);
    await p.locator('#leads tbody tr').nth(1).waitFor();
    assert.equal(await p.locator('#leads tbody tr').count(), 2);
    await u.check('campaign, imported');
    await u.screenshot('campaign.png');

    // Search the leads table (server side).
    await p.getByLabel('Search leads').fill('grace');
    await p.getByRole('button', { name: 'Search', exact: true }).click();
    await waitFor('one matching lead', async () => (await p.locator('#leads tbody tr').count()) === 1);
    assert.match(await p.locator('#leads tbody tr').innerText(), /grace@lead.example/);

    await p.getByRole('button', { name: 'Start' }).click();
    await p.locator('.page-head .pill', { hasText: 'running' }).waitFor();
  });

  it('shows the campaign\'s stats change as the sink receives the mail, without a reload', async () => {
    const p = u.page;
    await u.nav('Overview');
    const sent = p.locator(`tr[data-campaign="${campaignId}"] td[data-stat="sent"]`);
    await sent.waitFor();
    await waitFor('the sink to receive both messages', async () => world.sink.received.length >= 2, 60_000);
    assert.deepEqual(world.sink.received.map((r) => r.to[0]).sort(), ['ada@lead.example', 'grace@lead.example']);
    const navigations: string[] = [];
    p.on('framenavigated', (f) => f === p.mainFrame() && navigations.push(f.url()));
    await waitFor('the overview to show 2 sent', async () => (await sent.innerText()) === '2', 30_000);
    assert.deepEqual(navigations, [], 'the stats changed in place');
    assert.equal(await p.locator(`tr[data-campaign="${campaignId}"] td[data-stat="delivered"]`).innerText(), '2');
    await p.locator('.chart canvas').first().waitFor();
    // The time chart (GET /v1/campaigns/{id}/timeline) counts the same two sends.
    await waitFor('the chart to count 2 sent', async () => /sent 2\b/.test(await p.locator('.legend').innerText()), 30_000);
    await u.check('overview with a running campaign');
    await u.screenshot('overview.png');
  });

  it('pauses and resumes the campaign from its page, and pauses and resumes the sender', async () => {
    const p = u.page;
    await p.getByRole('link', { name: 'Q4 outreach' }).click();
    await p.getByRole('heading', { name: 'Q4 outreach', level: 1 }).waitFor();
    await p.locator('[data-stat="sent"] .n', { hasText: '2' }).waitFor();
    await p.getByRole('button', { name: 'Pause' }).click();
    await p.locator('.page-head .pill', { hasText: 'paused' }).waitFor();
    assert.equal((await world.app.request('GET', `/v1/campaigns/${campaignId}`, { key })).body.status, 'paused');
    await u.check('campaign, paused');
    await p.getByRole('button', { name: 'Resume' }).click();
    await p.locator('.page-head .pill', { hasText: 'running' }).waitFor();
    assert.equal((await world.app.request('GET', `/v1/campaigns/${campaignId}`, { key })).body.status, 'running');

    await u.nav('Senders');
    const row = p.locator(`tr[data-sender="${SENDER}"]`);
    await row.getByRole('button', { name: `Pause ${SENDER}` }).click();
    await row.locator('.pill', { hasText: /^paused$/ }).waitFor();
    assert.equal((await world.app.request('GET', '/v1/sender-accounts', { key })).body[0].status, 'paused');
    await row.getByRole('button', { name: `Resume ${SENDER}` }).click();
    await row.locator('.pill', { hasText: /^active$/ }).waitFor();
    assert.match(await row.innerText(), /2 \/ 500/, 'the rolling 24-hour usage counts the two sends');
  });

  it('retries a failed webhook delivery from its log: the new attempt is delivered', async () => {
    const p = u.page;
    await waitFor('two failed attempts', async () => world.receiver.received.length >= 2, 30_000);
    world.receiver.respond = () => 200;
    await u.nav('Webhooks');
    await p.getByRole('link', { name: world.receiver.url('/hook') }).click();
    const delivery = p.locator('article[data-delivery]').first();
    await delivery.waitFor();
    assert.match(await delivery.innerText(), /HTTP 503/);
    await u.check('webhook deliveries');
    await u.screenshot('webhook-deliveries.png');
    const id = (await delivery.getAttribute('data-delivery'))!;
    await delivery.getByRole('button', { name: /^Retry now/ }).click();
    // The log refreshes itself (every 10 s): no reload.
    const retried = p.locator(`article[data-delivery="${id}"]`);
    await retried.locator('.pill', { hasText: /^delivered$/ }).waitFor({ timeout: 30_000 });
    assert.match(await retried.innerText(), /HTTP 200/);

    // Edit the events; rotate the secret (asked first, the new one shown once).
    await p.getByLabel('campaign.started').check();
    await p.getByRole('button', { name: 'Save events' }).click();
    await waitFor('the events saved', async () => (await world.app.request('GET', '/v1/webhooks', { key })).body.data[0].events.includes('campaign.started'));
    await p.getByRole('button', { name: 'Rotate secret' }).click();
    await p.getByRole('dialog', { name: /Rotate the signing secret/ }).getByRole('button', { name: 'Rotate the secret' }).click();
    const rotated = await p.getByTestId('secret-value').innerText();
    assert.match(rotated, /\S{16,}/);
    assert.notEqual(rotated, firstSecret);
    await u.check('webhook, secret rotated');

    // Disabled, its pending delivery is held and says how to release it; enabled, it is due again.
    const pending = p.locator('article[data-delivery]', { has: p.locator('.pill', { hasText: /^pending$/ }) }).first();
    await pending.waitFor();
    await p.getByRole('button', { name: 'Disable' }).click();
    await pending.getByText(/held while the webhook is disabled: enable it to send/).waitFor();
    await u.check('webhook disabled, delivery held');
    await p.getByRole('button', { name: 'Enable' }).click();
    await pending.getByText(/held while the webhook is disabled/).waitFor({ state: 'detached' });
    assert.equal((await world.app.request('GET', '/v1/webhooks', { key })).body.data[0].status, 'active');
  });

  it('creates an API key and shows it once; the key works; revoking it asks first', async () => {
    const p = u.page;
    await u.nav('API keys');
    await p.getByLabel('Name').fill('CRM sync');
    await p.getByRole('button', { name: 'Create key' }).click();
    const shown = await p.getByTestId('secret-value').innerText();
    assert.match(shown, /^mgk_/);
    assert.match(await p.getByRole('region', { name: /New API key/ }).innerText(), /will not show it again/);
    await u.check('API keys, new key shown');
    assert.equal((await world.app.request('GET', '/v1/campaigns', { key: shown })).status, 200);
    await p.reload();
    await p.getByRole('heading', { name: 'Keys', exact: true }).waitFor();
    assert.ok(!(await p.content()).includes(shown), 'the key is not shown again');
    const row = p.locator('tr', { hasText: 'CRM sync' });
    assert.match(await row.innerText(), /active/);
    await u.screenshot('api-keys.png');
    await row.getByRole('button', { name: 'Revoke CRM sync' }).click();
    const dialog = p.getByRole('dialog', { name: /Revoke the key "CRM sync"/ });
    await dialog.waitFor();
    await u.check('API keys, revoke confirmation');
    await dialog.getByRole('button', { name: 'Revoke the key' }).click();
    await row.locator('.pill', { hasText: 'revoked' }).waitFor();
    assert.equal((await world.app.request('GET', '/v1/campaigns', { key: shown })).status, 401);
  });

  it('removes a suppressed address (dashboard only), after searching for it', async () => {
    await world.app.request('POST', '/v1/suppression-list', { key, body: { emails: ['gone@lead.example', 'keep@lead.example'] } });
    const p = u.page;
    await u.nav('Suppression');
    await p.getByLabel('Search addresses').fill('gone');
    await p.getByRole('button', { name: 'Search', exact: true }).click();
    await waitFor('one match', async () => (await p.locator('tbody tr').count()) === 1 && (await p.locator('tbody tr').innerText()).includes('gone@lead.example'));
    await u.check('suppression list');
    await u.screenshot('suppression.png');
    await p.getByRole('button', { name: 'Remove gone@lead.example' }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await p.getByText('gone@lead.example was removed from the suppression list.').waitFor();
    const left = (await world.app.request('GET', '/v1/suppression-list', { key })).body.data.map((s: { email: string }) => s.email);
    assert.deepEqual(left, ['keep@lead.example']);
  });

  it('follows the dark colour scheme and still passes axe', async () => {
    const dark = await world.context({ colorScheme: 'dark' });
    try {
      const d = await world.page(dark);
      await d.signIn(key);
      await d.page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
      const bg = await d.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      assert.equal(bg, 'rgb(13, 17, 23)');
      await d.check('overview, dark');
      await d.screenshot('overview-dark.png');
    } finally {
      await dark.close();
    }
  });

  it('signs out: the session cookie no longer opens the API', async () => {
    const p = u.page;
    await p.getByRole('button', { name: 'Sign out' }).click();
    await p.getByRole('heading', { name: 'Sign in to mailgate' }).waitFor();
    const status = await p.evaluate(async () => (await fetch('/v1/campaigns')).status);
    assert.equal(status, 401);
    u.assertClean('after sign-out');
    assert.ok(workspaceId);
  });
});
