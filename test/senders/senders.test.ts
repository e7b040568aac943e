import assert from 'node:assert/strict';
import pg from 'pg';
import { tallyInsert } from '../../src/modules/messages/tallies.ts';
import { startTestApp, seedWorkspace, ManualClock, type TestApp } from '../support/harness.ts';

describe('GET /v1/sender-accounts and /v1/sender-pools', () => {
  let app: TestApp;
  const clock = new ManualClock('2026-03-02T12:00:00.000Z');
  before(async () => {
    app = await startTestApp({ clock });
  });
  after(async () => app.close());

  it('lists accounts without ever returning credentials', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const s = app.services();
    const a = await s.senders.add({ workspaceId: workspace.id, email: 'alice@send.example', name: 'Alice', smtpUrl: 'smtp://alice:s3cr3t!pw@127.0.0.1:2525', imapUrl: 'imap://alice:s3cr3t!pw@127.0.0.1:1143' });
    clock.advance(1000);
    const b = await s.senders.add({ workspaceId: workspace.id, email: 'bob@send.example', name: 'Bob', smtpUrl: 'smtps://bob:pw!2@127.0.0.1:465', dailyLimit: 50 });
    await s.senders.setStatus(b.id, 'paused');
    const res = await app.request('GET', '/v1/sender-accounts', { key: adminKey });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, [
      { id: a.id, email: 'alice@send.example', name: 'Alice', status: 'active', health: 'unknown', healthError: null, healthRetryAt: null, imapHealth: 'unknown', dailyLimit: null, minIntervalSeconds: 0, sentLast24h: 0, poolIds: [] },
      { id: b.id, email: 'bob@send.example', name: 'Bob', status: 'paused', health: 'unknown', healthError: null, healthRetryAt: null, imapHealth: null, dailyLimit: 50, minIntervalSeconds: 0, sentLast24h: 0, poolIds: [] },
    ]);
    // The secrets hold '!', which neither base32 ids nor base64url ciphertexts contain,
    // so a random id can never make these checks fail.
    assert.doesNotMatch(res.text, /s3cr3t!|pw!2|smtps?:\/\/|imap:\/\//);
    // Stored encrypted, not in clear.
    const c = new pg.Client({ connectionString: app.databaseUrl });
    await c.connect();
    const { rows } = await c.query('select smtp_url_enc, imap_url_enc from sender_accounts where id = $1', [a.id]);
    await c.end();
    assert.doesNotMatch(rows[0].smtp_url_enc + rows[0].imap_url_enc, /s3cr3t!|alice:|127\.0\.0\.1/);
    assert.equal(app.deps.crypto.decrypt(rows[0].smtp_url_enc), 'smtp://alice:s3cr3t!pw@127.0.0.1:2525');
    assert.doesNotMatch(app.logs.text, /s3cr3t!|pw!2/);
  });

  it('lists pools with both field names and a live rolling 24-hour remainingVolume', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const s = app.services();
    const a = await s.senders.add({ workspaceId: workspace.id, email: 'p1@send.example', name: 'P1', smtpUrl: 'smtp://u:p@127.0.0.1:2525' });
    const b = await s.senders.add({ workspaceId: workspace.id, email: 'p2@send.example', name: 'P2', smtpUrl: 'smtp://u:p@127.0.0.1:2525' });
    const pool = await s.senders.createPool(workspace.id, 'Main', 5, [a.id]);
    clock.advance(1000);
    await s.senders.addToPool(pool.id, b.id);
    await s.senders.addToPool(pool.id, b.id); // idempotent
    clock.advance(1000);
    const empty = await s.senders.createPool(workspace.id, 'Empty', 0);

    // Three messages went out through the pool: two inside the last 24 hours, one just outside.
    const c = new pg.Client({ connectionString: app.databaseUrl });
    await c.connect();
    const now = clock.now().getTime();
    await c.query(`insert into campaigns (id, workspace_id, name, created_at, updated_at) values ('cmp_t', $1, 'c', now(), now())`, [workspace.id]);
    await c.query(`insert into leads (id, workspace_id, email, email_key, created_at, updated_at) values ('lead_t', $1, 'l@x.example', 'l@x.example', now(), now())`, [workspace.id]);
    await c.query(`insert into enrollments (id, workspace_id, campaign_id, lead_id, created_at, updated_at) values ('enr_t', $1, 'cmp_t', 'lead_t', now(), now())`, [workspace.id]);
    const sentAt = [now - 60_000, now - 23 * 3_600_000, now - 24 * 3_600_000 - 1000];
    for (const [i, t] of sentAt.entries()) {
      await c.query(
        `insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, pool_id, sender_account_id, to_email, sent_at, created_at, updated_at)
         values ($1, $2, 'cmp_t', 'enr_t', 'lead_t', $3, 'sent', $4, $5, $6, 'l@x.example', $4, now(), now())`,
        [`msg_t${i}`, workspace.id, i, new Date(t), pool.id, a.id],
      );
    }
    // Written here, not sent: tallied as the senders' statements tally what they send.
    await c.query(tallyInsert(`select sent_at, 'test' as writer, workspace_id, pool_id, sender_account_id from outbound_messages where id like 'msg\\_t%'`));
    await c.end();

    const res = await app.request('GET', '/v1/sender-pools', { key: adminKey });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, [
      { id: pool.id, name: 'Main', dailyCapacity: 5, remainingVolume: 3, remainingToday: 3, senderAccountIds: [a.id, b.id], senderCount: 2 },
      { id: empty.id, name: 'Empty', dailyCapacity: 0, remainingVolume: 0, remainingToday: 0, senderAccountIds: [], senderCount: 0 },
    ]);
    // An hour later the oldest in-window message leaves the window.
    clock.advance(3_600_000);
    const later = await app.request('GET', '/v1/sender-pools', { key: adminKey });
    assert.equal(later.body[0].remainingVolume, 4);
  });

  it('rejects bad sender input with a message naming the field', async () => {
    const { workspace } = await seedWorkspace(app);
    const s = app.services();
    await assert.rejects(s.senders.add({ workspaceId: workspace.id, email: 'nope', name: 'N', smtpUrl: 'smtp://h' }), /email/);
    await assert.rejects(s.senders.add({ workspaceId: workspace.id, email: 'n@x.example', name: 'N', smtpUrl: 'http://h' }), /smtp: must start with smtp/);
    await assert.rejects(s.senders.add({ workspaceId: workspace.id, email: 'n@x.example', name: 'N', smtpUrl: 'smtp://h', imapUrl: 'imap:/' }), /imap/);
    await assert.rejects(s.senders.add({ workspaceId: workspace.id, email: 'n@x.example', name: 'N', smtpUrl: 'smtp://h', poolId: 'pool_nope' }), /pool/);
  });
});
