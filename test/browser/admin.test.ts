// The admin's flows in a real Chromium against a real `mailgate serve`: sign in, add a sender
// (probe fails, then passes), create a pool and a campaign, write a step with its preview,
// import a CSV, start the campaign and watch the stats change as the sink receives the mail,
// create a key and see it once, remove a suppressed address, retry a failed webhook delivery.
// Along the way: validation errors once and on their fields, keyboard focus kept through
// actions, #hash links, no sideways scrolling at 390 px, and the sign-in page after a session ended.
// Every page is checked with axe-core, for console errors and for CSP violations.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { seedWorkspace } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { World, UserPage, activeElement, axeLog, axeSummary } from './env.ts';

describe('dashboard in Chromium: the admin', function () {
  this.timeout(180_000);
  const world = new World();
  let axeFrom = 0;
  let ctx: BrowserContext;
  let u: UserPage;
  let key: string;
  let keyId: string;
  let workspaceId: string;
  const SENDER = 'outreach@acme.example';

  before(async () => {
    axeFrom = axeLog.length;
    await world.start();
    const ws = await seedWorkspace(world.app, 'Acme');
    key = ws.adminKey;
    keyId = ws.adminKeyId;
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
    // The address is in the add-a-member choice from the start: wait for the members cell instead.
    await waitFor('the sender to be a member', async () => (await pool.locator('td').nth(2).innerText()).includes(SENDER));
    await u.check('senders with a pool');
    await u.screenshot('senders.png');
  });

  it("changes an account's limits and, after a password rotated at the provider, its SMTP settings: a wrong password is refused with the server's words and nothing is saved", async () => {
    const p = u.page;
    const row = p.locator(`tr[data-sender="${SENDER}"]`);
    await p.getByRole('button', { name: `Change ${SENDER}` }).click();
    await p.getByRole('heading', { name: `Change ${SENDER}` }).waitFor();
    assert.equal(await p.getByLabel('Daily limit', { exact: true }).inputValue(), '500');
    await p.getByLabel('Daily limit', { exact: true }).fill('400');
    await p.getByLabel('Minimum interval (s)').fill('30');
    await p.getByText('New SMTP settings (a changed password)').click();
    await p.getByLabel('SMTP host').fill('127.0.0.1');
    await p.getByLabel('SMTP port').fill(String(world.sink.port));
    await p.getByLabel('SMTP user').fill(SENDER);
    await p.getByLabel('SMTP password').fill('wrong-password');
    await p.getByRole('button', { name: 'Save' }).click();
    const refused = p.getByRole('alert').filter({ hasText: 'The SMTP server refused the login' });
    await refused.waitFor();
    const [before] = (await world.app.request('GET', '/v1/sender-accounts', { key })).body;
    assert.deepEqual([before.dailyLimit, before.minIntervalSeconds], [500, 0], 'a refused probe saves nothing');
    await u.check('senders, change refused');

    await p.getByLabel('SMTP password').fill('smtp-pw');
    await p.getByRole('button', { name: 'Save' }).click();
    await p.getByRole('heading', { name: `Change ${SENDER}` }).waitFor({ state: 'detached' });
    await row.getByText('at most one every 30 s').waitFor();
    assert.match(await row.innerText(), /0 \/ 400/);
    const [after] = (await world.app.request('GET', '/v1/sender-accounts', { key })).body;
    assert.deepEqual([after.dailyLimit, after.minIntervalSeconds, after.health], [400, 30, 'unknown']);
    await waitFor('the focus back on Change', async () => (await p.evaluate(() => document.activeElement?.getAttribute('aria-label'))) === `Change ${SENDER}`);
    await u.check('senders, account changed');
    // The campaign below sends two messages at once: back to the limits it expects.
    assert.equal((await world.app.request('PATCH', `/v1/sender-accounts/${after.id}`, { key, body: { dailyLimit: 500, minIntervalSeconds: 0 } })).status, 200);
    await p.reload();
    await row.getByText('0 / 500').waitFor();
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
    // The page loads its campaign first: its heading still takes the focus when it appears.
    await waitFor('the focus on the campaign\'s heading', async () => (await activeElement(p)).id === 'page-title');

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

    // Starting without leads fails below the header: the header and the button keep their place and size.
    const title = p.getByRole('heading', { name: 'Q4 outreach', level: 1 });
    const start = p.locator('.page-head').getByRole('button', { name: 'Start' });
    await start.scrollIntoViewIfNeeded();
    const [titleBox, startBox] = [await title.boundingBox(), await start.boundingBox()];
    await start.click();
    const noLeads = p.getByRole('alert').filter({ hasText: 'the campaign has no enrolled leads' });
    await noLeads.waitFor();
    assert.equal(await noLeads.innerText(), 'Start: the campaign has no enrolled leads');
    assert.deepEqual(await title.boundingBox(), titleBox, 'the heading did not move');
    assert.deepEqual(await start.boundingBox(), startBox, 'the button kept its size');
    assert.equal(await p.locator('.page-head').getByRole('alert').count(), 0, 'the error is not inside the header');
    await u.check('campaign, start refused');

    // A follow-up step without a body: the problem once, in the form's words, marked on its field.
    await p.getByRole('button', { name: 'Add a step' }).click();
    await p.getByRole('button', { name: 'Save steps' }).click();
    const stepError = p.getByRole('alert').filter({ hasText: 'Save steps:' });
    await stepError.waitFor();
    const stepWords = await stepError.innerText();
    assert.match(stepWords, /Step 2 HTML body: must not be empty/);
    assert.doesNotMatch(stepWords, /sequenceSteps|listed in errors/);
    assert.equal(stepWords.split('must not be empty').length - 1, 1, `each problem once: ${stepWords}`);
    const body2 = p.getByLabel('Step 2 HTML body');
    assert.equal(await body2.getAttribute('aria-invalid'), 'true');
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute('aria-invalid')), 'true', 'the focus goes to the field to fix');
    const describedBy = (await body2.getAttribute('aria-describedby'))!.split(' ');
    assert.ok((await Promise.all(describedBy.map((id) => p.locator(`[id="${id}"]`).innerText()))).some((t) => t === 'must not be empty'));
    await u.check('campaign, step refused');
    // Its subject may stay empty (sent as "Re: " the previous subject), and it still previews.
    await body2.fill('<p>Any thoughts, {{firstName}}?</p>');
    assert.equal(await body2.getAttribute('aria-invalid'), null);
    await waitFor('the follow-up preview', async () => /^Re: Hello \S+$/.test(await p.getByTestId('preview-subject').innerText()));
    await p.frameLocator('iframe[title="Rendered HTML body"]').getByText(/Any thoughts/).waitFor();
    await p.getByRole('button', { name: 'Save steps' }).click();
    await p.getByRole('status').filter({ hasText: 'Steps saved.' }).waitFor();
    assert.equal(await stepError.count(), 0, 'the error went with its cause');

    // A schedule's bad time zone: once, named as the form names it, on the field.
    await p.getByLabel('Send only inside a window').check();
    await p.getByLabel('Time zone').fill('Mars/Olympus_Mons');
    await p.getByRole('button', { name: 'Save schedule and sending' }).click();
    const tzError = p.getByRole('alert').filter({ hasText: 'Save schedule and sending:' });
    await tzError.waitFor();
    const tzWords = await tzError.innerText();
    assert.match(tzWords, /Time zone: must be an IANA time zone name/);
    assert.doesNotMatch(tzWords, /schedule\.timezone/);
    assert.equal(tzWords.split('must be an IANA').length - 1, 1, `each problem once: ${tzWords}`);
    assert.equal(await p.getByLabel('Time zone').getAttribute('aria-invalid'), 'true');
    await u.check('campaign, schedule refused');
    await p.getByLabel('Send only inside a window').uncheck();
    await tzError.waitFor({ state: 'detached' });

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
    assert.match(invalid, /^\ufeffEmail,First Name,Company,Plan,row,error\r\nnot-an-address,Bob,Nowhere,silver,3,/);
    await p.locator('#leads tbody tr').nth(1).waitFor();
    assert.equal(await p.locator('#leads tbody tr').count(), 2);
    // The leads are there now: the Start error's cause is gone, and so is the error.
    await noLeads.waitFor({ state: 'detached' });
    await u.check('campaign, imported');
    await u.screenshot('campaign.png', { top: true });

    // Search the leads table (server side).
    await p.getByLabel('Search leads').fill('grace');
    await p.getByRole('button', { name: 'Search', exact: true }).click();
    await waitFor('one matching lead', async () => (await p.locator('#leads tbody tr').count()) === 1);
    assert.match(await p.locator('#leads tbody tr').innerText(), /grace@lead.example/);

    const leadRow = p.locator('#leads tbody tr');
    // The last event and next send columns (the row ends with its Remove button).
    assert.deepEqual(await leadRow.locator('td').evaluateAll((tds) => tds.slice(5, 7).map((td) => td.textContent)), ['—', '—'], 'nothing sent or queued yet');
    await p.getByRole('button', { name: 'Start' }).click();
    await p.locator('.page-head .pill', { hasText: 'running' }).waitFor();
    // The leads table shows the start (queued or sent) at once, not at its next poll (20 s).
    await waitFor('the lead queued or sent', async () => (await leadRow.locator('td').evaluateAll((tds) => tds.slice(5, 7).map((td) => td.textContent))).some((t) => t !== '—'), 8_000);
    // The same button, now Pause, still has the focus.
    assert.equal((await activeElement(p)).text, 'Pause');
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
    // The bounced column counts messages, says so, and opens the leads with a bounced message.
    assert.equal(await p.getByRole('columnheader', { name: 'bounced messages' }).count(), 1);
    assert.equal(await p.locator(`tr[data-campaign="${campaignId}"] td[data-stat="bounced"] a`).getAttribute('href'), `/campaigns/${campaignId}?bounced=true`);
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
    await waitFor('the focus on the campaign\'s heading', async () => (await activeElement(p)).id === 'page-title');
    await p.locator('[data-stat="sent"] .n', { hasText: '2' }).waitFor();
    await p.getByRole('button', { name: 'Pause' }).click();
    await p.locator('.page-head .pill', { hasText: 'paused' }).waitFor();
    assert.equal((await world.app.request('GET', `/v1/campaigns/${campaignId}`, { key })).body.status, 'paused');
    // The keyboard focus stays on the button, which now says Resume.
    assert.equal((await activeElement(p)).text, 'Resume');
    await u.check('campaign, paused');
    await p.keyboard.press('Enter');
    await p.locator('.page-head .pill', { hasText: 'running' }).waitFor();
    assert.equal((await world.app.request('GET', `/v1/campaigns/${campaignId}`, { key })).body.status, 'running');
    assert.equal((await activeElement(p)).text, 'Pause');

    // "delivered 2" style numbers with #leads scroll to the rows they count.
    assert.ok((await p.locator('#leads').boundingBox())!.y > 860, 'the leads start below the fold');
    // The stats' bounced counts messages (contract §4), and the tile says so; it opens the leads
    // with a bounced message, whatever their state now, and the list says a lead is one row.
    assert.equal(await p.locator('[data-stat="bounced"] .l').innerText(), 'bounced messages');
    await p.locator('[data-stat="bounced"] a').click();
    await waitFor('the page scrolled to the leads', async () => {
      const box = (await p.locator('#leads').boundingBox())!;
      return box.y > -1 && box.y + box.height <= 860 && (await p.evaluate(() => window.scrollY)) > 0;
    });
    assert.ok(await p.getByLabel('A message bounced').isChecked());
    assert.equal(await p.getByLabel('State').inputValue(), '', 'any state: a bounce after an unsubscribe or a reply leaves that state');
    assert.match(await p.getByTestId('bounced-note').innerText(), /a lead two of whose messages bounced is one row/);
    assert.match(new URL(p.url()).search, /^\?bounced=true$/);

    await u.nav('Senders');
    const row = p.locator(`tr[data-sender="${SENDER}"]`);
    await row.getByRole('button', { name: `Pause ${SENDER}` }).click();
    await row.locator('.pill', { hasText: /^paused$/ }).waitFor();
    assert.equal((await world.app.request('GET', '/v1/sender-accounts', { key })).body[0].status, 'paused');
    assert.equal((await activeElement(p)).label, `Resume ${SENDER}`, 'the focus stays on the button, now Resume');
    await p.keyboard.press('Enter');
    await row.locator('.pill', { hasText: /^active$/ }).waitFor();
    assert.equal((await activeElement(p)).label, `Pause ${SENDER}`);
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
    // The Revoke button is gone: the focus is on what happened, not on <body>.
    await waitFor('the focus on the result', async () => /The key "CRM sync" was revoked/.test((await activeElement(p)).text));
    assert.equal((await world.app.request('GET', '/v1/campaigns', { key: shown })).status, 401);
  });

  it('removes a suppressed address (dashboard only), after searching for it; a bad address is named', async () => {
    await world.app.request('POST', '/v1/suppression-list', { key, body: { emails: ['gone@lead.example', 'keep@lead.example'] } });
    const p = u.page;
    await u.nav('Suppression');
    await p.getByLabel('Addresses (one per line, or separated by commas)').fill('fine@lead.example\nnot-an-address@');
    await p.getByRole('button', { name: 'Suppress' }).click();
    const refused = p.getByRole('alert');
    await refused.waitFor();
    const words = await refused.innerText();
    assert.match(words, /^"not-an-address@": not a valid email address\. Nothing was added: fix the address and add again\.$/);
    assert.doesNotMatch(words, /row \d/);
    await u.check('suppression, address refused');
    await p.getByLabel('Search addresses').fill('gone');
    await p.getByRole('button', { name: 'Search', exact: true }).click();
    await waitFor('one match', async () => (await p.locator('tbody tr').count()) === 1 && (await p.locator('tbody tr').innerText()).includes('gone@lead.example'));
    await u.check('suppression list');
    await u.screenshot('suppression.png');
    await p.getByRole('button', { name: 'Remove gone@lead.example' }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await p.getByText('gone@lead.example was removed from the suppression list.').waitFor();
    // The row and its button are gone: the focus is on the result, not on <body>.
    await waitFor('the focus on the result', async () => (await activeElement(p)).text === 'gone@lead.example was removed from the suppression list.');
    const left = (await world.app.request('GET', '/v1/suppression-list', { key })).body.data.map((s: { email: string }) => s.email);
    assert.deepEqual(left, ['keep@lead.example']);
  });

  it("the campaign's replied number opens the leads it counts: an unsubscribe reply's lead (now unsubscribed) with the interested one", async () => {
    const p = u.page;
    const sentTo = (email: string) => world.sink.received.find((r) => r.to.includes(email))!.parsed.messageId!;
    const answer = (from: string, id: string, text: string) =>
      [`From: ${from}`, `To: ${SENDER}`, 'Subject: Re: Hello', `Date: ${new Date().toUTCString()}`, `Message-ID: <${id}@lead.example>`, `In-Reply-To: ${sentTo(from)}`, 'Content-Type: text/plain; charset=utf-8', '', text, ''].join('\r\n');
    await world.imap.append(SENDER, 'imap-pw', answer('ada@lead.example', 'ada-1', "Yes, interested. Let's talk on Thursday."));
    await world.imap.append(SENDER, 'imap-pw', answer('grace@lead.example', 'grace-1', 'Please take me off your list.'));
    await p.goto(`/campaigns/${campaignId}`);
    await p.getByRole('heading', { name: 'Q4 outreach', level: 1 }).waitFor();
    // The daemon reads both answers (IMAP polled every second); the stats poll shows them.
    await waitFor('replied 2', async () => (await p.locator('[data-stat="replied"] .n').innerText()) === '2', 60_000);
    assert.equal((await world.app.request('GET', `/v1/campaigns/${campaignId}/stats`, { key })).body.replied, 2);
    await p.locator('[data-stat="replied"] a').click();
    await waitFor('the replied filter', async () => await p.getByLabel('Replied (interested, not interested or unsubscribe)').isChecked());
    const rows = p.locator('#leads tbody tr');
    const listed = async () => (await rows.evaluateAll((trs) => trs.map((tr) => [tr.querySelector('td')?.textContent, tr.querySelector('.pill')?.textContent]))).sort();
    // The campaign has only these two leads, so the table loaded with the page (both `active`,
    // before the replies) also has two rows until the filtered list arrives: wait for its
    // statuses, not its row count (a CI run read the old rows).
    const expected = [['ada@lead.example', 'replied'], ['grace@lead.example', 'unsubscribed']];
    await waitFor('the two leads who replied, with their statuses', async () => JSON.stringify(await listed()) === JSON.stringify(expected));
    assert.deepEqual(await listed(), expected);
    assert.equal(await p.getByLabel('State').inputValue(), '', 'any state');
    await u.check('campaign, leads who replied');
    // The bounced number drops the filter: its link says which leads it opens.
    await p.locator('[data-stat="bounced"] a').click();
    await waitFor('the replied filter off', async () => !(await p.getByLabel('Replied (interested, not interested or unsubscribe)').isChecked()));
    assert.ok(await p.getByLabel('A message bounced').isChecked());
    // Back where the tests after this one expect the page: on a page that polls no campaign.
    await u.nav('Suppression');
    await p.getByRole('heading', { name: 'Suppression list', level: 1 }).waitFor();
  });

  it("corrects a reply's class on the Replies page: it says what the change does, then what it did; replied follows; an unsubscribe's suppression stays, and the page says so", async () => {
    const p = u.page;
    const replyOf = async (email: string) => ((await world.app.request('GET', '/v1/replies', { key })).body as Array<Record<string, any>>).find((r) => r.email === email)!;
    const ada = await replyOf('ada@lead.example');
    const grace = await replyOf('grace@lead.example');
    assert.deepEqual([ada.classification, grace.classification], ['interested', 'unsubscribe']);
    await u.nav('Replies');
    await p.getByRole('heading', { name: 'Replies', level: 1 }).waitFor();
    const adaRow = p.locator(`tr[data-reply="${ada.id}"]`);
    await adaRow.getByRole('button', { name: 'Change class…' }).click();
    const form = p.getByRole('form', { name: 'Change the class of the reply from ada@lead.example' });
    await form.waitFor();
    assert.match(await form.innerText(), /Now interested \(the classifier's decision\)\./);
    // What the change does is said before it is made.
    await form.getByLabel('New class').selectOption('out_of_office');
    assert.match(await form.getByTestId('change-words').innerText(), /no longer counts in replied .*not started again/);
    await u.check('replies, changing a class');
    await form.getByRole('button', { name: 'Change class', exact: true }).click();
    const status = form.getByRole('status');
    await status.getByText("ada@lead.example's reply is out of office now (it was interested). The lead no longer counts in replied.").waitFor();
    assert.match(await status.innerText(), /The lead's sequence in the campaign stays ended \(replied\)/);
    // The result has the focus (the select's choices changed under it), and the row says what the classifier said.
    await waitFor('the focus on the result', async () => (await activeElement(p)).text.startsWith("ada@lead.example's reply is out of office now"));
    await adaRow.locator('.pill', { hasText: 'out of office' }).waitFor();
    assert.match(await adaRow.innerText(), /classifier said interested; changed/);
    const changed = await replyOf('ada@lead.example');
    assert.deepEqual([changed.classification, changed.classifierClassification, changed.reclassifiedBy], ['out_of_office', 'interested', `dashboard:${keyId}`]);
    assert.equal((await world.app.request('GET', `/v1/campaigns/${campaignId}/stats`, { key })).body.replied, 1);
    await u.check('replies, a class changed');
    await form.getByRole('button', { name: 'Close' }).click();
    await form.waitFor({ state: 'detached' });

    // Out of unsubscribe: the address stays on the list, said before and after, with the way to it.
    const graceRow = p.locator(`tr[data-reply="${grace.id}"]`);
    await graceRow.getByRole('button', { name: 'Change class…' }).click();
    const graceForm = p.getByRole('form', { name: 'Change the class of the reply from grace@lead.example' });
    await graceForm.getByLabel('New class').selectOption('not_interested');
    assert.match(await graceForm.getByTestId('change-words').innerText(), /grace@lead.example stays on the suppression list: take it off on the Suppression page/);
    await graceForm.getByRole('button', { name: 'Change class', exact: true }).click();
    await graceForm.getByRole('status').getByText(/^grace@lead.example stays on the suppression list: taking it off is a separate step/).waitFor();
    await u.check('replies, out of unsubscribe: the suppression stays');
    assert.deepEqual(
      (await world.app.request('GET', '/v1/suppression-list', { key })).body.data.filter((s: { email: string }) => s.email === 'grace@lead.example').length,
      1,
    );
    await graceForm.getByRole('link', { name: 'Open grace@lead.example on the suppression list' }).click();
    await p.getByRole('heading', { name: 'Suppression list', level: 1 }).waitFor();
    await p.getByText('grace@lead.example').first().waitFor();
    // As it was for the tests after this one: ada's answer counted again.
    assert.equal((await world.app.request('PATCH', `/v1/replies/${ada.id}`, { key, body: { classification: 'interested' } })).body.effects.replied, 1);
  });

  it('fits a 390 px phone (and 200% zoom) without sideways scrolling', async () => {
    // A long campaign name makes the campaign pickers (the overview's chart, the replies' filter) wide.
    const long = await world.app.request('POST', '/v1/campaigns', { key, body: { name: 'Q1 enterprise re-engagement: EMEA and North America, VP Sales and RevOps, second wave' } });
    assert.equal(long.status, 201, long.text);
    const narrow = await world.browser.newContext({ baseURL: world.daemon.url, viewport: { width: 390, height: 844 } });
    try {
      const n = await world.page(narrow);
      await n.signIn(key);
      await n.page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
      await n.page.locator('.chart canvas').first().waitFor();
      await n.assertNoHorizontalScroll('overview at 390 px');
      await n.page.goto(`/?chart=${long.body.id}`);
      await n.page.getByRole('heading', { name: /^Activity: Q1 enterprise/ }).waitFor();
      await n.assertNoHorizontalScroll('overview charting the long-named campaign at 390 px');
      await n.page.getByRole('link', { name: 'Q4 outreach' }).first().click();
      await n.page.getByRole('heading', { name: 'Q4 outreach', level: 1 }).waitFor();
      await n.page.locator('#leads tbody tr').first().waitFor();
      await n.assertNoHorizontalScroll('campaign at 390 px');
      await n.check('campaign at 390 px');
      for (const [nav, heading] of [['Senders', 'Senders'], ['Replies', 'Replies'], ['Suppression', 'Suppression list'], ['Webhooks', 'Webhooks'], ['API keys', 'API keys']]) {
        await n.nav(nav);
        await n.page.getByRole('heading', { name: heading, level: 1 }).waitFor();
        await n.page.waitForLoadState('networkidle');
        await n.assertNoHorizontalScroll(`${nav} at 390 px`);
      }
      // At 1280 px the pool's "add a member" control stays inside its card.
      await n.page.setViewportSize({ width: 1280, height: 860 });
      await n.nav('Senders');
      const pool = n.page.locator('tr[data-pool="Main pool"]');
      await pool.waitFor();
      const card = (await n.page.locator('section[aria-labelledby="pools-h"]').boundingBox())!;
      for (const box of await pool.locator('select, button').evaluateAll((els) => els.map((e) => e.getBoundingClientRect().right))) assert.ok(box <= card.x + card.width, `a pool control ends at ${box}, past its card (${card.x + card.width})`);
    } finally {
      await narrow.close();
    }
  });

  it('says why on the sign-in page when the session ended under the page', async () => {
    const created = await world.app.services().workspaces.createKey({ workspace: workspaceId, role: 'admin' });
    const other = await world.context();
    try {
      const o = await world.page(other);
      await o.signIn(created.key);
      // A page that does not poll, so the next request is the search below. Its list loaded
      // first: a list arriving during the search re-renders the form under it (a run on a loaded
      // machine timed out on a detached search field).
      await o.nav('Suppression');
      await o.page.getByRole('heading', { name: 'Suppression list', level: 1 }).waitFor();
      await o.page.waitForLoadState('networkidle');
      await world.app.services().workspaces.revokeKey(created.id);
      await o.page.getByLabel('Search addresses').fill('keep');
      await o.page.getByRole('button', { name: 'Search', exact: true }).click();
      const ended = o.page.getByTestId('session-ended');
      await ended.waitFor();
      assert.match(await ended.innerText(), /^Your session ended .*sign in again/);
      await o.check('sign-in after the session ended');
      // Signing in again returns to the page that was asked for, and the note goes.
      await o.page.getByLabel('API key').fill(key);
      await o.page.getByRole('button', { name: 'Sign in' }).click();
      await o.page.getByRole('heading', { name: 'Suppression list', level: 1 }).waitFor();
      assert.equal(await ended.count(), 0);
    } finally {
      await other.close();
    }
  });

  it('an address whose id decodes to another path is no page (a crafted link cannot aim the page\'s buttons elsewhere)', async () => {
    const p = u.page;
    const asked: string[] = [];
    const note = (r: { url(): string }) => asked.push(new URL(r.url()).pathname);
    p.on('request', note);
    try {
      await p.goto('/webhooks/..%2F..%2Fdashboard%2Fapi%2Fsession');
      await p.getByRole('heading', { name: 'Not found', level: 1 }).waitFor();
      await p.goto('/campaigns/x%3Fy');
      await p.getByRole('heading', { name: 'Not found', level: 1 }).waitFor();
      assert.deepEqual(asked.filter((a) => a.startsWith('/v1/webhooks/') || a.startsWith('/v1/campaigns/')), []);
    } finally {
      p.off('request', note);
    }
    await u.nav('Overview');
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
    assert.equal(await p.getByTestId('session-ended').count(), 0, 'signing out on purpose needs no explanation');
    const status = await p.evaluate(async () => (await fetch('/v1/campaigns')).status);
    assert.equal(status, 401);
    u.assertClean('after sign-out');
    assert.ok(workspaceId);
  });
});
