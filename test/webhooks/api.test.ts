import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';

// Public IP literals: the SSRF guard (on in this file) accepts them without any DNS.
const PUBLIC = 'https://93.184.215.14/hooks/mailgate';
const PUBLIC_V6 = 'https://[2606:4700:4700::1111]:8443/in?source=mailgate';

function assertError(res: { status: number; body: any }, status: number, code: string) {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.error.code, code, JSON.stringify(res.body));
  assert.equal(typeof res.body.error.message, 'string');
}

describe('webhook registration API', function () {
  this.timeout(30_000);
  let app: TestApp;
  let db: pg.Client;
  let key: string;
  let workspaceId: string;
  let otherKey: string;

  before(async () => {
    app = await startTestApp();
    assert.equal(app.config.webhookAllowPrivate, false, 'the SSRF guard is on by default');
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    ({ adminKey: key, workspace: { id: workspaceId } } = await seedWorkspace(app));
    ({ adminKey: otherKey } = await seedWorkspace(app));
  });
  after(async () => {
    await db.end();
    await app.close();
  });

  const create = (body: unknown, k = key) => app.request('POST', '/v1/webhooks', { key: k, body });

  describe('POST /v1/webhooks', () => {
    it('201 with the reference flat shape plus signingSecret; the secret is stored encrypted and never shown again', async () => {
      const res = await create({ url: PUBLIC, events: ['reply.received', 'message.sent'] });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const w = res.body;
      assert.match(w.id, /^whk_[a-z2-7]+$/);
      assert.equal(w.url, PUBLIC);
      assert.deepEqual(w.events, ['reply.received', 'message.sent']);
      assert.equal(w.status, 'active');
      assert.match(w.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.match(w.signingSecret, /^whsec_[A-Za-z0-9_-]{43}$/);
      assert.deepEqual(Object.keys(w).sort(), ['createdAt', 'events', 'id', 'signingSecret', 'status', 'updatedAt', 'url']);

      const { rows } = await db.query('select signing_secret_enc, workspace_id from webhooks where id = $1', [w.id]);
      assert.equal(rows[0].workspace_id, workspaceId);
      assert.ok(!rows[0].signing_secret_enc.includes(w.signingSecret), 'not stored in clear');
      assert.equal(app.deps.crypto.decrypt(rows[0].signing_secret_enc), w.signingSecret);

      const got = await app.request('GET', `/v1/webhooks/${w.id}`, { key });
      assert.equal(got.status, 200);
      assert.equal(got.body.signingSecret, undefined);
      assert.ok(!got.text.includes(w.signingSecret));
      const listed = await app.request('GET', '/v1/webhooks', { key });
      assert.ok(!listed.text.includes(w.signingSecret));
      assert.ok(!app.logs.text.includes(w.signingSecret), 'the secret never reaches the logs');
    });

    it('several webhooks with different URLs and event sets; each secret differs; duplicate event names collapse', async () => {
      const a = await create({ url: `${PUBLIC}/a`, events: ['campaign.started'] });
      const b = await create({ url: PUBLIC_V6, events: ['message.bounced', 'message.bounced', 'campaign.started'] });
      assert.equal(a.status, 201);
      assert.equal(b.status, 201);
      assert.notEqual(a.body.signingSecret, b.body.signingSecret);
      assert.deepEqual(b.body.events, ['message.bounced', 'campaign.started']);
      assert.equal(b.body.url, PUBLIC_V6);
    });

    it('normalizes the URL (the stored form is the one attempted)', async () => {
      const res = await create({ url: 'HTTPS://93.184.215.14:443/a/../b?x=1', events: ['message.sent'] });
      assert.equal(res.status, 201);
      assert.equal(res.body.url, 'https://93.184.215.14/b?x=1');
    });

    it('400 invalid_request: plain http, not a URL, credentials in the URL', async () => {
      for (const url of ['http://93.184.215.14/hook', 'ftp://93.184.215.14/x', 'not a url', '//93.184.215.14/x', 'https://user:pw@93.184.215.14/x']) {
        const res = await create({ url, events: ['message.sent'] });
        assertError(res, 400, 'invalid_request');
        assert.match(res.body.error.message, /^url /, url);
        assert.equal(res.body.errors[0].field, 'url');
      }
    });

    it('400 invalid_request: missing fields, wrong types, empty events, unknown fields, malformed JSON, no body, non-JSON', async () => {
      const cases: unknown[] = [
        { events: ['message.sent'] },
        { url: PUBLIC },
        { url: PUBLIC, events: [] },
        { url: PUBLIC, events: 'message.sent' },
        { url: PUBLIC, events: [42] },
        { url: 42, events: ['message.sent'] },
        { url: '', events: ['message.sent'] },
        { url: PUBLIC, events: ['message.sent'], secret: 'mine' },
        [],
      ];
      for (const body of cases) assertError(await create(body), 400, 'invalid_request');
      const unknownField = await create({ url: PUBLIC, events: ['message.sent'], status: 'active' });
      assert.match(unknownField.body.error.message, /unknown field/);
      assertError(await app.request('POST', '/v1/webhooks', { key, raw: '{"url": ', headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
      assertError(await app.request('POST', '/v1/webhooks', { key }), 400, 'invalid_request');
      assertError(await app.request('POST', '/v1/webhooks', { key, raw: 'url=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 400, 'invalid_request');
      assertError(await app.request('POST', '/v1/webhooks?x=1', { key, body: { url: PUBLIC, events: ['message.sent'] } }), 400, 'invalid_request');
    });

    it('422 validation_failed naming every unknown event; nothing is written', async () => {
      const before = (await db.query('select count(*)::int as n from webhooks')).rows[0].n;
      const res = await create({ url: PUBLIC, events: ['message.sent', 'message.opened', 'Reply.Received'] });
      assertError(res, 422, 'validation_failed');
      assert.deepEqual(
        res.body.errors.map((e: { index: number; field: string; value: string }) => [e.index, e.field, e.value]),
        [
          [1, 'events', 'message.opened'],
          [2, 'events', 'Reply.Received'],
        ],
      );
      assert.ok(res.body.errors.every((e: { message: string }) => /campaign\.started/.test(e.message)));
      assert.equal((await db.query('select count(*)::int as n from webhooks')).rows[0].n, before);
    });

    it('401 without or with a bad key, 403 with an SDR key, 404 workspace_not_found for a deleted workspace', async () => {
      const body = { url: PUBLIC, events: ['message.sent'] };
      assertError(await app.request('POST', '/v1/webhooks', { body }), 401, 'authentication_failed');
      assertError(await app.request('POST', '/v1/webhooks', { key: 'mgk_nope', body }), 401, 'authentication_failed');
      assertError(await app.request('GET', '/v1/webhooks', { headers: { authorization: 'Basic abc' } }), 401, 'authentication_failed');
      const { sdrKey } = await seedSdr(app, workspaceId);
      assertError(await app.request('POST', '/v1/webhooks', { key: sdrKey, body }), 403, 'forbidden');
      assertError(await app.request('GET', '/v1/webhooks', { key: sdrKey }), 403, 'forbidden');
      const gone = await seedWorkspace(app);
      await app.services().workspaces.delete(gone.workspace.id);
      assertError(await app.request('POST', '/v1/webhooks', { key: gone.adminKey, body }), 404, 'workspace_not_found');
    });
  });

  describe('SSRF guard at registration (MAILGATE_WEBHOOK_ALLOW_PRIVATE off)', () => {
    const refused = [
      'https://127.0.0.1/hook',
      'https://127.1/hook',
      'https://2130706433/hook',
      'https://0x7f000001/hook',
      'https://0177.0.0.1/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::ffff:7f00:1]/hook',
      'https://[::1]/hook',
      'https://localhost/hook',
      'https://10.1.2.3/hook',
      'https://172.16.5.4/hook',
      'https://172.31.255.255/hook',
      'https://192.168.1.10/hook',
      'https://[::ffff:192.168.1.10]/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[fd00:ec2::254]/latest',
      'https://[fe80::1]/hook',
      'https://[fc00::1]/hook',
      'https://100.64.0.1/hook',
      'https://100.127.255.254/hook',
      'https://0.0.0.0/hook',
      'https://0/hook',
      'https://[::]/hook',
      'https://224.0.0.1/hook',
      'https://[ff02::1]/hook',
      'https://255.255.255.255/hook',
      'https://[64:ff9b::127.0.0.1]/hook',
      'https://[2002:7f00:1::]/hook',
      'https://[::ffff:0:127.0.0.1]/hook',
      'https://[4000::1]/hook',
    ];
    for (const url of refused)
      it(`refuses ${url}`, async () => {
        const res = await create({ url, events: ['message.sent'] });
        assertError(res, 400, 'invalid_request');
        assert.match(res.body.error.message, /SSRF guard/);
      });

    it('accepts public addresses next to the private ranges', async () => {
      for (const url of ['https://172.32.0.1/x', 'https://100.128.0.1/x', 'https://192.169.0.1/x', 'https://[::ffff:93.184.215.14]/x', 'https://[2002:5db8:d70e::1]/x']) {
        const res = await create({ url, events: ['message.sent'] });
        assert.equal(res.status, 201, `${url}: ${JSON.stringify(res.body)}`);
      }
    });

    it('a host that does not resolve is refused', async () => {
      const res = await create({ url: 'https://no-such-host.invalid/hook', events: ['message.sent'] });
      assertError(res, 400, 'invalid_request');
      assert.match(res.body.error.message, /does not resolve/);
    });

    it('400 for a URL over 2048 characters, as given or once normalized (stored and attempted as normalized)', async () => {
      const base = 'https://93.184.215.14/';
      const fits = base + 'a'.repeat(2048 - base.length);
      assert.equal((await create({ url: fits, events: ['message.sent'] })).status, 201);
      assertError(await create({ url: fits + 'a', events: ['message.sent'] }), 400, 'invalid_request');
      // 1,000 characters as given; 9,000 once each euro sign is percent-encoded (%E2%82%AC).
      const grows = base + '€'.repeat(1000);
      for (const res of [await create({ url: grows, events: ['message.sent'] })]) {
        assertError(res, 400, 'invalid_request');
        assert.match(res.body.error.message, /^url is 9022 characters once normalized/);
        assert.equal(res.body.errors[0].field, 'url');
      }
      const w = (await create({ url: PUBLIC, events: ['message.sent'] })).body;
      assertError(await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { url: grows } }), 400, 'invalid_request');
      assert.equal((await app.request('GET', `/v1/webhooks/${w.id}`, { key })).body.url, PUBLIC);
    });

    it('PATCH checks a new URL the same way', async () => {
      const w = (await create({ url: PUBLIC, events: ['message.sent'] })).body;
      const res = await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { url: 'https://127.1:8443/x' } });
      assertError(res, 400, 'invalid_request');
      assert.equal((await app.request('GET', `/v1/webhooks/${w.id}`, { key })).body.url, PUBLIC);
    });
  });

  describe('GET, PATCH, DELETE, rotate-secret', () => {
    it('GET /v1/webhooks pages newest first with {data, total, hasMore}; only this workspace', async () => {
      const ws = await seedWorkspace(app);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await create({ url: `${PUBLIC}/${i}`, events: ['message.sent'] }, ws.adminKey)).body.id);
      const all = await app.request('GET', '/v1/webhooks', { key: ws.adminKey });
      assert.equal(all.status, 200);
      assert.equal(all.body.total, 3);
      assert.equal(all.body.hasMore, false);
      assert.deepEqual(
        all.body.data.map((w: { id: string }) => w.id),
        [...ids].reverse(),
      );
      const page = await app.request('GET', '/v1/webhooks?limit=2&offset=1', { key: ws.adminKey });
      assert.deepEqual(
        page.body.data.map((w: { id: string }) => w.id),
        [ids[1], ids[0]],
      );
      assert.equal(page.body.hasMore, false);
      const first = await app.request('GET', '/v1/webhooks?limit=1', { key: ws.adminKey });
      assert.equal(first.body.hasMore, true);
      assert.equal(first.body.total, 3);
      for (const q of ['limit=0', 'limit=201', 'offset=-1', 'limit=abc', 'page=2']) assertError(await app.request('GET', `/v1/webhooks?${q}`, { key: ws.adminKey }), 400, 'invalid_request');
      const other = await app.request('GET', '/v1/webhooks', { key: otherKey });
      assert.ok(!other.body.data.some((w: { id: string }) => ids.includes(w.id)));
    });

    it('PATCH url, events and status; unknown fields 400, unknown events 422, bad status 400', async () => {
      const w = (await create({ url: PUBLIC, events: ['message.sent'] })).body;
      const res = await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { url: `${PUBLIC}/v2`, events: ['reply.received'], status: 'disabled' } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual([res.body.url, res.body.events, res.body.status], [`${PUBLIC}/v2`, ['reply.received'], 'disabled']);
      assert.equal(res.body.createdAt, w.createdAt);
      assert.equal(res.body.signingSecret, undefined);
      const back = await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { status: 'active' } });
      assert.equal(back.body.status, 'active');
      assert.deepEqual(back.body.events, ['reply.received']);
      assertError(await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { status: 'paused' } }), 400, 'invalid_request');
      assertError(await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { secret: 'x' } }), 400, 'invalid_request');
      assertError(await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { events: [] } }), 400, 'invalid_request');
      assertError(await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { url: 'http://93.184.215.14/' } }), 400, 'invalid_request');
      assertError(await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, raw: '{', headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
      const bad = await app.request('PATCH', `/v1/webhooks/${w.id}`, { key, body: { events: ['nope'] } });
      assertError(bad, 422, 'validation_failed');
      assert.equal(bad.body.errors[0].value, 'nope');
    });

    it('rotate-secret returns a new secret once; the stored one changes', async () => {
      const w = (await create({ url: PUBLIC, events: ['message.sent'] })).body;
      const res = await app.request('POST', `/v1/webhooks/${w.id}/rotate-secret`, { key });
      assert.equal(res.status, 200);
      assert.match(res.body.signingSecret, /^whsec_/);
      assert.notEqual(res.body.signingSecret, w.signingSecret);
      assert.equal(res.body.id, w.id);
      const { rows } = await db.query('select signing_secret_enc from webhooks where id = $1', [w.id]);
      assert.equal(app.deps.crypto.decrypt(rows[0].signing_secret_enc), res.body.signingSecret);
      assertError(await app.request('POST', `/v1/webhooks/${w.id}/rotate-secret`, { key, body: { secret: 'x' } }), 400, 'invalid_request');
    });

    it('DELETE answers 204, then the webhook is gone (404)', async () => {
      const w = (await create({ url: PUBLIC, events: ['message.sent'] })).body;
      const res = await app.request('DELETE', `/v1/webhooks/${w.id}`, { key });
      assert.equal(res.status, 204);
      assert.equal(res.text, '');
      assertError(await app.request('GET', `/v1/webhooks/${w.id}`, { key }), 404, 'webhook_not_found');
      assertError(await app.request('DELETE', `/v1/webhooks/${w.id}`, { key }), 404, 'webhook_not_found');
    });

    it('404 webhook_not_found for unknown ids and for another workspace’s webhook on every endpoint; nothing changes', async () => {
      const w = (await create({ url: PUBLIC, events: ['message.sent'] })).body;
      for (const id of ['whk_doesnotexist', w.id]) {
        const k = id === w.id ? otherKey : key;
        assertError(await app.request('GET', `/v1/webhooks/${id}`, { key: k }), 404, 'webhook_not_found');
        assertError(await app.request('PATCH', `/v1/webhooks/${id}`, { key: k, body: { status: 'disabled' } }), 404, 'webhook_not_found');
        assertError(await app.request('DELETE', `/v1/webhooks/${id}`, { key: k }), 404, 'webhook_not_found');
        assertError(await app.request('POST', `/v1/webhooks/${id}/rotate-secret`, { key: k }), 404, 'webhook_not_found');
        assertError(await app.request('GET', `/v1/webhooks/${id}/deliveries`, { key: k }), 404, 'webhook_not_found');
        assertError(await app.request('POST', `/v1/webhooks/${id}/deliveries/dlv_x/retry`, { key: k }), 404, 'webhook_not_found');
      }
      const still = await app.request('GET', `/v1/webhooks/${w.id}`, { key });
      assert.equal(still.status, 200);
      assert.equal(still.body.status, 'active');
      assert.equal(still.body.updatedAt, w.updatedAt);
    });

    it('deliveries of a new webhook: an empty page; unknown delivery 404 delivery_not_found; bad query 400', async () => {
      const w = (await create({ url: PUBLIC, events: ['message.sent'] })).body;
      const res = await app.request('GET', `/v1/webhooks/${w.id}/deliveries`, { key });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { data: [], total: 0, hasMore: false });
      assertError(await app.request('POST', `/v1/webhooks/${w.id}/deliveries/dlv_nope/retry`, { key }), 404, 'delivery_not_found');
      assertError(await app.request('GET', `/v1/webhooks/${w.id}/deliveries?state=lost`, { key }), 400, 'invalid_request');
      assertError(await app.request('GET', `/v1/webhooks/${w.id}/deliveries?since=1`, { key }), 400, 'invalid_request');
    });

    it('405 for a wrong method on a webhook path', async () => {
      const res = await app.request('PUT', '/v1/webhooks', { key, body: {} });
      assertError(res, 405, 'method_not_allowed');
    });

    it('the OpenAPI document describes every webhook endpoint', async () => {
      const doc = (await app.request('GET', '/v1/openapi.json')).body;
      assert.ok(doc.paths['/v1/webhooks'].post.responses['201']);
      assert.ok(doc.paths['/v1/webhooks'].post.responses['422']);
      assert.ok(doc.paths['/v1/webhooks'].get);
      assert.ok(doc.paths['/v1/webhooks/{webhookId}'].get && doc.paths['/v1/webhooks/{webhookId}'].patch && doc.paths['/v1/webhooks/{webhookId}'].delete);
      assert.ok(doc.paths['/v1/webhooks/{webhookId}/rotate-secret'].post);
      assert.ok(doc.paths['/v1/webhooks/{webhookId}/deliveries'].get);
      assert.ok(doc.paths['/v1/webhooks/{webhookId}/deliveries/{deliveryId}/retry'].post);
    });
  });
});
