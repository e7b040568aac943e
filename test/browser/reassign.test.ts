// An admin moves an SDR's threads to another SDR from the SDRs page, in a real Chromium against a
// real `mailgate serve`: only active SDRs whose mailbox can send are offered, the move asks once
// (naming both SDRs and what moves), Cancel moves nothing, and what happened is said. Every state
// is checked with axe-core, for console errors and for CSP violations.
import assert from 'node:assert/strict';
import pg from 'pg';
import type { BrowserContext } from 'playwright-core';
import { seedSdr, seedWorkspace } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { World, UserPage, axeLog, axeSummary } from './env.ts';

describe('dashboard in Chromium: moving an SDR’s threads', function () {
  this.timeout(180_000);
  const world = new World();
  let axeFrom = 0;
  let ctx: BrowserContext;
  let u: UserPage;
  let db: pg.Client;
  let sam: string;
  let nora: string;
  const holders = async () => (await db.query(`select sdr_id, count(*)::int as n from prospect_threads group by sdr_id order by sdr_id`)).rows;

  before(async () => {
    axeFrom = axeLog.length;
    await world.start();
    const ws = await seedWorkspace(world.app, 'Acme');
    const s = world.app.services();
    sam = (await seedSdr(world.app, ws.workspace.id, 'Sam Rep', 'sam@acme.example')).sdr.id;
    nora = (await seedSdr(world.app, ws.workspace.id, 'Nora Next', 'nora@acme.example')).sdr.id;
    await seedSdr(world.app, ws.workspace.id, 'Olga Other', 'olga@acme.example');
    world.sink.users.set('nora@acme.example', 'pw');
    world.imap.addUser('nora@acme.example', 'pw');
    const c = await s.sdrs.connectMail(nora, { smtpUrl: world.sink.url('nora@acme.example', 'pw'), imapUrl: world.imap.url('nora@acme.example', 'pw') });
    assert.equal(c.mailbox.healthState, 'active');
    db = new pg.Client({ connectionString: world.app.databaseUrl });
    await db.connect();
    for (const [id, status] of [['thr_mv1', 'replied'], ['thr_mv2', 'needs_followup'], ['thr_mv3', 'archived']]) {
      await db.query(
        `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
         values ($1, $2, $3, $4, 'Pat', 'Re: hello', $5, 'B', 10, now(), now(), now())`,
        [id, ws.workspace.id, sam, `${id}@lead.example`, status],
      );
    }
    ctx = await world.context();
    u = await world.page(ctx);
    await u.signIn(ws.adminKey);
  });
  afterEach(async function () {
    if (this.currentTest?.state === 'failed') await u?.dump(`reassign ${this.currentTest.title}`);
  });
  after(async () => {
    await db?.end();
    await ctx?.close();
    await world.stop();
    console.log(`      ${axeSummary(axeFrom)}`);
  });

  it('offers only SDRs who can answer, asks once naming both and what moves, and says what it moved', async () => {
    const p = u.page;
    await u.nav('SDRs');
    const card = p.locator(`[data-sdr="${sam}"]`);
    await card.waitFor();
    assert.match(await card.innerText(), /open threads\s*2\b/);
    const toggle = card.getByRole('button', { name: 'Move threads of Sam Rep', exact: true });
    await toggle.click();
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    const form = card.getByRole('region', { name: 'Move threads of Sam Rep' });
    await form.waitFor();
    const choice = form.getByLabel('Move to');
    // Olga has no mailbox: she could not answer, so she is not offered.
    assert.deepEqual(await choice.locator('option').allInnerTexts(), ['Nora Next (nora@acme.example, 0 open)']);
    await u.check('SDRs, move threads');

    const move = form.getByRole('button', { name: 'Move 2 open threads of Sam Rep', exact: true });
    await move.click();
    const dialog = p.getByRole('dialog', { name: "Move Sam Rep's 2 open threads to Nora Next?" });
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /answers from nora@acme\.example/);
    assert.match(await dialog.innerText(), /open AI drafts are discarded/);
    await u.check('SDRs, move threads asks');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.deepEqual(await holders(), [{ sdr_id: sam, n: 3 }], 'Cancel moves nothing');

    await move.click();
    await dialog.getByRole('button', { name: 'Move threads', exact: true }).click();
    await form.getByRole('status').getByText('Moved 2 threads to Nora Next: 0 pending follow-ups moved with them, 0 open drafts discarded.').waitFor();
    await form.getByText('Sam Rep has no open threads to move.').waitFor();
    await waitFor('the focus on what happened', async () => (await p.evaluate(() => document.activeElement?.getAttribute('role'))) === 'status');
    await u.check('SDRs, threads moved');
    const rows = (await db.query(`select id, sdr_id from prospect_threads order by id`)).rows;
    assert.deepEqual(
      rows.map((r) => [r.id, r.sdr_id === nora ? 'nora' : 'sam']),
      [
        ['thr_mv1', 'nora'],
        ['thr_mv2', 'nora'],
        ['thr_mv3', 'sam'],
      ],
      'the open threads moved; the archived one stayed',
    );
    await waitFor("Nora's card counting the threads", async () => /open threads\s*2\b/.test(await p.locator(`[data-sdr="${nora}"]`).innerText()));
    assert.match(await card.innerText(), /open threads\s*0\b/);
  });

  it('says so when no other SDR can take the threads', async () => {
    const p = u.page;
    const card = p.locator(`[data-sdr="${nora}"]`);
    await card.getByRole('button', { name: 'Move threads of Nora Next', exact: true }).click();
    const form = card.getByRole('region', { name: 'Move threads of Nora Next' });
    await form.getByText('No other active SDR has a connected mailbox: add an SDR or connect a mailbox first (Connect mail), then move the threads.').waitFor();
    assert.equal(await form.getByRole('button', { name: /^Move \d+ open thread/ }).count(), 0);
    await u.check('SDRs, move threads without a target');
  });
});
