import assert from 'node:assert/strict';
import type { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { sendingWorld, HOUR, rawHeader } from '../sending/world.ts';
import type { TestApp } from '../support/harness.ts';
import pg from 'pg';

describe('tracking and unsubscribe links of sent messages', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  const { clock, setup, stats, to } = w;
  let app: TestApp, db: pg.Client, dispatcher: SendDispatcher;
  before(() => ({ app, db, dispatcher } = w));

  it('open tracking: a 1x1 GIF, first open counted once; a tampered token is 404', async () => {
    const t = await setup({ leads: [{ email: 'open@lead.example' }] });
    await dispatcher.runRound();
    const html = to('open@lead.example')[0].parsed.html as string;
    const path = /https:\/\/mg\.example\.com(\/t\/o\/[^"]+)"/.exec(html)![1];
    // Through the harness: its answers are checked against the OpenAPI document too.
    const first = await app.request('GET', path);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('content-type'), 'image/gif');
    assert.ok(Number(first.headers.get('content-length')) > 0);
    await app.request('GET', path);
    let s = await stats(t);
    assert.equal(s.opened, 1);
    assert.equal(s.openRate, 1);
    const tampered = path.slice(0, -2) + (path.endsWith('A') ? 'BB' : 'AA');
    const bad = await app.request('GET', tampered);
    assert.equal(bad.status, 404);
    assert.equal(bad.body.error.code, 'not_found');
    // A mail client loading images (Chromium's Accept for an <img>): the same GIF, still 404, no
    // broken-image icon in the message.
    const image = await app.request('GET', tampered, { headers: { accept: 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8' } });
    assert.equal(image.status, 404);
    assert.equal(image.headers.get('content-type'), 'image/gif');
    assert.equal(Number(image.headers.get('content-length')), Number(first.headers.get('content-length')));
    // Other spellings of the same valid token: junk or padding in the payload, a second dot.
    const [payload, mac] = path.slice('/t/o/'.length).split('.');
    for (const spelling of [`${payload}~~.${mac}`, `${payload.slice(0, 4)}*${payload.slice(4)}.${mac}`, `${payload}====.${mac}`, `${payload}.${mac}.anything`])
      assert.equal((await app.request('GET', `/t/o/${spelling}`)).status, 404, spelling);
    s = await stats(t);
    assert.equal(s.opened, 1);
  });

  it('unsubscribe: a confirmation page, one-click POST suppresses and ends enrollments; forged tokens 404', async () => {
    const t = await setup({
      leads: [{ email: 'unsub@lead.example' }],
      steps: [{ subject: 'a', bodyHtml: 'a' }, { subject: '', bodyHtml: 'b', delayHours: 1 }],
    });
    await dispatcher.runRound();
    const header = rawHeader(to('unsub@lead.example')[0].parsed, 'list-unsubscribe');
    const path = /https:\/\/mg\.example\.com(\/u\/[^>]+)>/.exec(header)![1];
    const pageRes = await app.request('GET', path);
    assert.equal(pageRes.status, 200);
    assert.match(pageRes.text, /unsub@lead\.example/);
    assert.equal((await stats(t)).scheduled, 1);
    const forgedPath = path.replace(/.$/, (c) => (c === 'x' ? 'y' : 'x'));
    const forged = await app.request('POST', forgedPath);
    assert.equal(forged.status, 404);
    assert.equal(forged.body.error.code, 'not_found');
    // A browser (HTML first) is told in a page what happened and what to do, not shown JSON.
    const browserAccept = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
    for (const method of ['GET', 'POST'] as const) {
      const seen = await app.request(method, forgedPath, { headers: { accept: browserAccept } });
      assert.equal(seen.status, 404, method);
      assert.match(seen.headers.get('content-type') ?? '', /^text\/html/, method);
      assert.match(seen.text, /This unsubscribe link is not valid/, method);
      assert.match(seen.text, /reply to one of them and ask to be removed/, method);
    }
    assert.equal((await stats(t)).unsubscribed, 0);
    const post = await app.request('POST', path, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, raw: 'List-Unsubscribe=One-Click' });
    assert.equal(post.status, 200);
    const s = await stats(t);
    assert.equal(s.unsubscribed, 1);
    assert.equal(s.scheduled, 0);
    const lead = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data[0];
    assert.equal(lead.status, 'unsubscribed');
    // The lead got step 0 only: the cancelled step 1 is not its current step.
    assert.deepEqual([lead.currentStep, lead.nextSendAt], [0, null]);
    assert.equal((await db.query(`select reason from suppressions where email_key = 'unsub@lead.example'`)).rows[0].reason, 'unsubscribe');
    clock.advance(2 * HOUR);
    await dispatcher.runRound();
    assert.equal(to('unsub@lead.example').length, 1);
    // The page again (the link in the body after the mail client's one-click): it says so, and asks nothing.
    const after = await app.request('GET', path);
    assert.equal(after.status, 200);
    assert.match(after.text, /You are unsubscribed/);
    assert.match(after.text, /unsub@lead\.example/);
    assert.doesNotMatch(after.text, /<form|Stop all emails/);
    // Again: idempotent.
    assert.equal((await app.request('POST', path)).status, 200);
    const asJson = await app.request('POST', path, { headers: { accept: 'application/json' } });
    assert.deepEqual([asJson.status, asJson.body], [200, { unsubscribed: true }]);
    assert.equal((await stats(t)).unsubscribed, 1);
  });
});
