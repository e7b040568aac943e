// The operator's pool operations in a real Chromium against a real `mailgate serve`: a pool's
// capacity changed from the senders page, and an account taken out of a pool, asked once
// (naming the account and what it changes), by keyboard. Every state is checked with axe-core,
// for console errors and for CSP violations.
import assert from 'node:assert/strict';
import type { BrowserContext } from 'playwright-core';
import { seedWorkspace } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { World, UserPage, activeElement, axeLog, axeSummary } from './env.ts';

describe('dashboard in Chromium: sender pools', function () {
  this.timeout(180_000);
  const world = new World();
  let axeFrom = 0;
  let ctx: BrowserContext;
  let u: UserPage;
  let key: string;
  let first: string;
  let second: string;
  let main: string;
  let spare: string;
  const pool = async (id: string) => (await world.app.request('GET', '/v1/sender-pools', { key })).body.find((p: { id: string }) => p.id === id);

  before(async () => {
    axeFrom = axeLog.length;
    await world.start();
    const ws = await seedWorkspace(world.app, 'Acme');
    key = ws.adminKey;
    const s = world.app.services();
    for (const email of ['first@acme.example', 'second@acme.example']) world.sink.users.set(email, 'pw');
    first = (await s.senders.add({ workspaceId: ws.workspace.id, email: 'first@acme.example', name: 'First', smtpUrl: world.sink.url('first@acme.example', 'pw') })).id;
    second = (await s.senders.add({ workspaceId: ws.workspace.id, email: 'second@acme.example', name: 'Second', smtpUrl: world.sink.url('second@acme.example', 'pw') })).id;
    main = (await s.senders.createPool(ws.workspace.id, 'Main', 300, [first, second])).id;
    spare = (await s.senders.createPool(ws.workspace.id, 'Spare', 50, [first])).id;
    ctx = await world.context();
    u = await world.page(ctx);
    await u.signIn(key);
  });
  afterEach(async function () {
    if (this.currentTest?.state === 'failed') await u?.dump(`pools ${this.currentTest.title}`);
  });
  after(async () => {
    await ctx?.close();
    await world.stop();
    console.log(`      ${axeSummary(axeFrom)}`);
  });

  it("changes a pool's capacity from the senders page; Cancel saves nothing", async () => {
    const p = u.page;
    await u.nav('Senders');
    const row = p.locator('tr[data-pool="Main"]');
    await row.getByText('300 / 300').waitFor();
    const toggle = row.getByRole('button', { name: 'Change capacity of Main' });
    await toggle.click();
    const input = p.getByLabel('Daily capacity of Main');
    assert.equal(await input.inputValue(), '300');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    await u.check('senders, change a pool capacity');
    await input.fill('7');
    await row.getByRole('button', { name: 'Cancel' }).click();
    await input.waitFor({ state: 'detached' });
    assert.equal((await pool(main)).dailyCapacity, 300, 'cancelled: nothing saved');

    await toggle.click();
    await input.fill('120');
    await p.keyboard.press('Enter');
    await row.getByText('120 / 120').waitFor();
    await input.waitFor({ state: 'detached' });
    assert.equal((await pool(main)).dailyCapacity, 120);
    assert.equal((await pool(spare)).dailyCapacity, 50, 'the other pool is unchanged');
    // The form is gone: the focus is back on the button that opened it, not on <body>.
    await waitFor('the focus back on the toggle', async () => (await activeElement(p)).label === 'Change capacity of Main');
    await u.check('senders, pool capacity changed');
  });

  it('takes an account out of a pool by keyboard, asked once, naming the account and what it changes; its other pool keeps it', async () => {
    const p = u.page;
    const row = p.locator('tr[data-pool="Main"]');
    const remove = row.getByRole('button', { name: 'Remove second@acme.example from Main' });
    await remove.focus();
    await p.keyboard.press('Enter');
    const dialog = p.getByRole('dialog', { name: 'Remove second@acme.example from Main?' });
    await dialog.waitFor();
    const words = await dialog.innerText();
    assert.match(words, /Main sends nothing more through second@acme\.example; messages it is sending now finish\./);
    assert.match(words, /Leads whose sequences second@acme\.example was sending get their next steps from the pool's other accounts, in the same thread\./);
    await u.check('senders, remove a member: the confirmation');
    await p.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.deepEqual((await pool(main)).senderAccountIds, [first, second], 'not confirmed: nothing changed');

    await remove.focus();
    await p.keyboard.press('Enter');
    await dialog.waitFor();
    assert.equal((await activeElement(p)).text, 'Remove from the pool', 'the dialog opens on its action');
    await p.keyboard.press('Enter');
    const result = 'second@acme.example was removed from Main.';
    await p.getByText(result).waitFor();
    // The row's button went with the member: the focus is on what happened, not on <body>.
    await waitFor('the focus on the result', async () => (await activeElement(p)).text === result);
    assert.deepEqual((await pool(main)).senderAccountIds, [first]);
    assert.deepEqual((await pool(spare)).senderAccountIds, [first]);
    assert.doesNotMatch(await row.locator('td').nth(2).innerText(), /second@acme\.example/);
    assert.equal(await row.getByRole('button', { name: 'Add to Main' }).count(), 1, 'it can be added back');
    await u.check('senders, member removed');

    // The last member: the confirmation says the pool's campaigns will wait.
    await p.locator('tr[data-pool="Spare"]').getByRole('button', { name: 'Remove first@acme.example from Spare' }).click();
    const last = p.getByRole('dialog', { name: 'Remove first@acme.example from Spare?' });
    await last.waitFor();
    assert.match(await last.innerText(), /It is the pool's only member: the pool's campaigns wait until another account is added\./);
    await last.getByRole('button', { name: 'Cancel' }).click();
    await last.waitFor({ state: 'hidden' });
    assert.deepEqual((await pool(spare)).senderAccountIds, [first]);
  });
});
