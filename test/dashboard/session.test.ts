// Dashboard sessions (issue 17, docs/dashboard.md): sign-in with an API key, the HttpOnly
// SameSite=Strict cookie, CSRF on every state-changing request, the cookie authenticating /v1
// with its key's role, idle expiry, the end of a session with its key or workspace, sign-out.
import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, ManualClock, type TestApp } from '../support/harness.ts';
import { signIn, session, cookieOf } from '../support/dashboard.ts';

describe('dashboard sessions', function () {
  this.timeout(60_000);
  let app: TestApp;
  let db: pg.Client;
  const clock = new ManualClock('2026-03-02T10:00:00.000Z');

  before(async () => {
    app = await startTestApp({ clock, config: { dashboardSessionIdle: '2h' } });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await app.close();
  });

  const count = async (table: string) => Number((await db.query(`select count(*)::int as n from ${table}`)).rows[0].n);

  it('sign-in answers the session and sets an HttpOnly, SameSite=Strict cookie (Secure over HTTPS); only a hash is stored', async () => {
    const { workspace, adminKey, adminKeyId } = await seedWorkspace(app);
    const res = await app.request('POST', '/dashboard/api/session', { body: { apiKey: adminKey } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.body).sort(), ['csrfToken', 'idleTimeoutSeconds', 'keyId', 'role', 'sdrId', 'workspaceId', 'workspaceName']);
    assert.equal(res.body.role, 'admin');
    assert.equal(res.body.workspaceId, workspace.id);
    assert.equal(res.body.workspaceName, workspace.name);
    assert.equal(res.body.keyId, adminKeyId);
    assert.equal(res.body.sdrId, null);
    assert.equal(res.body.idleTimeoutSeconds, 7200);
    const setCookie = res.headers.getSetCookie().find((c) => c.startsWith('mailgate_session='))!;
    assert.match(setCookie, /; path=\//i);
    assert.match(setCookie, /; httponly/i);
    assert.match(setCookie, /; samesite=strict/i);
    assert.doesNotMatch(setCookie, /; secure/i);
    const token = cookieOf(res)!.split('=')[1];
    const { rows } = await db.query('select token_hash from dashboard_sessions where key_id = $1', [adminKeyId]);
    assert.equal(rows.length, 1);
    assert.notEqual(rows[0].token_hash, token);
    assert.equal((await db.query('select count(*)::int as n from dashboard_sessions where token_hash = $1', [token])).rows[0].n, 0);

    const overTls = await app.request('POST', '/dashboard/api/session', { body: { apiKey: adminKey }, headers: { 'x-forwarded-proto': 'https' } });
    assert.equal(overTls.status, 200);
    assert.match(overTls.headers.getSetCookie()[0], /; secure/i);
    // The dashboard's security headers are on its API answers too.
    assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  });

  it('a bad, revoked or homeless key, an inactive SDR and a bad body are refused, and no session is stored', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const { sdr, sdrKey } = await seedSdr(app, workspace.id);
    const before = await count('dashboard_sessions');
    const cases: Array<[unknown, number, string]> = [
      [{ apiKey: 'mgk_nope' }, 401, 'authentication_failed'],
      [{ apiKey: '' }, 400, 'invalid_request'],
      [{}, 400, 'invalid_request'],
      [{ apiKey: adminKey, extra: 1 }, 400, 'invalid_request'],
      [{ apiKey: 42 }, 400, 'invalid_request'],
    ];
    for (const [body, status, code] of cases) {
      const res = await app.request('POST', '/dashboard/api/session', { body });
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, code);
    }
    await app.services().sdrs.setActive(sdr.id, false);
    const inactive = await app.request('POST', '/dashboard/api/session', { body: { apiKey: sdrKey } });
    assert.equal(inactive.status, 403);
    assert.equal(inactive.body.error.code, 'forbidden');

    const other = await seedWorkspace(app);
    const revokedKey = await app.services().workspaces.createKey({ workspace: other.workspace.id, role: 'admin' });
    await app.services().workspaces.revokeKey(revokedKey.id);
    const revoked = await app.request('POST', '/dashboard/api/session', { body: { apiKey: revokedKey.key } });
    assert.equal(revoked.status, 401);
    await app.services().workspaces.delete(other.workspace.id);
    const homeless = await app.request('POST', '/dashboard/api/session', { body: { apiKey: other.adminKey } });
    assert.equal(homeless.status, 404);
    assert.equal(homeless.body.error.code, 'workspace_not_found');
    // A sign-in posted from another origin (a login CSRF) is refused.
    const crossSite = await app.request('POST', '/dashboard/api/session', { body: { apiKey: adminKey }, headers: { origin: 'https://evil.example' } });
    assert.equal(crossSite.status, 403);
    assert.equal(crossSite.body.error.code, 'csrf_failed');
    assert.equal(await count('dashboard_sessions'), before);
  });

  it('the cookie authenticates /v1 with its key\u2019s role; writes need the CSRF token and the same origin; refusals write nothing', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const admin = await signIn(app, adminKey);
    const got = await admin.request('GET', '/dashboard/api/session');
    assert.equal(got.status, 200);
    assert.equal(got.body.csrfToken, admin.csrf);

    assert.equal((await admin.request('GET', '/v1/campaigns')).status, 200);
    const campaigns = async () => Number((await db.query('select count(*)::int as n from campaigns where workspace_id = $1', [workspace.id])).rows[0].n);
    const noToken = await admin.request('POST', '/v1/campaigns', { body: { name: 'c1' }, csrf: false });
    assert.equal(noToken.status, 403);
    assert.equal(noToken.body.error.code, 'csrf_failed');
    const wrongToken = await admin.request('POST', '/v1/campaigns', { body: { name: 'c1' }, csrf: admin.csrf.slice(0, -2) + 'xx' });
    assert.equal(wrongToken.status, 403);
    assert.equal(wrongToken.body.error.code, 'csrf_failed');
    // Another session's token does not fit this one.
    const second = await signIn(app, adminKey);
    assert.notEqual(second.csrf, admin.csrf);
    assert.equal((await admin.request('POST', '/v1/campaigns', { body: { name: 'c1' }, csrf: second.csrf })).status, 403);
    const crossOrigin = await admin.request('POST', '/v1/campaigns', { body: { name: 'c1' }, headers: { origin: 'https://evil.example' } });
    assert.equal(crossOrigin.status, 403);
    assert.equal(crossOrigin.body.error.code, 'csrf_failed');
    assert.equal(await campaigns(), 0);
    const created = await admin.request('POST', '/v1/campaigns', { body: { name: 'c1' }, headers: { origin: app.url } });
    assert.equal(created.status, 201, created.text);
    assert.equal(await campaigns(), 1);

    // An SDR session has an SDR key's rights.
    const { sdrKey, sdr } = await seedSdr(app, workspace.id);
    const rep = await signIn(app, sdrKey);
    assert.equal(rep.body.role, 'sdr');
    assert.equal(rep.body.sdrId, sdr.id);
    assert.equal((await rep.request('GET', '/v1/sdr/inbox')).status, 200);
    const adminOnly = await rep.request('GET', '/v1/campaigns');
    assert.equal(adminOnly.status, 403);
    assert.equal(adminOnly.body.error.code, 'forbidden');
    assert.equal((await admin.request('GET', '/v1/sdr/inbox')).status, 403);

    // With an Authorization header the header decides: the SDR's key with the admin's cookie.
    const both = await app.request('GET', '/v1/campaigns', { key: sdrKey, headers: { cookie: admin.cookie } });
    assert.equal(both.status, 403);
    // A forged or unknown cookie is no session.
    const forged = session(app, 'mailgate_session=' + 'A'.repeat(43), admin.csrf);
    assert.equal((await forged.request('GET', '/v1/campaigns')).status, 401);
    assert.equal((await forged.request('GET', '/dashboard/api/session')).status, 401);
  });

  it('with the shortest idle time (1m) a session in use lives on: its use is recorded often enough', async () => {
    const shortClock = new ManualClock('2026-03-02T10:00:00.000Z');
    const short = await startTestApp({ clock: shortClock, config: { dashboardSessionIdle: '1m' } });
    try {
      const { adminKey } = await seedWorkspace(short);
      const s = await signIn(short, adminKey);
      for (let i = 0; i < 4; i++) {
        shortClock.advance(40_000);
        assert.equal((await s.request('GET', '/v1/campaigns')).status, 200, `use ${i + 1}, ${(i + 1) * 40} s after sign-in`);
      }
      shortClock.advance(61_000);
      assert.equal((await s.request('GET', '/v1/campaigns')).status, 401);
    } finally {
      await short.close();
    }
  });

  it('a session ends after the idle time, when its key is revoked, and when its workspace is deleted', async () => {
    const { workspace, adminKey, adminKeyId } = await seedWorkspace(app);
    const a = await signIn(app, adminKey);
    // Used within the idle time, it lives on: each use moves its idle deadline.
    clock.advance(90 * 60_000);
    assert.equal((await a.request('GET', '/v1/campaigns')).status, 200);
    clock.advance(90 * 60_000);
    assert.equal((await a.request('GET', '/v1/campaigns')).status, 200);
    clock.advance(2 * 3_600_000 + 1_000);
    const idle = await a.request('GET', '/v1/campaigns');
    assert.equal(idle.status, 401);
    assert.match(idle.body.error.message, /expired/);
    assert.equal((await a.request('GET', '/dashboard/api/session')).status, 401);
    // A failed request leaves the session's last use as it was (a refused request writes nothing).
    const b = await signIn(app, adminKey);
    const seen = async () => (await db.query('select last_seen_at from dashboard_sessions where key_id = $1 order by created_at desc limit 1', [adminKeyId])).rows[0].last_seen_at.getTime();
    const firstSeen = await seen();
    clock.advance(5 * 60_000);
    assert.equal((await b.request('POST', '/v1/campaigns', { body: { name: '' } })).status, 400);
    assert.equal(await seen(), firstSeen);
    assert.equal((await b.request('GET', '/v1/campaigns')).status, 200);
    assert.equal(await seen(), clock.now().getTime());

    await app.services().workspaces.revokeKey(adminKeyId);
    const revoked = await b.request('GET', '/v1/campaigns');
    assert.equal(revoked.status, 401);
    assert.match(revoked.body.error.message, /revoked/);

    const other = await seedWorkspace(app);
    const c = await signIn(app, other.adminKey);
    assert.equal((await c.request('GET', '/v1/campaigns')).status, 200);
    await app.services().workspaces.delete(other.workspace.id);
    assert.equal((await c.request('GET', '/v1/campaigns')).status, 401);
    assert.equal(Number((await db.query('select count(*)::int as n from dashboard_sessions where workspace_id = $1', [other.workspace.id])).rows[0].n), 0);
    assert.ok(workspace.id);
  });

  it('signing in again from a browser ends the session its cookie held; a refused sign-in ends nothing', async () => {
    const { adminKey } = await seedWorkspace(app);
    const { sdrKey } = await seedSdr(app, (await seedWorkspace(app)).workspace.id);
    const first = await signIn(app, adminKey);
    const sessions = async () => count('dashboard_sessions');
    const before = await sessions();
    // A refused sign-in (unknown key) with the cookie: the session the cookie holds still works.
    const refused = await app.request('POST', '/dashboard/api/session', { body: { apiKey: 'mgk_unknown' }, headers: { cookie: first.cookie } });
    assert.equal(refused.status, 401);
    assert.equal((await first.request('GET', '/v1/campaigns')).status, 200);
    assert.equal(await sessions(), before);
    // Signing in again (here with another workspace's SDR key) replaces it: one session, not two.
    const second = await signIn(app, sdrKey, { cookie: first.cookie });
    assert.equal(second.body.role, 'sdr');
    assert.equal((await first.request('GET', '/v1/campaigns')).status, 401);
    assert.equal((await second.request('GET', '/dashboard/api/session')).status, 200);
    assert.equal(await sessions(), before);
  });

  it('sign-out needs the CSRF token, ends the session and clears the cookie', async () => {
    const { adminKey } = await seedWorkspace(app);
    const s = await signIn(app, adminKey);
    const refused = await s.request('DELETE', '/dashboard/api/session', { csrf: false });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'csrf_failed');
    assert.equal((await s.request('GET', '/dashboard/api/session')).status, 200);
    const out = await s.request('DELETE', '/dashboard/api/session');
    assert.equal(out.status, 204);
    const cleared = out.headers.getSetCookie().find((c) => c.startsWith('mailgate_session='))!;
    assert.match(cleared, /^mailgate_session=;/);
    assert.match(cleared, /expires=Thu, 01 Jan 1970/i);
    assert.equal((await s.request('GET', '/dashboard/api/session')).status, 401);
    assert.equal((await s.request('GET', '/v1/campaigns')).status, 401);
    assert.equal((await app.request('GET', '/dashboard/api/session')).status, 401);
    assert.equal((await app.request('DELETE', '/dashboard/api/session')).status, 401);
  });

  it('sign-out of a session that has already ended (idle, its key revoked, signed out in another tab) still clears the cookie, with the CSRF token', async () => {
    const clearsCookie = (res: Awaited<ReturnType<TestApp['request']>>) => {
      assert.equal(res.status, 204, res.text);
      assert.match(res.headers.getSetCookie().find((c) => c.startsWith('mailgate_session='))!, /^mailgate_session=;.*expires=Thu, 01 Jan 1970/i);
    };
    const { adminKey, adminKeyId } = await seedWorkspace(app);
    // Idle past the idle time.
    const idle = await signIn(app, adminKey);
    clock.advance(2 * 3_600_000 + 1_000);
    assert.equal((await idle.request('GET', '/dashboard/api/session')).status, 401);
    const noToken = await idle.request('DELETE', '/dashboard/api/session', { csrf: false });
    assert.equal(noToken.status, 403, 'the CSRF token is still needed');
    assert.equal(noToken.headers.getSetCookie().length, 0);
    clearsCookie(await idle.request('DELETE', '/dashboard/api/session'));
    // Signed out in another tab: the second sign-out finds no session.
    const twice = await signIn(app, adminKey);
    clearsCookie(await twice.request('DELETE', '/dashboard/api/session'));
    clearsCookie(await twice.request('DELETE', '/dashboard/api/session'));
    // Its key revoked.
    const revoked = await signIn(app, adminKey);
    await app.services().workspaces.revokeKey(adminKeyId);
    clearsCookie(await revoked.request('DELETE', '/dashboard/api/session'));
    assert.equal(Number((await db.query('select count(*)::int as n from dashboard_sessions where key_id = $1', [adminKeyId])).rows[0].n), 0, 'the sign-out removed the revoked session too');
  });

  it('an SDR made inactive while signed in is refused everything but sign-out, which still ends the session', async () => {
    const { workspace } = await seedWorkspace(app);
    const { sdr, sdrKey } = await seedSdr(app, workspace.id);
    const s = await signIn(app, sdrKey);
    assert.equal((await s.request('GET', '/dashboard/api/session')).status, 200);
    await app.services().sdrs.setActive(sdr.id, false);
    const refused = await s.request('GET', '/dashboard/api/session');
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'forbidden');
    assert.equal((await s.request('GET', '/v1/sdr/inbox')).status, 403);
    // Sign-out still needs the CSRF token, as any write of a session does.
    assert.equal((await s.request('DELETE', '/dashboard/api/session', { csrf: false })).status, 403);
    const sessions = await count('dashboard_sessions');
    const out = await s.request('DELETE', '/dashboard/api/session');
    assert.equal(out.status, 204, out.text);
    assert.match(out.headers.getSetCookie().find((c) => c.startsWith('mailgate_session='))!, /^mailgate_session=;/);
    assert.equal(await count('dashboard_sessions'), sessions - 1);
    assert.equal((await s.request('GET', '/dashboard/api/session')).status, 401);
  });
});
