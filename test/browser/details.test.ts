// Details an operator and an SDR run into, in a real Chromium against a real `mailgate serve`
// (a review of 2026-11-29): an error's sentence ends before its advice, and an inactive SDR is
// told who can fix it; a pool's add-a-member choice follows its members; a search box empties
// when a link drops the search; a page emptied under its pager goes back; busy buttons keep
// the keyboard focus; a failed SDR list is said, not taken for "no SDR"; the assign form fits
// a phone; a double click creates one key, webhook, campaign or pool; the inbox's pager is in
// view at 1280 x 800; a sign-out the daemon never answered is not taken for one; a campaign's
// unsaved step edits survive a reload; a section that closes itself gives the focus back;
// Deactivate and Remove from campaign ask first; the chart follows a theme change; a CSV file
// can be chosen twice; the chart's and follow-ups' choices are in the address; a page's
// heading is focused at once.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import type { BrowserContext, Page, Route } from 'playwright-core';
import { seedWorkspace, seedSdr } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { World, UserPage, activeElement, axeLog, axeSummary } from './env.ts';

/** The focused element's text. */
const focusedText = async (p: Page) => (await activeElement(p)).text;

/** GET /v1/sdr-profiles answering 503, as a database outage would. */
async function sdrListFails(p: Page): Promise<void> {
  await p.route(/\/v1\/sdr-profiles/, (r) => r.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: { code: 'unavailable', message: 'the database is not reachable' } }) }));
}

/**
 * One reply on the Replies page: its list answered here (a real reply needs a whole campaign's
 * mail, sent and answered; the page is what is tested).
 */
async function oneReply(p: Page, campaignId: string): Promise<void> {
  await p.route(/\/v1\/replies\?/, (r) =>
    r.fulfill({
      status: 200,
      contentType: 'application/json',
      headers: { 'x-total-count': '1' },
      body: JSON.stringify([{ id: 'rep_one', email: 'ada@lead.example', campaignId, classification: 'interested', receivedAt: new Date().toISOString(), threadSnippet: 'Yes, interested!', forwardedAt: null, assignedTo: [], classifierClassification: 'interested', decidedBy: 'lexicon:interest', reclassifiedAt: null, reclassifiedBy: null }]),
    }),
  );
}

describe('dashboard in Chromium: details', function () {
  this.timeout(180_000);
  const world = new World();
  let axeFrom = 0;
  let key: string;
  let workspaceId: string;
  let campaignId: string;
  const accounts: { id: string; email: string }[] = [];
  let sam: { id: string; key: string };
  const contexts: BrowserContext[] = [];
  const pages: UserPage[] = [];

  async function open(viewport = { width: 1280, height: 860 }): Promise<UserPage> {
    const ctx = await world.context();
    contexts.push(ctx);
    const u = await world.page(ctx);
    await u.page.setViewportSize(viewport);
    pages.push(u);
    return u;
  }

  before(async () => {
    axeFrom = axeLog.length;
    await world.start();
    const ws = await seedWorkspace(world.app, 'Acme');
    key = ws.adminKey;
    workspaceId = ws.workspace.id;
    const s = world.app.services();
    for (const email of ['first@acme.example', 'second@acme.example', 'third@acme.example']) {
      world.sink.users.set(email, 'pw');
      const a = await s.senders.add({ workspaceId, email, name: email.split('@')[0], smtpUrl: world.sink.url(email, 'pw') });
      accounts.push({ id: a.id, email });
    }
    await s.senders.createPool(workspaceId, 'Main', 100, [accounts[0].id]);
    const c = await world.app.request('POST', '/v1/campaigns', { key, body: { name: 'Q4 outreach', sequenceSteps: [{ subject: 'Hi {{firstName}}', bodyHtml: '<p>Hi</p>' }] } });
    campaignId = c.body.id;
    await world.app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: [{ email: 'ada@lead.example', firstName: 'Ada' }, { email: 'grace@lead.example', firstName: 'Grace' }] } });
    await world.app.request('POST', '/v1/suppression-list', { key, body: { emails: Array.from({ length: 51 }, (_, i) => `supp${String(i).padStart(2, '0')}@x.example`) } });
    const seeded = await seedSdr(world.app, workspaceId, 'Sam Rep', 'sam@acme.example');
    sam = { id: seeded.sdr.id, key: seeded.sdrKey };
    const db = new pg.Client({ connectionString: world.app.databaseUrl });
    await db.connect();
    try {
      const now = Date.now();
      for (let i = 1; i <= 55; i++) {
        await db.query(
          `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
           values ($1, $2, $3, $4, $5, $6, 'new', 'B', $7, $8, $8, $8)`,
          [`thr_det${String(i).padStart(2, '0')}`, workspaceId, sam.id, `p${i}@prospect.example`, `Prospect ${String(i).padStart(2, '0')}`, `Re: question ${i}`, 100 - i, new Date(now - i * 60_000)],
        );
      }
    } finally {
      await db.end();
    }
  });
  afterEach(async function () {
    if (this.currentTest?.state === 'failed') for (const [i, u] of pages.entries()) await u.dump(`details ${this.currentTest.title} ${i}`);
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await world.stop();
    console.log(`      ${axeSummary(axeFrom)}`);
  });

  it('a refused sign-in ends its sentence before the advice', async () => {
    const u = await open();
    const p = u.page;
    await p.goto('/');
    await p.getByLabel('API key').fill('mgk_not_a_real_key');
    await p.getByRole('button', { name: 'Sign in' }).click();
    const alert = p.getByRole('alert');
    await alert.waitFor();
    assert.equal(await alert.innerText(), 'invalid API key. Sign in again with a valid API key.');
  });

  it('a sign-out the daemon never answered says so and stays signed in (the session still works; a reload brings it back)', async () => {
    const u = await open();
    const p = u.page;
    await u.signIn(key);
    await p.route(/\/dashboard\/api\/session$/, (r) => (r.request().method() === 'DELETE' ? r.abort('connectionrefused') : r.continue()));
    await p.getByRole('button', { name: 'Sign out' }).click();
    const alert = p.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /^Not signed out \(this session still works\): mailgate did not answer/);
    assert.equal(await p.getByRole('button', { name: 'Sign out' }).count(), 1, 'still signed in');
    await p.unroute(/\/dashboard\/api\/session$/);
    u.problems.consoleErrors = u.problems.consoleErrors.filter((e) => !/ERR_CONNECTION_REFUSED/.test(e));
    // Once the daemon answers, the sign-out goes through.
    await p.getByRole('button', { name: 'Sign out' }).click();
    await p.getByRole('heading', { name: 'Sign in to mailgate' }).waitFor();
    await p.reload();
    await p.getByRole('heading', { name: 'Sign in to mailgate' }).waitFor();
  });

  it("a campaign's unsaved step edits survive a reload and a visit to another page; saving them forgets them", async () => {
    const u = await open();
    const p = u.page;
    await u.signIn(key);
    await p.goto(`/campaigns/${campaignId}`);
    const subject = () => p.getByLabel('Step 1 subject');
    await subject().fill('Edited for {{firstName}}');
    await p.getByText('Unsaved changes.').waitFor();
    await p.reload();
    await p.getByText('Unsaved changes.').waitFor();
    assert.equal(await subject().inputValue(), 'Edited for {{firstName}}');
    await p.getByRole('link', { name: 'Senders' }).click();
    await p.getByRole('heading', { name: 'Senders', level: 1 }).waitFor();
    await p.goBack();
    assert.equal(await subject().inputValue(), 'Edited for {{firstName}}');
    await p.getByRole('button', { name: 'Save steps' }).click();
    await p.getByText('Steps saved.').waitFor();
    const saved = await world.app.request('GET', `/v1/campaigns/${campaignId}`, { key });
    assert.equal(saved.body.sequenceSteps[0].subject, 'Edited for {{firstName}}');
    await p.reload();
    assert.equal(await subject().inputValue(), 'Edited for {{firstName}}');
    assert.equal(await p.getByText('Unsaved changes.').count(), 0, 'nothing unsaved once saved');
    assert.equal(await p.evaluate(() => Object.keys(sessionStorage).filter((k) => k.includes('steps.')).length), 0, 'the kept edits are forgotten');
  });

  it('the Sign in button keeps the keyboard focus through a refused sign-in', async () => {
    const u = await open();
    const p = u.page;
    await p.goto('/');
    await p.getByLabel('API key').fill('mgk_not_a_real_key');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('alert').waitFor();
    assert.equal(await focusedText(p), 'Sign in');
  });

  it('an SDR deactivated while signed in: the page loads on the sign-in page saying why, and that an admin can activate it', async () => {
    const u = await open();
    const p = u.page;
    const ola = await seedSdr(world.app, workspaceId, 'Ola Gone', 'ola@acme.example');
    await u.signIn(ola.sdrKey);
    assert.equal((await world.app.request('PATCH', `/v1/sdr-profiles/${ola.sdr.id}`, { key, body: { active: false } })).status, 200);
    await p.reload();
    await p.getByRole('heading', { name: 'Sign in to mailgate' }).waitFor();
    const why = p.getByRole('alert');
    await why.waitFor();
    assert.equal(await why.innerText(), 'the SDR of this key is inactive. An admin can activate the SDR again on the SDRs page.');
    await u.check('sign-in, SDR inactive');
    // Signing in with that key again says the same, not "a key with another role".
    await p.getByLabel('API key').fill(ola.sdrKey);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await waitFor('the refusal again', async () => (await p.getByRole('alert').innerText()) === 'the SDR of this key is inactive. An admin can activate the SDR again on the SDRs page.');
  });

  let admin: UserPage;

  it('a pool\'s add-a-member choice follows its members: the next Add adds the account it shows', async () => {
    admin = await open();
    await admin.signIn(key);
    const p = admin.page;
    await admin.nav('Senders');
    const pool = p.locator('tr[data-pool="Main"]');
    await pool.waitFor();
    const members = pool.locator('td').nth(2);
    await pool.getByLabel('Account to add to Main').selectOption({ label: 'third@acme.example' });
    await pool.getByRole('button', { name: 'Add to Main' }).click();
    await waitFor('third a member', async () => (await members.innerText()).includes('third@acme.example'));
    // The choice left shows second@, and Add adds it (not the account just added, again).
    assert.equal(await pool.getByLabel('Account to add to Main').inputValue(), accounts[1].id);
    await pool.getByRole('button', { name: 'Add to Main' }).click();
    await waitFor('second a member', async () => (await members.innerText()).includes('second@acme.example'));
    await pool.getByText('every account is a member').waitFor();
    await admin.check('senders, every account a member');
  });

  it('the suppression search box empties when the Suppression tab drops the search', async () => {
    const p = admin.page;
    await admin.nav('Suppression');
    await p.getByLabel('Search addresses').fill('supp07');
    await p.getByRole('button', { name: 'Search', exact: true }).click();
    await waitFor('one match', async () => (await p.locator('tbody tr').count()) === 1);
    await admin.nav('Suppression');
    await waitFor('the whole list', async () => (await p.locator('tbody tr').count()) === 50);
    assert.equal(await p.getByLabel('Search addresses').inputValue(), '');
  });

  it('the leads\' search box empties when a stat\'s link (bounced) drops the search', async () => {
    const p = admin.page;
    await p.goto(`/campaigns/${campaignId}`);
    await p.getByLabel('Search leads').fill('grace');
    await p.getByRole('button', { name: 'Search', exact: true }).click();
    await waitFor('one lead', async () => (await p.locator('#leads tbody tr').count()) === 1);
    await p.locator('[data-stat="bounced"] a').click();
    await waitFor('the bounced filter', async () => await p.getByLabel('A message bounced').isChecked());
    // The table is not searched for grace any more, and the box says so (it follows the address
    // a frame after the filter's select does: waited for, not read at once).
    await waitFor('the search box empty', async () => (await p.getByLabel('Search leads').inputValue()) === '');
  });

  it('removing the only row of the last page goes back to the page before, not to an empty "51–50 of 50"', async () => {
    const p = admin.page;
    await p.goto('/suppression?offset=50');
    const rows = p.locator('tbody tr');
    await waitFor('one row on page 2', async () => (await rows.count()) === 1);
    const email = await rows.locator('td').first().innerText();
    await p.getByRole('button', { name: `Remove ${email}` }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await p.getByText(`${email} was removed from the suppression list.`).waitFor();
    await waitFor('page 1 again', async () => (await rows.count()) === 50);
    assert.match(await p.getByRole('navigation', { name: 'Suppressed addresses pages' }).innerText(), /^1–50 of 50/);
    assert.equal(new URL(p.url()).searchParams.get('offset'), null);
  });

  it('a busy button keeps the keyboard focus (Suppress)', async () => {
    const p = admin.page;
    await p.getByLabel('Addresses (one per line, or separated by commas)').fill('fresh@x.example');
    await p.getByRole('button', { name: 'Suppress' }).focus();
    await p.keyboard.press('Enter');
    await p.getByText('1 of 1 addresses added').waitFor();
    assert.equal(await focusedText(p), 'Suppress');
  });

  it('a failed SDR list is said on the API keys page, not shown as an empty SDR choice', async () => {
    const p = admin.page;
    await sdrListFails(p);
    try {
      await admin.nav('API keys');
      await p.getByLabel('Role').selectOption('sdr');
      await p.getByRole('alert').filter({ hasText: 'Could not load the SDRs: the database is not reachable' }).waitFor();
      assert.equal(await p.getByRole('button', { name: 'Create key' }).isDisabled(), true);
    } finally {
      await p.unroute(/\/v1\/sdr-profiles/);
      // Chromium's console lines for the 503s answered above.
      admin.problems.consoleErrors = admin.problems.consoleErrors.filter((e) => !/status of 503/.test(e));
    }
  });

  it('a failed SDR list is said in the Replies page\'s Assign, not taken for "no active SDR"', async () => {
    const p = admin.page;
    await sdrListFails(p);
    await oneReply(p, campaignId);
    try {
      await admin.nav('Replies');
      await p.getByRole('button', { name: 'Assign…' }).click();
      await p.getByRole('alert').filter({ hasText: 'Could not load the SDRs: the database is not reachable' }).waitFor();
      assert.equal(await p.getByText('No active SDR to assign to').count(), 0);
    } finally {
      await p.unroute(/\/v1\/sdr-profiles/);
      await p.unroute(/\/v1\/replies\?/);
      admin.problems.consoleErrors = admin.problems.consoleErrors.filter((e) => !/status of 503/.test(e));
    }
  });

  it('the assign form fits a 390 px phone: every field in view, not off to the side of the table', async () => {
    const p = admin.page;
    await oneReply(p, campaignId);
    await p.setViewportSize({ width: 390, height: 844 });
    try {
      await p.goto('/replies');
      const row = p.locator('tr[data-reply="rep_one"]');
      await row.waitFor();
      await row.getByRole('button', { name: 'Assign…' }).click();
      const form = p.getByRole('form', { name: 'Assign the reply from ada@lead.example' });
      await form.waitFor();
      const controls = [form.getByLabel('SDR', { exact: true }), form.getByLabel('Category'), form.getByLabel('Seniority'), form.getByLabel('Employee count'), form.getByLabel('Note for the SDR'), form.getByRole('button', { name: 'Assign and forward' })];
      for (const c of controls) {
        const box = (await c.boundingBox())!;
        assert.ok(box.x >= 0 && box.x + box.width <= 390, `${await c.evaluate((e) => e.getAttribute('name') ?? (e as HTMLElement).innerText)} at x ${Math.round(box.x)}..${Math.round(box.x + box.width)} of a 390 px window`);
      }
      await admin.assertNoHorizontalScroll('replies, assign form at 390 px');
      await admin.check('replies, assign form at 390 px');
    } finally {
      await p.setViewportSize({ width: 1280, height: 860 });
      await p.unroute(/\/v1\/replies\?/);
    }
  });

  /** Every POST to `path` held 300 ms, so a second press lands while the first is on its way. */
  async function slowPosts(p: Page, path: RegExp): Promise<() => Promise<void>> {
    const hold = async (r: Route) => {
      if (r.request().method() === 'POST') await new Promise((done) => setTimeout(done, 300));
      await r.continue();
    };
    await p.route(path, hold);
    return () => p.unroute(path, hold);
  }

  it('a double click on Create key creates one key (not a second whose secret nobody saw)', async () => {
    const p = admin.page;
    await admin.nav('API keys');
    const release = await slowPosts(p, /\/dashboard\/api\/api-keys$/);
    try {
      await p.getByLabel('Name').fill('Twice pressed');
      await p.getByRole('button', { name: 'Create key' }).dblclick();
      await p.getByTestId('secret-value').waitFor();
      await p.waitForLoadState('networkidle');
    } finally {
      await release();
    }
    const keys = (await world.app.request('GET', '/v1/api-keys?limit=200', { key })).body.data.filter((k: { name: string }) => k.name === 'Twice pressed');
    assert.equal(keys.length, 1);
  });

  it("a section that closes itself gives the focus back to the button that opened it (a new key's Done, a new campaign's Cancel)", async () => {
    const p = admin.page;
    await admin.nav('API keys');
    await p.getByLabel('Name').fill('Focus kept');
    // The test before leaves its own new key's secret on the page: waiting for a secret alone
    // could take that one, and a Done pressed before this key's answer came closed the old
    // secret only for the new one to appear after it.
    const created = p.waitForResponse((r) => r.request().method() === 'POST' && /\/dashboard\/api\/api-keys$/.test(r.url()));
    await p.getByRole('button', { name: 'Create key' }).press('Enter');
    const secret = ((await (await created).json()) as { key: string }).key;
    await p.getByTestId('secret-value').filter({ hasText: secret }).waitFor();
    await p.getByRole('button', { name: 'Done' }).press('Enter');
    await p.getByTestId('secret-value').waitFor({ state: 'detached' });
    await waitFor('the focus back on Create key', async () => (await focusedText(p)) === 'Create key');
    await admin.nav('Overview');
    await p.getByRole('button', { name: 'New campaign' }).first().press('Enter');
    await p.getByRole('button', { name: 'Cancel' }).press('Enter');
    await waitFor('the focus back on New campaign', async () => (await focusedText(p)) === 'New campaign');
    // The opener is the button pressed even when the focus moves on before the next frame (the
    // section once took whatever had the focus a frame later: here its own Cancel).
    // (No named functions inside: the test's compiler would wrap them in a helper the page lacks.)
    await p.evaluate(async () => {
      [...document.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'New campaign')!.click();
      await new Promise((r) => setTimeout(r));
      [...document.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Cancel')!.focus();
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)));
      [...document.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Cancel')!.click();
    });
    await waitFor('the focus back on New campaign, after a quick move', async () => (await focusedText(p)) === 'New campaign');
  });

  it('a double click on Register registers one webhook (each event would go out twice)', async () => {
    const p = admin.page;
    await admin.nav('Webhooks');
    const release = await slowPosts(p, /\/v1\/webhooks$/);
    try {
      await p.getByLabel('HTTPS URL').fill(world.receiver.url('/twice'));
      await p.getByRole('button', { name: 'Register' }).dblclick();
      await p.getByTestId('secret-value').waitFor();
      await p.waitForLoadState('networkidle');
    } finally {
      await release();
    }
    assert.equal((await world.app.request('GET', '/v1/webhooks', { key })).body.data.length, 1);
  });

  it('a double click on Create draft creates one campaign', async () => {
    const p = admin.page;
    await admin.nav('Overview');
    const release = await slowPosts(p, /\/v1\/campaigns$/);
    try {
      await p.getByRole('button', { name: 'New campaign' }).click();
      await p.getByLabel('Name').fill('Pressed twice');
      await p.getByRole('button', { name: 'Create draft' }).dblclick();
      await p.getByRole('heading', { name: 'Pressed twice', level: 1 }).waitFor();
      await p.waitForLoadState('networkidle');
      assert.equal((await world.app.request('GET', '/v1/campaigns?limit=200', { key })).body.data.filter((c: { name: string }) => c.name === 'Pressed twice').length, 1);
    } finally {
      await release();
    }
  });

  it('a double click on Create pool creates one pool', async () => {
    const p = admin.page;
    const release = await slowPosts(p, /\/v1\/sender-pools$/);
    try {
      await admin.nav('Senders');
      await p.getByLabel('New pool name').fill('Twice pool');
      await p.getByLabel('Daily capacity').fill('10');
      await p.getByRole('button', { name: 'Create pool' }).dblclick();
      await p.locator('tr[data-pool="Twice pool"]').first().waitFor();
      await p.waitForLoadState('networkidle');
      assert.equal((await world.app.request('GET', '/v1/sender-pools', { key })).body.filter((x: { name: string }) => x.name === 'Twice pool').length, 1);
    } finally {
      await release();
    }
  });

  let s: UserPage;

  it('the inbox\'s pager is in view at 1280 x 800', async () => {
    s = await open({ width: 1280, height: 800 });
    await s.signIn(sam.key);
    const p = s.page;
    const items = p.locator('ul.threads > li');
    await waitFor('a page of 50 threads', async () => (await items.count()) === 50);
    const pager = p.getByRole('navigation', { name: 'Threads pages' });
    const box = (await pager.boundingBox())!;
    assert.ok(box.y >= 0 && box.y + box.height <= 800, `the pager at y ${Math.round(box.y)}..${Math.round(box.y + box.height)} of an 800 px window`);
    await pager.getByRole('button', { name: 'Next' }).click();
    await waitFor('the second page', async () => (await items.count()) === 5);
    assert.match(await pager.innerText(), /^51–55 of 55/);
    await s.check('inbox, page 2');
  });

  it('the inbox\'s search box empties when the Inbox tab drops the search', async () => {
    const p = s.page;
    const items = p.locator('ul.threads > li');
    await p.getByLabel('Search', { exact: true }).fill('Prospect 07');
    await p.keyboard.press('Enter');
    await waitFor('one match', async () => (await items.count()) === 1);
    await items.first().getByRole('link').click();
    const view = p.locator('[data-thread-view="thr_det07"]');
    await view.waitFor();
    await s.nav('Inbox');
    await waitFor('the whole inbox', async () => (await items.count()) === 50);
    assert.equal(await p.getByLabel('Search', { exact: true }).inputValue(), '');
  });

  it('Generate drafts keeps the keyboard focus while it writes', async () => {
    const p = s.page;
    const items = p.locator('ul.threads > li');
    await p.goto('/');
    await waitFor('the inbox', async () => (await items.count()) === 50);
    await items.first().getByRole('link').click();
    const thread = p.locator('[data-thread-view]');
    await thread.waitFor();
    await thread.getByRole('button', { name: 'Generate drafts' }).focus();
    await p.keyboard.press('Enter');
    await thread.locator('[data-draft]').first().waitFor({ timeout: 60_000 });
    assert.equal(await focusedText(p), 'Generate drafts');
  });

  it('Deactivate asks first, saying what it changes; Cancel changes nothing; Activate needs no asking', async () => {
    const dee = await seedSdr(world.app, workspaceId, 'Dee Pause', 'dee@acme.example');
    const p = admin.page;
    await admin.nav('SDRs');
    const card = p.locator(`[data-sdr="${dee.sdr.id}"]`);
    await card.waitFor();
    const active = async () => (await world.app.request('GET', `/v1/sdr-profiles/${dee.sdr.id}`, { key })).body.active;
    await card.getByRole('button', { name: 'Deactivate Dee Pause', exact: true }).click();
    const dialog = p.getByRole('dialog', { name: 'Deactivate Dee Pause?' });
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /API keys and signed-in dashboard sessions are refused from now on/);
    await admin.check('SDRs, deactivate asks');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal(await active(), true, 'Cancel leaves the SDR active');
    await card.getByRole('button', { name: 'Deactivate Dee Pause', exact: true }).click();
    await dialog.getByRole('button', { name: 'Deactivate', exact: true }).click();
    await card.getByRole('button', { name: 'Activate Dee Pause', exact: true }).waitFor();
    assert.equal(await active(), false);
    await card.getByRole('button', { name: 'Activate Dee Pause', exact: true }).click();
    await card.getByRole('button', { name: 'Deactivate Dee Pause', exact: true }).waitFor();
    assert.equal(await active(), true);
  });

  it('Remove from campaign asks first, naming the lead and what it changes; Escape changes nothing; by keyboard alone it removes the lead, and the focus goes to what happened', async () => {
    const c = await world.app.request('POST', '/v1/campaigns', { key, body: { name: 'Signed deals', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } });
    const id = c.body.id;
    await world.app.request('POST', `/v1/campaigns/${id}/leads/bulk`, { key, body: { leads: [{ email: 'jane@signed.example', firstName: 'Jane' }, { email: 'kim@signed.example' }] } });
    const statusOf = async (email: string) => (await world.app.request('GET', `/v1/campaigns/${id}/leads`, { key })).body.data.find((l: { email: string }) => l.email === email).status;
    const u = await open();
    await u.signIn(key);
    const p = u.page;
    await p.goto(`/campaigns/${id}`);
    const removeJane = p.getByRole('button', { name: 'Remove jane@signed.example from the campaign', exact: true });
    await removeJane.waitFor();
    await u.check('campaign, leads with Remove');
    // Reached with the keyboard: the table's first control after its (scrollable) region.
    await p.getByRole('region', { name: 'Leads table' }).focus();
    await p.keyboard.press('Tab');
    assert.equal((await activeElement(p)).label, 'Remove jane@signed.example from the campaign');
    await p.keyboard.press('Enter');
    const dialog = p.getByRole('dialog', { name: 'Remove jane@signed.example from this campaign?' });
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /gets nothing more from this campaign: its waiting steps are cancelled/);
    assert.match(await dialog.innerText(), /stays in your other campaigns and off the suppression list/);
    await u.check('campaign, Remove from campaign asks');
    await p.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await statusOf('jane@signed.example'), 'active', 'Escape leaves the lead in the campaign');
    await waitFor('the focus back on Remove', async () => (await activeElement(p)).label === 'Remove jane@signed.example from the campaign');
    await p.keyboard.press('Enter');
    await dialog.waitFor();
    await waitFor('the focus on the confirming button', async () => (await activeElement(p)).text === 'Remove from campaign');
    await p.keyboard.press('Enter');
    await waitFor('the focus on the result', async () => (await activeElement(p)).text === 'jane@signed.example was removed from the campaign.');
    assert.equal(await statusOf('jane@signed.example'), 'removed');
    assert.equal(await statusOf('kim@signed.example'), 'active');
    const row = p.locator('#leads tbody tr', { hasText: 'jane@signed.example' });
    await row.locator('.pill', { hasText: 'removed' }).waitFor();
    assert.equal(await removeJane.count(), 0, 'no Remove for a removed lead');
    assert.equal(await p.getByRole('button', { name: 'Remove kim@signed.example from the campaign', exact: true }).count(), 1);
    await u.check('campaign, a lead removed');
    // The state filter has the new state.
    await p.getByLabel('State').selectOption('removed');
    await waitFor('only the removed lead', async () => (await p.locator('#leads tbody tr').count()) === 1 && (await p.locator('#leads tbody tr').innerText()).includes('jane@signed.example'));
  });

  it("the activity chart is drawn again in the theme's colours when the theme changes", async () => {
    const p = admin.page;
    await admin.nav('Overview');
    const canvas = p.locator('.chart canvas');
    await canvas.waitFor();
    // Pixels of the grid's colour (--line: #d0d7de light, #30363d dark; the grid is 1 px, pixel-aligned).
    const gridPixels = () =>
      canvas.evaluate((c: HTMLCanvasElement) => {
        const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
        const n = { light: 0, dark: 0 };
        for (let i = 0; i < d.length; i += 4) {
          if (d[i + 3] !== 255) continue;
          if (d[i] === 0xd0 && d[i + 1] === 0xd7 && d[i + 2] === 0xde) n.light++;
          if (d[i] === 0x30 && d[i + 1] === 0x36 && d[i + 2] === 0x3d) n.dark++;
        }
        return n;
      });
    await waitFor('the light grid', async () => (await gridPixels()).light > 100);
    // The timeline's 10 s refresh draws the chart anew too: held meanwhile, so only the theme can.
    const held: Route[] = [];
    await p.route(/\/timeline/, (r) => void held.push(r));
    const theme = p.getByLabel('Theme');
    try {
      await theme.selectOption('dark');
      await waitFor('the grid drawn dark', async () => {
        const n = await gridPixels();
        return n.dark > 100 && n.light === 0;
      });
      await theme.selectOption('system');
      await waitFor('the grid drawn light again', async () => {
        const n = await gridPixels();
        return n.light > 100 && n.dark === 0;
      });
    } finally {
      await theme.selectOption('system');
      await p.unroute(/\/timeline/);
      for (const r of held) await r.continue().catch(() => undefined);
    }
  });

  it('a CSV file chosen for the suppression list or a lead import is let go once read, so choosing it again reads it again', async () => {
    // The browser fires no change event when the file chosen is the one the input holds, so a
    // file fixed after a refusal, or taken again after a failure, was silently not read.
    const p = admin.page;
    await admin.nav('Suppression');
    const file = p.getByLabel('Or a CSV file');
    const csv = { name: 'bounced.csv', mimeType: 'text/csv', buffer: Buffer.from('email\ncsv1@x.example\ncsv2@x.example\n') };
    await file.setInputFiles(csv);
    await p.getByText('2 of 2 addresses added').waitFor();
    assert.equal(await file.inputValue(), '');
    await file.setInputFiles(csv);
    await p.getByText('0 of 2 addresses added (2 were already suppressed).').waitFor();

    await p.goto(`/campaigns/${campaignId}`);
    const leadsFile = p.getByLabel('CSV file');
    await leadsFile.setInputFiles({ name: 'more.csv', mimeType: 'text/csv', buffer: Buffer.from('email\n') });
    await p.getByText('more.csv has a header but no rows').waitFor();
    assert.equal(await leadsFile.inputValue(), '');
    await leadsFile.setInputFiles({ name: 'more.csv', mimeType: 'text/csv', buffer: Buffer.from('email\nlin@lead.example\n') });
    await p.getByRole('group', { name: /Columns of more.csv/ }).waitFor();
    assert.equal(await leadsFile.inputValue(), '');
  });

  it('a lead file as European Excel writes it (semicolons, Windows-1252, empty rows, a cell on two lines) is imported as typed, an invalid row named by its spreadsheet row', async () => {
    // Read as UTF-8 with commas, the whole line was one column (no email to map) and Jürgen
    // became J\uFFFDrgen; an empty row (";;;") was an invalid row, and the rows after an empty
    // line or a two-line cell were named one row too early.
    const p = admin.page;
    const c = await world.app.request('POST', '/v1/campaigns', { key, body: { name: 'Excel import', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } });
    const text = ['E-Mail;First Name;Firma;Notiz', 'juergen@lead.example;Jürgen;Müller, Söhne GmbH;"zwei', 'Zeilen"', ';;;', '', 'kein-adresse;Zoë;X;y', 'chloe@lead.example;Chloé;Café Crème;z', ''].join('\r\n');
    await p.goto(`/campaigns/${c.body.id}`);
    await p.getByLabel('CSV file').setInputFiles({ name: 'excel.csv', mimeType: 'text/csv', buffer: Buffer.from(text, 'latin1') });
    await p.getByRole('group', { name: 'Columns of excel.csv (3 rows)' }).waitFor();
    assert.equal(await p.getByLabel('Column E-Mail becomes').inputValue(), 'email');
    assert.equal(await p.getByLabel('Column First Name becomes').inputValue(), 'firstName');
    assert.equal(await p.getByLabel('Column Notiz becomes').inputValue(), 'custom:Notiz');
    await p.getByLabel('Column Firma becomes').selectOption('company');
    await p.getByRole('button', { name: 'Import 3 rows' }).click();
    const summary = p.getByTestId('import-summary');
    await summary.waitFor();
    assert.equal(await summary.innerText(), 'Import finished: 2 enrolled, 0 updated, 1 invalid.');
    await p.getByText('row 5: email: not a valid email address').waitFor();
    // The invalid rows come back as the file was written (semicolons), UTF-8 with a BOM, which
    // Excel needs to read Zoë as Zoë.
    const [download] = await Promise.all([p.waitForEvent('download'), p.getByRole('link', { name: 'Download the 1 invalid rows' }).click()]);
    assert.equal(readFileSync((await download.path())!, 'utf8'), '\ufeffE-Mail;First Name;Firma;Notiz;row;error\r\nkein-adresse;Zoë;X;y;5;email: not a valid email address\r\n');
    const db = new pg.Client({ connectionString: world.app.databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query(
        `select l.email, l.first_name, l.company, l.custom from leads l join enrollments e on e.lead_id = l.id where e.campaign_id = $1 order by l.email`,
        [c.body.id],
      );
      assert.deepEqual(rows, [
        { email: 'chloe@lead.example', first_name: 'Chloé', company: 'Café Crème', custom: { Notiz: 'z' } },
        { email: 'juergen@lead.example', first_name: 'Jürgen', company: 'Müller, Söhne GmbH', custom: { Notiz: 'zwei\r\nZeilen' } },
      ]);
    } finally {
      await db.end();
    }
  });

  it("a file whose 1,000-row chunk would pass the API's 10 MB body limit is sent in smaller requests: every row imported", async () => {
    // Chunks were 1,000 rows whatever their size: 300 rows of four 9,000-character notes were one
    // 10.8 MB request, refused 413, and the import stopped with nothing imported.
    const p = admin.page;
    const c = await world.app.request('POST', '/v1/campaigns', { key, body: { name: 'Wide import', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } });
    const note = 'n'.repeat(9_000);
    const lines = ['email,a,b,c,d', ...Array.from({ length: 300 }, (_, i) => `wide${i}@lead.example,${note},${note},${note},${note}`)];
    await p.goto(`/campaigns/${c.body.id}`);
    await p.getByLabel('CSV file').setInputFiles({ name: 'wide.csv', mimeType: 'text/csv', buffer: Buffer.from(lines.join('\n')) });
    await p.getByRole('button', { name: 'Import 300 rows' }).click();
    const summary = p.getByTestId('import-summary');
    await summary.waitFor({ timeout: 60_000 });
    assert.equal(await summary.innerText(), 'Import finished: 300 enrolled, 0 updated, 0 invalid.');
    const stats = await world.app.request('GET', `/v1/campaigns/${c.body.id}/stats`, { key });
    assert.equal(stats.body.totalEnrolled, 300);
  });

  it("the chart's hour/day choice and Follow-ups' Include upcoming are in the address: a reload keeps them", async () => {
    const p = admin.page;
    await admin.nav('Overview');
    await p.getByLabel('Bucket', { exact: true }).selectOption('day');
    await waitFor('bucket=day in the address', async () => new URL(p.url()).searchParams.get('bucket') === 'day');
    await p.reload();
    await p.locator('.chart canvas').waitFor();
    assert.equal(await p.getByLabel('Bucket', { exact: true }).inputValue(), 'day');
    await p.getByLabel('Bucket', { exact: true }).selectOption('hour');
    await waitFor('no bucket in the address', async () => !new URL(p.url()).searchParams.has('bucket'));

    const q = s.page;
    await s.nav('Follow-ups');
    const upcoming = q.getByLabel('Include upcoming');
    await upcoming.check();
    await waitFor('upcoming=1 in the address', async () => new URL(q.url()).searchParams.get('upcoming') === '1');
    await q.reload();
    await q.getByLabel('Include upcoming').waitFor();
    assert.equal(await q.getByLabel('Include upcoming').isChecked(), true);
  });

  it("a new page's heading takes the focus as the page appears: a button focused right after keeps it", async () => {
    // The heading took the focus a frame after the page appeared: a key pressed on a button in
    // between went to the heading (the browser test pressing New campaign at once saw no form).
    const p = admin.page;
    await admin.nav('SDRs');
    await p.getByRole('heading', { name: 'SDRs', level: 1 }).waitFor();
    // (No named functions inside: the test's compiler would wrap them in a helper the page lacks.)
    const focused = await p.evaluate(async () => {
      [...document.querySelectorAll('nav a')].find((a) => a.textContent?.trim() === 'Overview')!.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, button: 0 }));
      await new Promise((r) => setTimeout(r));
      [...document.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'New campaign')!.focus();
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)));
      return document.activeElement?.textContent?.trim();
    });
    assert.equal(focused, 'New campaign');
  });
});
