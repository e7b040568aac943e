// Sender accounts and pools through /v1 (issue 17, docs/dashboard.md): the live probe against a
// real SMTP server (smtp-server) and Dovecot before an account is saved, pause/resume, the
// rolling 24-hour usage, pools and their members. A refused request writes nothing.
import assert from 'node:assert/strict';
import pg from 'pg';
import { seedSdr, seedWorkspace, type TestApp } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { signIn } from '../support/dashboard.ts';
import { tallyInsert } from '../../src/modules/messages/tallies.ts';
import { dashboardWorld } from './world.ts';

describe('dashboard /v1 senders and pools', function () {
  this.timeout(90_000);
  const w = dashboardWorld({ mailbox: { user: 'box@acme.example', imapPass: 'imap-pw', smtpPass: 'smtp-pw' } });
  const { imap, smtp } = w;
  let app: TestApp;
  let db: pg.Client;
  before(() => ({ app, db } = w));

  const smtpServer = (pass = 'smtp-pw', port = smtp.port) => ({ host: '127.0.0.1', port, secure: false, user: 'box@acme.example', pass });
  const imapServer = (pass = 'imap-pw', port = imap.port) => ({ host: '127.0.0.1', port, secure: false, user: 'box@acme.example', pass });
  const senders = async (ws: string) => Number((await db.query('select count(*)::int as n from sender_accounts where workspace_id = $1', [ws])).rows[0].n);

  it('probes servers without saving: each server\u2019s answer in its words', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const ok = await app.request('POST', '/v1/sender-accounts/probe', { key: adminKey, body: { smtp: smtpServer(), imap: imapServer() } });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { ok: true, smtp: { ok: true }, imap: { ok: true } });
    const smtpOnly = await app.request('POST', '/v1/sender-accounts/probe', { key: adminKey, body: { smtp: smtpServer() } });
    assert.deepEqual(smtpOnly.body, { ok: true, smtp: { ok: true }, imap: null });
    const bad = await app.request('POST', '/v1/sender-accounts/probe', { key: adminKey, body: { smtp: smtpServer('nope'), imap: imapServer('nope') } });
    assert.equal(bad.status, 200);
    assert.equal(bad.body.ok, false);
    assert.equal(bad.body.smtp.kind, 'auth_failed');
    assert.match(bad.body.smtp.error, /535/);
    assert.equal(bad.body.imap.kind, 'auth_failed');
    assert.match(bad.body.imap.error, /AUTHENTICATIONFAILED|Authentication failed|auth/i);
    assert.equal(await senders(workspace.id), 0);
  });

  it('adds an account only when its servers accept: 422 mail_probe_failed otherwise, nothing saved; duplicates, unknown pools and bad input refused', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const body = { email: 'box@acme.example', name: 'Box', smtp: smtpServer(), imap: imapServer(), dailyLimit: 200, minIntervalSeconds: 30 };
    const wrongSmtp = await app.request('POST', '/v1/sender-accounts', { key: adminKey, body: { ...body, smtp: smtpServer('wrong') } });
    assert.equal(wrongSmtp.status, 422, wrongSmtp.text);
    assert.equal(wrongSmtp.body.error.code, 'mail_probe_failed');
    assert.deepEqual([wrongSmtp.body.probe.protocol, wrongSmtp.body.probe.kind], ['smtp', 'auth_failed']);
    const wrongImap = await app.request('POST', '/v1/sender-accounts', { key: adminKey, body: { ...body, imap: imapServer('wrong') } });
    assert.equal(wrongImap.status, 422);
    assert.equal(wrongImap.body.probe.protocol, 'imap');
    const closed = await app.request('POST', '/v1/sender-accounts', { key: adminKey, body: { ...body, smtp: smtpServer('smtp-pw', 1) } });
    assert.equal(closed.status, 422);
    assert.equal(closed.body.probe.kind, 'unreachable');
    for (const b of [
      { ...body, email: 'not an address' },
      { ...body, smtp: { ...body.smtp, port: 0 } },
      { ...body, dailyLimit: 0 },
      { ...body, minIntervalSeconds: -1 },
      { ...body, smtpUrl: 'smtp://x' },
      { ...body, name: '' },
    ]) {
      const res = await app.request('POST', '/v1/sender-accounts', { key: adminKey, body: b });
      assert.equal(res.status, 400, `${JSON.stringify(b)}: ${res.text}`);
    }
    // Hosts that look like IPv6 but are not, or make no URL: 400 naming the host (they were 500s).
    for (const host of ['1:2', 'a:b', '[1:2]', '::::::::::', 'fe80::1%eth0', '[::1'])
      for (const path of ['/v1/sender-accounts', '/v1/sender-accounts/probe']) {
        const res = await app.request('POST', path, { key: adminKey, body: { ...(path.endsWith('probe') ? {} : body), smtp: { ...body.smtp, host } } });
        assert.equal(res.status, 400, `${path} ${host}: ${res.text}`);
        assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), ['smtp.host'], `${path} ${host}`);
      }
    const noPool = await app.request('POST', '/v1/sender-accounts', { key: adminKey, body: { ...body, poolId: 'pool_nope' } });
    assert.equal(noPool.status, 404);
    assert.equal(noPool.body.error.code, 'sender_pool_not_found');
    assert.equal(await senders(workspace.id), 0);
    assert.equal(Number((await db.query('select count(*)::int as n from mailbox_watches where workspace_id = $1', [workspace.id])).rows[0].n), 0);

    const pool = await app.services().senders.createPool(workspace.id, 'main', 500);
    const admin = await signIn(app, adminKey);
    const added = await admin.request('POST', '/v1/sender-accounts', { body: { ...body, poolId: pool.id } });
    assert.equal(added.status, 200, added.text);
    assert.equal(added.body.email, 'box@acme.example');
    assert.equal(added.body.status, 'active');
    assert.equal(added.body.dailyLimit, 200);
    assert.equal(added.body.minIntervalSeconds, 30);
    assert.equal(added.body.imapHealth, 'unknown');
    assert.equal(added.body.sentLast24h, 0);
    assert.deepEqual(added.body.poolIds, [pool.id]);
    assert.ok(!added.text.includes('smtp-pw'));
    const row = (await db.query('select smtp_url_enc, min_interval_ms from sender_accounts where id = $1', [added.body.id])).rows[0];
    assert.equal(app.deps.crypto.decrypt(row.smtp_url_enc), `smtp://box%40acme.example:smtp-pw@127.0.0.1:${smtp.port}`);
    assert.equal(Number(row.min_interval_ms), 30_000);
    assert.ok(!app.logs.text.includes('smtp-pw') && !app.logs.text.includes('imap-pw'));
    const again = await app.request('POST', '/v1/sender-accounts', { key: adminKey, body: { ...body, email: 'BOX@acme.example' } });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'already_exists');
    assert.equal(await senders(workspace.id), 1);
  });

  it('pauses and resumes an account of the workspace, lists rolling 24-hour usage; pools are created and grow', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const s = app.services();
    const a = await s.senders.add({ workspaceId: workspace.id, email: 'a@acme.example', name: 'A', smtpUrl: smtp.url() });
    const b = await s.senders.add({ workspaceId: workspace.id, email: 'b@acme.example', name: 'B', smtpUrl: smtp.url(), dailyLimit: 50 });
    await db.query(`update sender_accounts set health = 'auth_failed', health_error = '535 no' where id = $1`, [b.id]);

    const paused = await app.request('POST', `/v1/sender-accounts/${a.id}/pause`, { key: adminKey });
    assert.equal(paused.status, 200, paused.text);
    assert.equal(paused.body.status, 'paused');
    assert.equal((await app.request('POST', `/v1/sender-accounts/${a.id}/pause`, { key: adminKey })).body.status, 'paused');
    const resumed = await app.request('POST', `/v1/sender-accounts/${b.id}/resume`, { key: adminKey });
    assert.equal(resumed.body.status, 'active');
    assert.equal(resumed.body.health, 'unknown', 'resume clears the auth failure');

    const other = await seedWorkspace(app);
    const foreign = await app.request('POST', `/v1/sender-accounts/${a.id}/resume`, { key: other.adminKey });
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error.code, 'sender_account_not_found');
    assert.equal((await app.request('GET', '/v1/sender-accounts', { key: adminKey })).body.find((x: { id: string }) => x.id === a.id).status, 'paused');

    // Pools: created with members, grown by one, another workspace's ids refused.
    const created = await app.request('POST', '/v1/sender-pools', { key: adminKey, body: { name: 'EU', dailyCapacity: 300, senderAccountIds: [a.id] } });
    assert.equal(created.status, 200, created.text);
    assert.deepEqual([created.body.name, created.body.dailyCapacity, created.body.remainingVolume, created.body.senderAccountIds], ['EU', 300, 300, [a.id]]);
    const grown = await app.request('POST', `/v1/sender-pools/${created.body.id}/members`, { key: adminKey, body: { senderAccountId: b.id } });
    assert.equal(grown.status, 200);
    assert.deepEqual(grown.body.senderAccountIds, [a.id, b.id]);
    assert.equal(grown.body.senderCount, 2);
    const twice = await app.request('POST', `/v1/sender-pools/${created.body.id}/members`, { key: adminKey, body: { senderAccountId: b.id } });
    assert.deepEqual(twice.body.senderAccountIds, [a.id, b.id]);
    // The same member added by many requests at once: each is a no-op but the first, none a 500.
    const c = await s.senders.add({ workspaceId: workspace.id, email: 'c@acme.example', name: 'C', smtpUrl: smtp.url() });
    const together = await Promise.all(
      Array.from({ length: 12 }, () => app.request('POST', `/v1/sender-pools/${created.body.id}/members`, { key: adminKey, body: { senderAccountId: c.id } })),
    );
    for (const t of together) assert.equal(t.status, 200, t.text);
    assert.equal((await db.query('select count(*)::int as n from pool_members where pool_id = $1', [created.body.id])).rows[0].n, 3);
    // Members given at creation are listed in the order given, not by id; so are an account's pools.
    const given = [c.id, a.id].sort().reverse();
    const ordered = await app.request('POST', '/v1/sender-pools', { key: adminKey, body: { name: 'ordered', dailyCapacity: 10, senderAccountIds: given } });
    assert.equal(ordered.status, 200, ordered.text);
    assert.deepEqual(ordered.body.senderAccountIds, given);
    const listed = (await app.request('GET', '/v1/sender-pools', { key: adminKey })).body.find((p: { id: string }) => p.id === ordered.body.id);
    assert.deepEqual(listed.senderAccountIds, given);
    const pools = async () => Number((await db.query('select count(*)::int as n from sender_pools where workspace_id = $1', [workspace.id])).rows[0].n);
    const before = await pools();
    const otherSender = await s.senders.add({ workspaceId: other.workspace.id, email: 'x@other.example', name: 'X', smtpUrl: smtp.url() });
    const mixed = await app.request('POST', '/v1/sender-pools', { key: adminKey, body: { name: 'mixed', dailyCapacity: 10, senderAccountIds: [a.id, otherSender.id] } });
    assert.equal(mixed.status, 404);
    assert.equal(mixed.body.error.code, 'sender_account_not_found');
    assert.equal(await pools(), before, 'a refused pool leaves nothing behind');
    assert.equal((await app.request('POST', `/v1/sender-pools/${created.body.id}/members`, { key: adminKey, body: { senderAccountId: otherSender.id } })).status, 404);
    assert.equal((await app.request('POST', `/v1/sender-pools/${created.body.id}/members`, { key: other.adminKey, body: { senderAccountId: otherSender.id } })).body.error.code, 'sender_pool_not_found');
    for (const bad of [{ name: 'x', dailyCapacity: -1 }, { name: 'x' }, { name: 'x', dailyCapacity: 1.5 }, { name: ' ', dailyCapacity: 1 }]) {
      assert.equal((await app.request('POST', '/v1/sender-pools', { key: adminKey, body: bad })).status, 400, JSON.stringify(bad));
    }

    // Rolling 24-hour usage: two messages sent from B in the window, one before it.
    const campaign = await s.campaigns.create(workspace.id, { name: 'c', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>x</p>' }, { subject: '', bodyHtml: '<p>y</p>' }, { subject: '', bodyHtml: '<p>z</p>' }] });
    await s.campaigns.enroll(workspace.id, campaign.id, [{ email: 'lead@x.example' }]);
    const { rows: [e] } = await db.query('select id, lead_id from enrollments where campaign_id = $1', [campaign.id]);
    for (const [step, hoursAgo] of [[0, 30], [1, 5], [2, 1]] as const)
      await db.query(
        `insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, sender_account_id, sent_at, created_at, updated_at)
         values ($1, $2, $3, $4, $5, $6, 'sent', now(), 'lead@x.example', $7, now() - make_interval(hours => $8), now(), now())`,
        [`msg_u${step}_${b.id}`, workspace.id, campaign.id, e.id, e.lead_id, step, b.id, hoursAgo],
      );
    // Written here, not sent: tallied as the senders' statements tally what they send.
    await db.query(tallyInsert(`select sent_at, 'test' as writer, workspace_id, pool_id, sender_account_id from outbound_messages where id like 'msg\\_u%'`));
    const list = await app.request('GET', '/v1/sender-accounts', { key: adminKey });
    const byId = new Map(list.body.map((x: any) => [x.id, x]));
    assert.equal((byId.get(b.id) as any).sentLast24h, 2);
    assert.equal((byId.get(a.id) as any).sentLast24h, 0);
    assert.deepEqual((byId.get(b.id) as any).poolIds, [created.body.id]);
    assert.deepEqual((byId.get(a.id) as any).poolIds, [created.body.id, ordered.body.id], 'in the order the account joined them');
  });

  it('takes an account out of a pool: a no-op when it is not a member; other workspaces\u2019 ids, SDR keys and bad ids refused, writing nothing; it waits for a claim of the pool in progress', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const s = app.services();
    const a = await s.senders.add({ workspaceId: workspace.id, email: 'a@acme.example', name: 'A', smtpUrl: smtp.url() });
    const b = await s.senders.add({ workspaceId: workspace.id, email: 'b@acme.example', name: 'B', smtpUrl: smtp.url() });
    const main = await s.senders.createPool(workspace.id, 'Main', 100, [a.id, b.id]);
    const spare = await s.senders.createPool(workspace.id, 'Spare', 50, [a.id]);
    const members = async (poolId: string) => (await db.query('select sender_account_id from pool_members where pool_id = $1 order by seq', [poolId])).rows.map((r) => r.sender_account_id);
    const path = (poolId: string, senderId: string) => `/v1/sender-pools/${poolId}/members/${senderId}`;

    const other = await seedWorkspace(app);
    const otherSender = await s.senders.add({ workspaceId: other.workspace.id, email: 'x@other.example', name: 'X', smtpUrl: smtp.url() });
    const otherPool = await s.senders.createPool(other.workspace.id, 'Theirs', 10, [otherSender.id]);
    const { sdrKey } = await seedSdr(app, workspace.id);
    for (const [key, p, code] of [
      [adminKey, path(main.id, otherSender.id), 'sender_account_not_found'],
      [adminKey, path(main.id, 'snd_nope'), 'sender_account_not_found'],
      [adminKey, path(otherPool.id, otherSender.id), 'sender_pool_not_found'],
      [adminKey, path('pool_nope', a.id), 'sender_pool_not_found'],
      [other.adminKey, path(main.id, a.id), 'sender_pool_not_found'],
      [sdrKey, path(main.id, a.id), 'forbidden'],
    ] as const) {
      const res = await app.request('DELETE', p, { key });
      assert.equal(res.body.error?.code, code, `${p}: ${res.text}`);
    }
    assert.equal((await app.request('DELETE', path(main.id, a.id), { key: adminKey, body: { senderAccountId: a.id } })).status, 400, 'it takes no body');
    assert.deepEqual([await members(main.id), await members(otherPool.id)], [[a.id, b.id], [otherSender.id]], 'a refused removal writes nothing');

    // A claim of the pool holds its row (messages/claim.ts lockPool) while it decides on the
    // members it read: this transaction stands in for one. The removal waits for its commit.
    await db.query('begin');
    let removal: Promise<{ status: number; text: string; body: any }> | undefined;
    try {
      await db.query('select 1 from sender_pools where id = $1 for no key update', [main.id]);
      const me = (await db.query('select pg_backend_pid() as pid')).rows[0].pid;
      let answered = false;
      removal = app.request('DELETE', path(main.id, a.id), { key: adminKey }).finally(() => (answered = true));
      await waitFor('the removal to wait for the claim, or to answer', async () => answered || (await db.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [me])).rows.length > 0);
      assert.equal(answered, false, 'the removal answered while a claim of the pool was deciding');
      assert.deepEqual(await members(main.id), [a.id, b.id]);
    } finally {
      await db.query('commit');
    }
    const removed = await removal!;
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual([removed.body.senderAccountIds, removed.body.senderCount, removed.body.remainingVolume], [[b.id], 1, 100]);
    assert.deepEqual([await members(main.id), await members(spare.id)], [[b.id], [a.id]], 'its other pools keep it');
    const twice = await app.request('DELETE', path(main.id, a.id), { key: adminKey });
    assert.deepEqual([twice.status, twice.body.senderAccountIds], [200, [b.id]], 'not a member: a no-op');
    const account = (await app.request('GET', '/v1/sender-accounts', { key: adminKey })).body.find((x: { id: string }) => x.id === a.id);
    assert.deepEqual([account.status, account.poolIds], ['active', [spare.id]]);
  });

  it('rotates an account\u2019s SMTP password: the new settings are probed first, a refusal changes nothing; saved, the auth failure is cleared', async () => {
    // An account whose password changed at its provider stayed auth_failed for good: no route
    // or command changed its SMTP URL, and adding it again was 409 already_exists (found by a
    // review, 2026-11-29).
    const { workspace, adminKey } = await seedWorkspace(app);
    const a = await app.services().senders.add({
      workspaceId: workspace.id,
      email: 'box@acme.example',
      name: 'Box',
      smtpUrl: `smtp://box%40acme.example:old-pw@127.0.0.1:${smtp.port}`,
      dailyLimit: 5,
    });
    await db.query(`update sender_accounts set health = 'auth_failed', health_error = '535 no' where id = $1`, [a.id]);
    const row = async () => (await db.query('select smtp_url_enc, health, daily_limit from sender_accounts where id = $1', [a.id])).rows[0];
    const before = await row();
    const refused = await app.request('PATCH', `/v1/sender-accounts/${a.id}`, { key: adminKey, body: { smtp: smtpServer('still-wrong'), dailyLimit: 9 } });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.error.code, 'mail_probe_failed');
    assert.deepEqual(await row(), before, 'a refused change writes nothing');
    for (const body of [{ smtp: { ...smtpServer(), port: 0 } }, { smtp: { ...smtpServer(), host: '1:2' } }, { smtpUrl: 'smtp://x' }]) {
      const res = await app.request('PATCH', `/v1/sender-accounts/${a.id}`, { key: adminKey, body });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
    }
    const other = await seedWorkspace(app);
    const foreign = await app.request('PATCH', `/v1/sender-accounts/${a.id}`, { key: other.adminKey, body: { smtp: smtpServer() } });
    assert.deepEqual([foreign.status, foreign.body.error.code], [404, 'sender_account_not_found']);
    assert.deepEqual(await row(), before);

    const rotated = await app.request('PATCH', `/v1/sender-accounts/${a.id}`, { key: adminKey, body: { smtp: smtpServer() } });
    assert.equal(rotated.status, 200, rotated.text);
    assert.deepEqual([rotated.body.health, rotated.body.healthError, rotated.body.dailyLimit], ['unknown', null, 5]);
    assert.ok(!rotated.text.includes('smtp-pw'));
    assert.equal(app.deps.crypto.decrypt((await row()).smtp_url_enc), `smtp://box%40acme.example:smtp-pw@127.0.0.1:${smtp.port}`);
    assert.ok(!app.logs.text.includes('smtp-pw'));
  });
});
