import assert from 'node:assert/strict';
import { startTestApp, seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';

describe('HTTP: auth, roles, envelope', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(async () => app.close());

  function assertEnvelope(res: { body: any }, code: string) {
    assert.equal(res.body.error.code, code);
    assert.equal(typeof res.body.error.message, 'string');
    assert.ok(res.body.error.message.length > 0);
  }

  it('401 authentication_failed for a missing, malformed or unknown key', async () => {
    const variants: Array<Record<string, string>> = [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer' }, { authorization: 'Bearer mgk_nope' }];
    for (const headers of variants) {
      const res = await app.request('GET', '/v1/sender-accounts', { headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assertEnvelope(res, 'authentication_failed');
    }
  });

  it('401 for a revoked key; other keys keep working', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const second = await app.services().workspaces.createKey({ workspace: workspace.id });
    assert.equal((await app.request('GET', '/v1/sender-accounts', { key: second.key })).status, 200);
    await app.services().workspaces.revokeKey(second.id);
    const res = await app.request('GET', '/v1/sender-accounts', { key: second.key });
    assert.equal(res.status, 401);
    assertEnvelope(res, 'authentication_failed');
    assert.equal((await app.request('GET', '/v1/sender-accounts', { key: adminKey })).status, 200);
  });

  it('404 workspace_not_found once the key’s workspace is deleted', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    await app.services().workspaces.delete(workspace.id);
    for (const path of ['/v1/sender-accounts', '/v1/sender-pools']) {
      const res = await app.request('GET', path, { key: adminKey });
      assert.equal(res.status, 404);
      assertEnvelope(res, 'workspace_not_found');
    }
  });

  it('403 forbidden for the wrong role', async () => {
    const { workspace, adminKey } = await seedWorkspace(app);
    const { sdrKey } = await seedSdr(app, workspace.id);
    const a = await app.request('GET', '/v1/sender-accounts', { key: sdrKey });
    assert.equal(a.status, 403);
    assertEnvelope(a, 'forbidden');
    const b = await app.request('POST', '/v1/suppression-list', { key: sdrKey, body: { emails: ['x@example.com'] } });
    assert.equal(b.status, 403);
    const c = await app.request('GET', '/v1/sdrs', { key: adminKey });
    assert.equal(c.status, 403);
    assertEnvelope(c, 'forbidden');
  });

  it('403 for the key of an inactive SDR', async () => {
    const { workspace } = await seedWorkspace(app);
    const { sdr, sdrKey } = await seedSdr(app, workspace.id);
    assert.equal((await app.request('GET', '/v1/sdrs', { key: sdrKey })).status, 200);
    await app.services().sdrs.setActive(sdr.id, false);
    const res = await app.request('GET', '/v1/sdrs', { key: sdrKey });
    assert.equal(res.status, 403);
    assertEnvelope(res, 'forbidden');
  });

  it('unknown routes are 404 not_found; wrong methods 405; both in the envelope', async () => {
    const { adminKey } = await seedWorkspace(app);
    const a = await app.request('GET', '/v1/nope', { key: adminKey });
    assert.equal(a.status, 404);
    assertEnvelope(a, 'not_found');
    const b = await app.request('DELETE', '/v1/sender-accounts', { key: adminKey });
    assert.equal(b.status, 405);
    assertEnvelope(b, 'method_not_allowed');
  });

  it('unknown query parameters are 400 invalid_request naming the parameter', async () => {
    const { adminKey } = await seedWorkspace(app);
    const res = await app.request('GET', '/v1/sender-accounts?foo=1', { key: adminKey });
    assert.equal(res.status, 400);
    assertEnvelope(res, 'invalid_request');
    assert.match(res.body.error.message, /foo/);
  });

  it('GET /healthz and /readyz need no key', async () => {
    const h = await app.request('GET', '/healthz');
    assert.equal(h.status, 200);
    assert.deepEqual(h.body, { status: 'ok' });
    const r = await app.request('GET', '/readyz');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { status: 'ready' });
  });

  it('GET /v1/openapi.json documents every route from the zod schemas', async () => {
    const res = await app.request('GET', '/v1/openapi.json');
    assert.equal(res.status, 200);
    assert.equal(res.body.openapi, '3.1.0');
    const paths = res.body.paths;
    assert.ok(paths['/v1/sender-accounts'].get);
    assert.equal(paths['/v1/sender-pools'].get.responses['200'].content['application/json'].schema.items.$ref, '#/components/schemas/SenderPool');
    assert.ok(res.body.components.schemas.SenderPool.properties.remainingVolume);
    const post = paths['/v1/suppression-list'].post;
    assert.equal(post.requestBody.content['application/json'].schema.properties.emails.maxItems, 1000);
    assert.equal(post.requestBody.content['application/json'].schema.additionalProperties, false);
    assert.ok(paths['/v1/sdrs'].get);
  });

  it('cross-workspace data is invisible', async () => {
    const a = await seedWorkspace(app);
    const b = await seedWorkspace(app);
    await app.services().senders.add({ workspaceId: a.workspace.id, email: 'a@a.example', name: 'A', smtpUrl: 'smtp://u:p@127.0.0.1:2525' });
    await app.services().senders.createPool(a.workspace.id, 'A pool', 10);
    await app.services().sdrs.add(a.workspace.id, 'Rep A', 'rep@a.example');
    const { sdrKey } = await seedSdr(app, b.workspace.id);
    assert.deepEqual((await app.request('GET', '/v1/sender-accounts', { key: b.adminKey })).body, []);
    assert.deepEqual((await app.request('GET', '/v1/sender-pools', { key: b.adminKey })).body, []);
    const sdrs = (await app.request('GET', '/v1/sdrs', { key: sdrKey })).body.data;
    assert.equal(sdrs.length, 1);
    assert.notEqual(sdrs[0].email, 'rep@a.example');
  });
});
