import assert from 'node:assert/strict';
import pg from 'pg';
import type { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { sendingWorld, rawHeader } from '../sending/world.ts';
import type { TestApp } from '../support/harness.ts';
import { transaction, transactionRetries } from '../../src/db/transaction.ts';
import { lockEnrollment, endEnrollments } from '../../src/modules/messages/enrollments.ts';
import { bumpCounters } from '../../src/modules/messages/counters.ts';
import { suppress } from '../../src/modules/suppression/repository.ts';
import { waitFor } from '../support/wait.ts';

// The public links against the other writers of a lead (found by a review, 2026-11-29): the
// pixel and the one-click unsubscribe took their locks in another order than a reply, and a
// link scanner's HEAD counted as an open.
describe('tracking links: lock order, HEAD, the unsubscribe form', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  const { setup, stats, to } = w;
  let app: TestApp, dispatcher: SendDispatcher, db: pg.Client;
  before(() => ({ app, dispatcher, db } = w));

  const pixelOf = (email: string) => /https:\/\/mg\.example\.com(\/t\/o\/[^"]+)"/.exec(to(email)[0].parsed.html as string)![1];
  const unsubscribeOf = (email: string) => /https:\/\/mg\.example\.com(\/u\/[^>]+)>/.exec(rawHeader(to(email)[0].parsed, 'list-unsubscribe'))![1];
  const lockWait = async () => (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and pid <> pg_backend_pid()`)).rows.length > 0;

  it('an open while a reply of the same lead holds its enrollment: no deadlock, the open counts once', async () => {
    const t = await setup({ leads: [{ email: 'open-lock@lead.example' }] });
    await dispatcher.runRound();
    const { rows: [e] } = await db.query(`select id from enrollments where campaign_id = $1`, [t.campaignId]);
    const orm = app.deps.orm;
    const retries = transactionRetries(orm);
    let open!: Promise<Response>;
    // A reply's order (inbound/service.ts): the enrollment first, the counters last.
    await transaction(orm.em.fork(), async (tx) => {
      await lockEnrollment(tx, e.id);
      open ??= fetch(app.url + pixelOf('open-lock@lead.example'));
      await waitFor('the pixel waiting for a lock', lockWait);
      await bumpCounters(tx, t.campaignId, { replied: 1 });
    });
    assert.equal((await open).status, 200);
    assert.equal(transactionRetries(orm) - retries, 0, 'no deadlock, no transaction run again');
    assert.equal((await stats(t)).opened, 1);
  });

  it('a one-click unsubscribe while an unsubscribe reply of the same lead holds its enrollment: no deadlock', async () => {
    const t = await setup({ leads: [{ email: 'unsub-lock@lead.example' }], steps: [{ subject: 'a', bodyHtml: 'a' }, { subject: '', bodyHtml: 'b', delayHours: 1 }] });
    await dispatcher.runRound();
    const { rows: [e] } = await db.query(`select id from enrollments where campaign_id = $1`, [t.campaignId]);
    const orm = app.deps.orm;
    const retries = transactionRetries(orm);
    const counted = () => app.deps.metrics.text().then((m) => Number(/mailgate_unsubscribes_total\{source="link"\} (\d+)/.exec(m)?.[1] ?? 0));
    const linkBefore = await counted();
    let post!: Promise<Response>;
    const now = app.deps.clock.now();
    // An unsubscribe reply's order: the enrollment, then the suppression, then the end of the enrollment.
    await transaction(orm.em.fork(), async (tx) => {
      await lockEnrollment(tx, e.id);
      post ??= fetch(app.url + unsubscribeOf('unsub-lock@lead.example'), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'List-Unsubscribe=One-Click',
      });
      await waitFor('the unsubscribe waiting for a lock', lockWait);
      await suppress(tx, t.workspaceId, ['unsub-lock@lead.example'], 'reply_unsubscribe', null, now);
      await endEnrollments(tx, [e.id], 'unsubscribed', 'unsubscribed', now);
    });
    assert.equal((await post).status, 200);
    assert.equal(transactionRetries(orm) - retries, 0, 'no deadlock, no transaction run again');
    // The reply had done it all: the link changed nothing, so it is no new unsubscribe.
    assert.equal(await counted(), linkBefore);
    assert.equal((await db.query(`select reason from suppressions where email_key = 'unsub-lock@lead.example'`)).rows[0].reason, 'reply_unsubscribe');
  });

  it('a HEAD of the pixel (a link scanner) answers like a GET and records no open; an unknown token is 404 either way', async () => {
    const t = await setup({ leads: [{ email: 'head@lead.example' }] });
    await dispatcher.runRound();
    const path = pixelOf('head@lead.example');
    const head = await fetch(app.url + path, { method: 'HEAD' });
    assert.deepEqual([head.status, head.headers.get('content-type')], [200, 'image/gif']);
    assert.equal((await stats(t)).opened, 0);
    assert.equal((await fetch(app.url + path.replace(/.$/, (c) => (c === 'x' ? 'y' : 'x')), { method: 'HEAD' })).status, 404);
    assert.equal((await fetch(app.url + path)).status, 200);
    assert.equal((await stats(t)).opened, 1);
  });

  it("the unsubscribe page's form posts back to the page's own address (a public URL with a path)", async () => {
    await setup({ leads: [{ email: 'prefix@lead.example' }] });
    await dispatcher.runRound();
    const page = await app.request('GET', unsubscribeOf('prefix@lead.example'));
    assert.equal(page.status, 200);
    const form = /<form[^>]*>/.exec(page.text)![0];
    // Without an action a browser posts to the document's URL: https://proxy.example/mailgate/u/...
    // behind a proxy that serves mailgate under /mailgate, where "/u/..." would miss it.
    assert.equal(form, '<form method="post">');
  });
});
