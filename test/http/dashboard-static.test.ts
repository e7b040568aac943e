// The built dashboard served by the daemon (issue 17, docs/dashboard.md "Static files"):
// index.html for page paths, hashed assets cached for a year and compressed, the security
// headers, the API's paths untouched, and a plain 503 until the dashboard is built.
import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestApp, type TestApp } from '../support/harness.ts';

/** A raw GET (fetch would decompress): status, headers and the bytes as sent. */
function rawGet(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

const INDEX = '<!doctype html><html><head><title>mailgate</title><script type="module" src="/assets/app-3f9a1c.js"></script></head><body><div id="app"></div></body></html>';
const SCRIPT = `export const rows = ${JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ id: i, label: `row ${i}` })))};\n`;

describe('dashboard static files', function () {
  this.timeout(60_000);
  let app: TestApp;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-dash-'));
    mkdirSync(path.join(dir, 'assets'));
    writeFileSync(path.join(dir, 'index.html'), INDEX);
    writeFileSync(path.join(dir, 'assets', 'app-3f9a1c.js'), SCRIPT);
    writeFileSync(path.join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
    app = await startTestApp({ config: { dashboardDir: dir } });
  });
  after(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function assertSecurityHeaders(h: http.IncomingHttpHeaders) {
    const csp = String(h['content-security-policy']);
    for (const directive of ["default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "object-src 'none'"]) assert.ok(csp.includes(directive), `${directive} in ${csp}`);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(h['referrer-policy'], 'no-referrer');
    assert.equal(h['x-content-type-options'], 'nosniff');
    assert.equal(h['x-frame-options'], 'DENY');
  }

  it('serves index.html for / and every page path (client-side routing), revalidated by ETag, with the security headers', async () => {
    for (const p of ['/', '/index.html', '/campaigns/cmp_123', '/sdr/inbox?status=new', '/settings/api-keys']) {
      const res = await rawGet(app.url + p);
      assert.equal(res.status, 200, p);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(res.headers['cache-control'], 'no-cache');
      assert.equal(res.body.toString(), INDEX);
      assertSecurityHeaders(res.headers);
    }
    const first = await rawGet(app.url + '/');
    const etag = String(first.headers.etag);
    assert.ok(etag);
    const again = await rawGet(app.url + '/overview', { 'if-none-match': etag });
    assert.equal(again.status, 304);
    assert.equal(again.body.length, 0);
    const head = await rawGet(app.url + '/', {}, 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(head.body.length, 0);
    const icon = await rawGet(app.url + '/favicon.svg');
    assert.equal(icon.status, 200);
    assert.equal(icon.headers['content-type'], 'image/svg+xml');
    // The access log labels them as dashboard pages, never by their path.
    const labelled = app.logs.lines.flatMap((l) => l.split('\n')).filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    assert.ok(labelled.length >= 8);
    assert.deepEqual([...new Set(labelled.map((l) => l.route))], ['dashboard:page']);
  });

  it('serves hashed assets for a year, brotli or gzip by Accept-Encoding; a missing asset is a 404', async () => {
    const br = await rawGet(app.url + '/assets/app-3f9a1c.js', { 'accept-encoding': 'gzip, deflate, br' });
    assert.equal(br.status, 200);
    assert.equal(br.headers['content-encoding'], 'br');
    assert.equal(br.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(br.headers.vary, 'Accept-Encoding');
    assert.equal(br.headers['content-type'], 'text/javascript; charset=utf-8');
    assert.equal(zlib.brotliDecompressSync(br.body).toString(), SCRIPT);
    assert.ok(br.body.length < Buffer.byteLength(SCRIPT) / 3, `brotli ${br.body.length} of ${Buffer.byteLength(SCRIPT)} bytes`);
    assertSecurityHeaders(br.headers);
    const gz = await rawGet(app.url + '/assets/app-3f9a1c.js', { 'accept-encoding': 'gzip' });
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.equal(zlib.gunzipSync(gz.body).toString(), SCRIPT);
    const plain = await rawGet(app.url + '/assets/app-3f9a1c.js', { 'accept-encoding': 'identity' });
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.body.toString(), SCRIPT);

    const missing = await rawGet(app.url + '/assets/app-000000.js');
    assert.equal(missing.status, 404);
    assert.equal(JSON.parse(missing.body.toString()).error.code, 'not_found');
    const traversal = await rawGet(app.url + '/assets/../../../../etc/passwd');
    assert.ok(!traversal.body.toString().includes('root:'), 'no file outside the dashboard directory');
    // The access log labels assets as such (a 404 too), never by their file name.
    const access = app.logs.lines.flatMap((l) => l.split('\n')).filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    assert.ok(access.filter((l) => l.route === 'dashboard:asset').length >= 4);
    assert.ok(access.every((l) => !String(l.route).includes('app-')));
  });

  it('leaves the API, the probes and the tracking links alone', async () => {
    for (const p of ['/v1/no-such-thing', '/v2/campaigns', '/V1/no-such-thing', '/v10']) {
      const unknownApi = await rawGet(app.url + p);
      assert.equal(unknownApi.status, 404, p);
      assert.equal(JSON.parse(unknownApi.body.toString()).error.code, 'not_found', p);
      assert.equal(unknownApi.headers['content-security-policy'], undefined, p);
    }
    assert.equal((await rawGet(app.url + '/healthz')).headers['content-type'], 'application/json; charset=utf-8');
    const unknownDashboardApi = await rawGet(app.url + '/dashboard/api/nothing');
    assert.equal(unknownDashboardApi.status, 404);
    assert.match(unknownDashboardApi.headers['content-type'] ?? '', /application\/json/);
    const badLink = await rawGet(app.url + '/u/not-a-token');
    assert.equal(badLink.status, 404);
    assert.doesNotMatch(badLink.body.toString(), /<div id="app">/);
    const post = await fetch(app.url + '/campaigns', { method: 'POST' });
    assert.equal(post.status, 404);
  });

  it('answers 503 in plain words until the dashboard is built, then serves it without a restart', async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'mailgate-dash-'));
    const bare = await startTestApp({ config: { dashboardDir: empty } });
    try {
      for (const p of ['/', '/campaigns', '/assets/app.js']) {
        const res = await rawGet(bare.url + p);
        assert.equal(res.status, 503, p);
        assert.match(String(res.headers['content-type']), /^text\/plain/);
        assert.equal(res.body.toString().trim(), 'the dashboard is not built: run npm run build');
      }
      assert.equal((await rawGet(bare.url + '/healthz')).status, 200);
      writeFileSync(path.join(empty, 'index.html'), INDEX);
      const built = await rawGet(bare.url + '/');
      assert.equal(built.status, 200);
      assert.equal(built.body.toString(), INDEX);
    } finally {
      await bare.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('the worker process serves no dashboard', async () => {
    const worker = await startTestApp({ api: false, config: { dashboardDir: dir } });
    try {
      const res = await rawGet(worker.url + '/');
      assert.equal(res.status, 404);
    } finally {
      await worker.close();
    }
  });
});
