import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, type TestApp } from '../support/harness.ts';

describe('POST /v1/suppression-list', () => {
  let app: TestApp;
  let key: string;
  let workspaceId: string;
  before(async () => {
    app = await startTestApp();
    const seeded = await seedWorkspace(app);
    key = seeded.adminKey;
    workspaceId = seeded.workspace.id;
  });
  after(async () => app.close());

  async function stored(): Promise<string[]> {
    const c = new pg.Client({ connectionString: app.databaseUrl });
    await c.connect();
    const { rows } = await c.query('select email_key from suppressions where workspace_id = $1 order by email_key', [workspaceId]);
    await c.end();
    return rows.map((r) => r.email_key);
  }

  it('counts only new addresses: trimmed, case-insensitive, duplicates once', async () => {
    const a = await app.request('POST', '/v1/suppression-list', { key, body: { emails: ['Ann@Example.com', ' ann@example.com ', 'bob@example.org'] } });
    assert.equal(a.status, 200);
    assert.deepEqual(a.body, { suppressed: 2 });
    const b = await app.request('POST', '/v1/suppression-list', { key, body: { emails: ['ANN@example.com', 'cy@example.net'] } });
    assert.deepEqual(b.body, { suppressed: 1 });
    assert.deepEqual(await stored(), ['ann@example.com', 'bob@example.org', 'cy@example.net']);
  });

  it('keeps the first spelling of an address for display, within one request as across requests', async () => {
    const res = await app.request('POST', '/v1/suppression-list', { key, body: { emails: ['First.Spelling@Example.com', 'first.spelling@example.com', 'FIRST.SPELLING@EXAMPLE.COM'] } });
    assert.deepEqual(res.body, { suppressed: 1 });
    await app.request('POST', '/v1/suppression-list', { key, body: { emails: ['first.SPELLING@example.com'] } });
    const list = await app.request('GET', '/v1/suppression-list?q=first.spelling', { key });
    assert.deepEqual(list.body.data.map((s: { email: string }) => s.email), ['First.Spelling@Example.com']);
  });

  it('two requests with the same addresses in opposite orders, at once: both succeed, each address counted once', async () => {
    for (let round = 0; round < 3; round++) {
      const emails = Array.from({ length: 1000 }, (_, i) => `race${round}.${i}@example.com`);
      const [a, b] = await Promise.all([
        app.request('POST', '/v1/suppression-list', { key, body: { emails } }),
        app.request('POST', '/v1/suppression-list', { key, body: { emails: [...emails].reverse().map((e) => e.toUpperCase()) } }),
      ]);
      assert.deepEqual([a.status, b.status], [200, 200], JSON.stringify([a.body, b.body]));
      assert.equal(a.body.suppressed + b.body.suppressed, 1000);
    }
  });

  it('accepts exactly 1,000 addresses and refuses 1,001 with 400', async () => {
    const emails = Array.from({ length: 1000 }, (_, i) => `bulk${i}@example.com`);
    const ok = await app.request('POST', '/v1/suppression-list', { key, body: { emails } });
    assert.deepEqual(ok.body, { suppressed: 1000 });
    const tooMany = await app.request('POST', '/v1/suppression-list', { key, body: { emails: [...emails, 'one.more@example.com'] } });
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.body.error.code, 'invalid_request');
    assert.match(tooMany.body.error.message, /emails/);
  });

  it('400 invalid_request for a malformed body, missing or empty emails, wrong types, unknown fields', async () => {
    const cases: Array<{ raw?: string; body?: unknown; headers?: Record<string, string>; match: RegExp }> = [
      { raw: '{"emails": [', headers: { 'content-type': 'application/json' }, match: /malformed JSON/ },
      { body: {}, match: /emails/ },
      { body: { emails: [] }, match: /emails/ },
      { body: { emails: 'a@example.com' }, match: /emails/ },
      { body: { emails: ['a@example.com'], extra: 1 }, match: /extra/ },
      { raw: 'emails=a@example.com', headers: { 'content-type': 'application/x-www-form-urlencoded' }, match: /JSON/ },
      { raw: '', headers: { 'content-type': 'application/json' }, match: /body/ },
    ];
    const before = await stored();
    for (const c of cases) {
      const res = await app.request('POST', '/v1/suppression-list', { key, raw: c.raw, body: c.body, headers: c.headers });
      assert.equal(res.status, 400, JSON.stringify(c));
      assert.equal(res.body.error.code, 'invalid_request');
      assert.match(res.body.error.message, c.match);
    }
    assert.deepEqual(await stored(), before);
  });

  it('422 validation_failed names every bad index and writes nothing', async () => {
    const before = await stored();
    const res = await app.request('POST', '/v1/suppression-list', {
      key,
      body: { emails: ['good@example.com', 'not-an-email', 'also good@example.com', 42, 'fine@example.org'] },
    });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(
      res.body.errors.map((e: { index: number }) => e.index),
      [1, 2, 3],
    );
    assert.equal(res.body.errors[0].value, 'not-an-email');
    assert.ok(res.body.errors.every((e: { message: string }) => e.message));
    assert.deepEqual(await stored(), before);
  });

  it('a domain or wildcard (*@acme.com, @acme.com, acme.com, *.acme.com) is 422 saying the list holds addresses; nothing written', async () => {
    const before = await stored();
    const res = await app.request('POST', '/v1/suppression-list', {
      key,
      body: { emails: ['keep@example.com', '*@acme.example', ' @acme.example', 'acme.example', '*.acme.example', 'a*b@acme.example'] },
    });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(
      res.body.errors.map((e: { index: number }) => e.index),
      [1, 2, 3, 4],
    );
    for (const e of res.body.errors) assert.match(e.message, /whole addresses: a domain or a wildcard/);
    assert.deepEqual(await stored(), before);
    // An address whose local part merely contains a `*` is still an address.
    const ok = await app.request('POST', '/v1/suppression-list', { key, body: { emails: ['a*b@acme.example'] } });
    assert.deepEqual(ok.body, { suppressed: 1 });
  });

  it('413 payload_too_large above 10 MB', async () => {
    const big = JSON.stringify({ emails: ['x'.repeat(11 * 1024 * 1024)] });
    const res = await app.request('POST', '/v1/suppression-list', { key, raw: big, headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 413);
    assert.equal(res.body.error.code, 'payload_too_large');
  });
});
