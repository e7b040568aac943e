// The flows the spec keeps out of the API (issue 17, docs/dashboard.md): creating and revoking
// API keys, removing a suppressed address, an SDR's mail connection tested live against real
// SMTP (smtp-server) and IMAP (Dovecot) servers. Served to dashboard sessions only: an API key
// is refused, and a refused request writes nothing.
import assert from 'node:assert/strict';
import pg from 'pg';
import { seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';
import { signIn } from '../support/dashboard.ts';
import { dashboardWorld } from './world.ts';
import { revokeApiKey } from '../../src/modules/workspaces/repository.ts';

describe('dashboard-only routes', function () {
  this.timeout(90_000);
  const w = dashboardWorld({ mailbox: { user: 'rep@acme.example', imapPass: 'imap-secret', smtpPass: 'smtp-secret' } });
  const { imap, smtp } = w;
  let app: TestApp;
  let db: pg.Client;
  before(() => ({ app, db } = w));

  /** Every table's rows, hashed: a refused request must leave it unchanged. */
  async function snapshot(): Promise<string> {
    const { rows } = await db.query<{ t: string }>(`select tablename as t from pg_tables where schemaname = 'public' and tablename not in ('api_keys') order by 1`);
    const parts: string[] = [];
    for (const { t } of rows) parts.push(`${t}:${(await db.query(`select coalesce(sum(hashtext(x::text)::bigint), 0)::text as h from "${t}" x`)).rows[0].h}`);
    const keys = (await db.query(`select coalesce(sum(hashtext(id || coalesce(revoked_at::text, '') || coalesce(name, ''))::bigint), 0)::text as h from api_keys`)).rows[0].h;
    return parts.join(',') + `,api_keys:${keys}`;
  }

  const server = (user: string, pass: string, port: number) => ({ host: '127.0.0.1', port, secure: false, user, pass });

  it('refuses an API key on every dashboard-only route with 403, and no credentials with 401, writing nothing', async () => {
    const { workspace, adminKey, adminKeyId } = await seedWorkspace(app);
    const { sdr, sdrKey } = await seedSdr(app, workspace.id);
    await app.services().suppression.add(workspace.id, ['gone@example.com'], 'manual', 'test');
    const routes: Array<[string, string, unknown?]> = [
      ['POST', '/dashboard/api/api-keys', { name: 'k', role: 'admin' }],
      ['POST', `/dashboard/api/api-keys/${adminKeyId}/revoke`],
      ['DELETE', '/dashboard/api/suppression-list/gone%40example.com'],
      ['POST', `/dashboard/api/sdrs/${sdr.id}/mail-connection`, { smtp: server('rep@acme.example', 'smtp-secret', smtp.port), imap: server('rep@acme.example', 'imap-secret', imap.port) }],
    ];
    const before = await snapshot();
    for (const [method, path, body] of routes) {
      for (const key of [adminKey, sdrKey]) {
        const res = await app.request(method, path, { key, body });
        assert.equal(res.status, 403, `${method} ${path} with a key: ${res.text}`);
        assert.equal(res.body.error.code, 'forbidden');
        assert.match(res.body.error.message, /dashboard sessions/);
      }
      const anonymous = await app.request(method, path, { body });
      assert.equal(anonymous.status, 401, `${method} ${path} without credentials`);
      // A key in the header beside a valid session cookie is still refused.
      const admin = await signIn(app, adminKey);
      const both = await admin.request(method, path, { body, headers: { authorization: `Bearer ${adminKey}` } });
      assert.equal(both.status, 403);
      const noCsrf = await admin.request(method, path, { body, csrf: false });
      assert.equal(noCsrf.status, 403);
      assert.equal(noCsrf.body.error.code, 'csrf_failed');
    }
    // Signing in wrote sessions; nothing else changed.
    await db.query('delete from dashboard_sessions');
    assert.equal(await snapshot(), before);
    assert.equal((await db.query('select count(*)::int as n from suppressions where workspace_id = $1', [workspace.id])).rows[0].n, 1);
  });

  it('creates an API key shown once, which then works; an SDR session cannot; bad input is a 400 or 404', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const { sdr, sdrKey } = await seedSdr(app, workspace.id);
    const admin = await signIn(app, adminKey);
    const created = await admin.request('POST', '/dashboard/api/api-keys', { body: { name: 'reporting', role: 'admin' } });
    assert.equal(created.status, 201, created.text);
    assert.match(created.body.key, /^mgk_/);
    assert.equal(created.body.keyPrefix, created.body.key.slice(0, 10));
    assert.equal(created.body.name, 'reporting');
    assert.equal((await app.request('GET', '/v1/campaigns', { key: created.body.key })).status, 200);
    const stored = await db.query('select key_hash from api_keys where id = $1', [created.body.id]);
    assert.notEqual(stored.rows[0].key_hash, created.body.key);
    assert.ok(!app.logs.text.includes(created.body.key), 'the key is never logged');

    const forSdr = await admin.request('POST', '/dashboard/api/api-keys', { body: { name: 'rep key', role: 'sdr', sdrId: sdr.id } });
    assert.equal(forSdr.status, 201);
    assert.equal(forSdr.body.sdrId, sdr.id);
    assert.equal((await app.request('GET', '/v1/sdr/inbox', { key: forSdr.body.key })).status, 200);

    const keysOf = async () => Number((await db.query('select count(*) from api_keys where workspace_id = $1', [workspace.id])).rows[0].count);
    const keysBefore = await keysOf();
    const bad: Array<[unknown, number, string]> = [
      [{ name: 'x', role: 'sdr' }, 400, 'invalid_request'],
      [{ name: 'x', role: 'admin', sdrId: sdr.id }, 400, 'invalid_request'],
      [{ name: '', role: 'admin' }, 400, 'invalid_request'],
      [{ name: 'x', role: 'owner' }, 400, 'invalid_request'],
      [{ name: 'x', role: 'admin', secret: 'mine' }, 400, 'invalid_request'],
      [{ name: 'x', role: 'sdr', sdrId: 'sdr_nope' }, 404, 'sdr_not_found'],
    ];
    for (const [body, status, code] of bad) {
      const res = await admin.request('POST', '/dashboard/api/api-keys', { body });
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, code);
    }
    const missingSdr = await admin.request('POST', '/dashboard/api/api-keys', { body: { name: 'x', role: 'sdr' } });
    assert.deepEqual(missingSdr.body.errors, [{ field: 'sdrId', message: 'is required for role sdr' }]);
    // An SDR of another workspace is not found from here.
    const other = await seedWorkspace(app);
    const foreign = await seedSdr(app, other.workspace.id);
    assert.equal((await admin.request('POST', '/dashboard/api/api-keys', { body: { name: 'x', role: 'sdr', sdrId: foreign.sdr.id } })).status, 404);
    const rep = await signIn(app, sdrKey);
    const refused = await rep.request('POST', '/dashboard/api/api-keys', { body: { name: 'x', role: 'admin' } });
    assert.equal(refused.status, 403);
    assert.equal(await keysOf(), keysBefore);
  });

  it('revokes a key of the workspace: its API calls and its dashboard sessions end; another workspace\u2019s key is not found', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const admin = await signIn(app, adminKey);
    const victim = await app.services().workspaces.createKey({ workspace: workspace.id, role: 'admin', name: 'old' });
    const victimSession = await signIn(app, victim.key);
    assert.equal((await victimSession.request('GET', '/v1/campaigns')).status, 200);
    const res = await admin.request('POST', `/dashboard/api/api-keys/${victim.id}/revoke`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, victim.id);
    assert.equal(res.body.revoked, true);
    assert.ok(Date.parse(res.body.revokedAt));
    assert.equal((await app.request('GET', '/v1/campaigns', { key: victim.key })).status, 401);
    assert.equal((await victimSession.request('GET', '/v1/campaigns')).status, 401);
    assert.equal((await db.query('select count(*)::int as n from dashboard_sessions where key_id = $1', [victim.id])).rows[0].n, 0);
    // Again: the first revocation time stays, also for a revoke that read the key before the
    // first one's write (two at once): the write itself keeps it.
    const again = await admin.request('POST', `/dashboard/api/api-keys/${victim.id}/revoke`);
    assert.equal(again.body.revokedAt, res.body.revokedAt);
    await revokeApiKey(app.deps.orm.em.fork(), victim.id, new Date(Date.now() + 60_000));
    assert.equal((await db.query('select revoked_at from api_keys where id = $1', [victim.id])).rows[0].revoked_at.toISOString(), res.body.revokedAt);

    const other = await seedWorkspace(app);
    const foreign = await admin.request('POST', `/dashboard/api/api-keys/${other.adminKeyId}/revoke`);
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error.code, 'key_not_found');
    assert.equal((await app.request('GET', '/v1/campaigns', { key: other.adminKey })).status, 200);
    assert.equal((await admin.request('POST', '/dashboard/api/api-keys/key_nope/revoke')).status, 404);
    // Revoking one's own key signs one out.
    const own = await admin.request('POST', `/dashboard/api/api-keys/${admin.body.keyId}/revoke`);
    assert.equal(own.status, 200);
    assert.equal((await admin.request('GET', '/dashboard/api/session')).status, 401);
  });

  it('removes a suppressed address (any case, percent-encoded); an unknown one is a 404', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const other = await seedWorkspace(app);
    const s = app.services();
    await s.suppression.add(workspace.id, ['Bounced.Lead+tag@Example.com', 'keep@example.com'], 'hard_bounce', 'msg_1');
    await s.suppression.add(other.workspace.id, ['bounced.lead+tag@example.com'], 'manual', 'api');
    const admin = await signIn(app, adminKey);
    const res = await admin.request('DELETE', `/dashboard/api/suppression-list/${encodeURIComponent('bounced.lead+TAG@example.COM')}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { removed: 1 });
    assert.equal(await s.suppression.isSuppressed(workspace.id, 'bounced.lead+tag@example.com'), false);
    assert.equal(await s.suppression.isSuppressed(workspace.id, 'keep@example.com'), true);
    assert.equal(await s.suppression.isSuppressed(other.workspace.id, 'bounced.lead+tag@example.com'), true);
    const again = await admin.request('DELETE', `/dashboard/api/suppression-list/${encodeURIComponent('bounced.lead+tag@example.com')}`);
    assert.equal(again.status, 404);
    assert.equal(again.body.error.code, 'suppression_not_found');
    const { sdrKey } = await seedSdr(app, workspace.id);
    const rep = await signIn(app, sdrKey);
    assert.equal((await rep.request('DELETE', '/dashboard/api/suppression-list/keep%40example.com')).status, 403);
    assert.equal(await s.suppression.isSuppressed(workspace.id, 'keep@example.com'), true);
  });

  it('connects an SDR mailbox tested live: a refused password or a closed port is a 422 in the server\u2019s words and saves nothing; then it connects', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const { sdr, sdrKey } = await seedSdr(app, workspace.id, 'Rep', 'rep@acme.example');
    const other = await seedSdr(app, workspace.id, 'Other', 'other@acme.example');
    const admin = await signIn(app, adminKey);
    const rep = await signIn(app, sdrKey);
    const path = `/dashboard/api/sdrs/${sdr.id}/mail-connection`;
    const good = { smtp: server('rep@acme.example', 'smtp-secret', smtp.port), imap: server('rep@acme.example', 'imap-secret', imap.port) };
    const before = await snapshot();

    const badSmtp = await admin.request('POST', path, { body: { ...good, smtp: server('rep@acme.example', 'wrong', smtp.port) } });
    assert.equal(badSmtp.status, 422, badSmtp.text);
    assert.equal(badSmtp.body.error.code, 'mail_probe_failed');
    assert.equal(badSmtp.body.probe.protocol, 'smtp');
    assert.equal(badSmtp.body.probe.kind, 'auth_failed');
    assert.match(badSmtp.body.probe.error, /535/);
    assert.match(badSmtp.body.error.message, /SMTP server refused .*nothing was saved/);

    const badImap = await rep.request('POST', path, { body: { ...good, imap: server('rep@acme.example', 'wrong', imap.port) } });
    assert.equal(badImap.status, 422, badImap.text);
    assert.equal(badImap.body.probe.protocol, 'imap');
    assert.equal(badImap.body.probe.kind, 'auth_failed');

    const closed = await admin.request('POST', path, { body: { ...good, imap: server('rep@acme.example', 'imap-secret', 1) } });
    assert.equal(closed.status, 422);
    assert.equal(closed.body.probe.kind, 'unreachable');

    const invalid: unknown[] = [
      { ...good, smtp: { ...good.smtp, port: 70000 } },
      { ...good, smtp: { ...good.smtp, host: 'bad host' } },
      { ...good, imap: undefined },
      { ...good, smtp: { ...good.smtp, password: 'x' } },
    ];
    for (const body of invalid) assert.equal((await admin.request('POST', path, { body })).status, 400, JSON.stringify(body));
    // An SDR session connects only its own mailbox; an unknown SDR is a 404.
    assert.equal((await rep.request('POST', `/dashboard/api/sdrs/${other.sdr.id}/mail-connection`, { body: good })).status, 403);
    assert.equal((await admin.request('POST', '/dashboard/api/sdrs/sdr_nope/mail-connection', { body: good })).status, 404);
    const afterRefusals = await snapshot();
    assert.equal(afterRefusals.replace(/dashboard_sessions:[^,]*,/, ''), before.replace(/dashboard_sessions:[^,]*,/, ''));
    assert.equal((await rep.request('GET', '/v1/sdr/mail/status')).body.data.healthState, 'disconnected');

    const ok = await rep.request('POST', path, { body: good });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual({ ...ok.body, lastSyncedAt: typeof ok.body.lastSyncedAt }, { id: sdr.id, mailConnected: true, mailEmail: 'rep@acme.example', healthState: 'active', lastSyncedAt: 'string' });
    const status = await rep.request('GET', '/v1/sdr/mail/status');
    assert.equal(status.body.data.connected, true);
    assert.equal(status.body.data.healthState, 'active');
    const listed = await rep.request('GET', '/v1/sdrs');
    assert.equal(listed.body.data.find((s: { id: string }) => s.id === sdr.id).mailConnected, true);
    // Credentials are stored encrypted, never in the clear or in the logs.
    const box = await db.query('select smtp_url_enc, imap_url_enc from sdr_mailboxes where sdr_id = $1', [sdr.id]);
    assert.ok(!box.rows[0].smtp_url_enc.includes('smtp-secret'));
    assert.equal(app.deps.crypto.decrypt(box.rows[0].imap_url_enc), `imap://rep%40acme.example:imap-secret@127.0.0.1:${imap.port}`);
    assert.ok(!app.logs.text.includes('smtp-secret') && !app.logs.text.includes('imap-secret'));

    // A failed reconnect leaves the working connection as it was.
    const failedReconnect = await admin.request('POST', path, { body: { ...good, smtp: server('rep@acme.example', 'changed', smtp.port) } });
    assert.equal(failedReconnect.status, 422);
    assert.equal((await rep.request('GET', '/v1/sdr/mail/status')).body.data.healthState, 'active');
  });
});
