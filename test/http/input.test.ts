import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import http from 'node:http';
import net from 'node:net';
import Koa from 'koa';
import pg from 'pg';
import { errorMiddleware, installEnvelopeOnError } from '../../src/http/errors.ts';
import { startTestApp, seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';

// The text rule, content encodings, nesting and the wording of 400s, each on a named example
// (the fuzz test covers every route; these pin what the client reads).
describe('HTTP: bad input is a 4xx in the envelope naming the field, and writes nothing', () => {
  let app: TestApp;
  let key: string;
  let sdrKey: string;
  let db: pg.Client;
  const json = { 'content-type': 'application/json' };

  before(async () => {
    app = await startTestApp();
    const ws = await seedWorkspace(app);
    key = ws.adminKey;
    sdrKey = (await seedSdr(app, ws.workspace.id)).sdrKey;
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await app.close();
  });

  async function campaigns(): Promise<number> {
    return Number((await db.query('select count(*) from campaigns')).rows[0].count);
  }

  function assert400(res: { status: number; body: any; text: string }, field: string | undefined, message: RegExp) {
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.error.code, 'invalid_request');
    assert.match(res.body.error.message, message);
    if (field !== undefined) assert.ok(res.body.errors.some((e: { field?: string }) => e.field === field), res.text);
  }

  function assert422(res: { status: number; body: any; text: string }, expected: Array<[number, string | undefined, RegExp]>) {
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.code, 'validation_failed');
    assert.deepEqual(res.body.errors.map((e: { index: number }) => e.index), expected.map(([i]) => i), res.text);
    expected.forEach(([, field, message], n) => {
      assert.equal(res.body.errors[n].field, field, res.text);
      assert.match(res.body.errors[n].message, message);
    });
  }

  it('a NUL or a lone surrogate in a body field, at any depth, is 400 naming the field (a lead in a bulk enroll: 422 naming its index)', async () => {
    const before = await campaigns();
    assert400(await app.request('POST', '/v1/campaigns', { key, body: { name: 'a\u0000b' } }), 'name', /^body name: must not contain a NUL character/);
    // JSON.stringify writes a lone surrogate as the escape \ud800, as a client library would.
    assert400(await app.request('POST', '/v1/campaigns', { key, body: { name: 'Q2 \ud800' } }), 'name', /^body name: must be valid Unicode/);
    assert400(
      await app.request('POST', '/v1/campaigns', { key, body: { name: 'n', sequenceSteps: [{ subject: 's', bodyHtml: '<p>\udc00</p>' }] } }),
      'sequenceSteps[0].bodyHtml',
      /valid Unicode/,
    );
    assert.equal(await campaigns(), before);
    const cmp = await app.request('POST', '/v1/campaigns', { key, body: { name: 'ok' } });
    // In a bulk enroll, a lead that breaks the rule is that lead's 422 entry, every such lead
    // named by its index beside the leads failing for other reasons (contract §4).
    const leads = [{ email: 'a@example.com' }, { email: 'b\u0000@example.com' }, { email: 'not an email' }, { email: 'd@example.com', firstName: 'D\u0000' }, { email: 'e@example.com', plan: { tier: ['\ud800'] } }];
    const bulk = await app.request('POST', `/v1/campaigns/${cmp.body.id}/leads/bulk`, { key, body: { leads } });
    assert422(bulk, [
      [1, 'email', /must not contain a NUL/],
      [2, 'email', /not a valid email address/],
      [3, 'firstName', /must not contain a NUL/],
      [4, 'plan.tier[0]', /valid Unicode/],
    ]);
    // A custom field's name lands in jsonb as well.
    assert422(await app.request('POST', `/v1/campaigns/${cmp.body.id}/leads/bulk`, { key, body: { leads: [{ email: 'e@example.com', 'plan\u0000': 'x' }] } }), [[0, 'plan\\u0000', /field name must not contain a NUL/]]);
    // The body's depth limit counts from the body: a lead's field nests at most 30 levels more.
    const nested = (n: number) => `{"leads": [{"email": "deep@example.com", "a": ${'['.repeat(n)}1${']'.repeat(n)}}]}`;
    assert422(await app.request('POST', `/v1/campaigns/${cmp.body.id}/leads/bulk`, { key, raw: nested(30), headers: json }), [[0, `a${'[0]'.repeat(29)}`, /nests deeper than 32 levels/]]);
    // Outside the leads, the bulk route's body is still refused whole (its schema takes only leads).
    const extra = await app.request('POST', `/v1/campaigns/${cmp.body.id}/leads/bulk`, { key, body: { leads: [{ email: 'f@example.com' }], 'x\u0000': 1 } });
    assert.equal(extra.status, 400, extra.text);
    assert.equal(Number((await db.query('select count(*) from leads')).rows[0].count), 0);
    const deepest = await app.request('POST', `/v1/campaigns/${cmp.body.id}/leads/bulk`, { key, raw: nested(29), headers: json });
    assert.equal(deepest.status, 200, deepest.text);
  });

  it('a NUL, a lone surrogate or malformed percent-encoding in a path parameter or query value is 400 naming it', async () => {
    assert400(await app.request('GET', '/v1/campaigns/%00', { key }), 'campaignId', /^path parameter campaignId: must not contain a NUL/);
    assert400(await app.request('GET', '/v1/sdr/threads/thr_%ED%A0%80', { key: sdrKey }), 'threadId', /^path parameter threadId: must be valid percent-encoded UTF-8/);
    assert400(await app.request('GET', '/v1/replies?campaignId=%00', { key }), 'campaignId', /^query campaignId: must not contain a NUL/);
    assert400(await app.request('GET', '/v1/replies?campaignId=%FF', { key }), 'campaignId', /percent-encoded UTF-8/);
  });

  it('a body that is not UTF-8, not JSON or nested deeper than 32 levels is 400; 10,000 levels too', async () => {
    const invalidUtf8 = await fetch(`${app.url}/v1/campaigns`, { method: 'POST', headers: { ...json, authorization: `Bearer ${key}` }, body: Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]) });
    assert.equal(invalidUtf8.status, 400);
    assert.match((await invalidUtf8.json()).error.message, /not valid UTF-8/);
    const ok = `{"emails": ["x@example.com"], "a": ${'['.repeat(30)}${']'.repeat(30)}}`;
    assert.doesNotMatch((await app.request('POST', '/v1/suppression-list', { key, raw: ok, headers: json })).text, /deeper/);
    for (const levels of [33, 10_000]) {
      const res = await app.request('POST', '/v1/suppression-list', { key, raw: `{"emails": ${'['.repeat(levels)}${']'.repeat(levels)}}`, headers: json });
      assert400(res, undefined, /^body emails(\[0\])+: nests deeper than 32 levels/);
      assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
    }
    const wide = await app.request('POST', '/v1/suppression-list', { key, raw: `{"emails": [${Array(10_000).fill('[[]]').join(',')}]}`, headers: json });
    assert400(wide, 'emails', /at most 1000/);
    assert.equal(Number((await db.query('select count(*) from suppressions')).rows[0].count), 0);
  });

  it('Content-Encoding: broken gzip, deflate or br data is 400; an unsupported encoding or charset 415; a good gzip body works', async () => {
    const post = (encoding: string, body: Uint8Array): Promise<Response> =>
      fetch(`${app.url}/v1/campaigns`, { method: 'POST', headers: { ...json, authorization: `Bearer ${key}`, 'content-encoding': encoding }, body: body as BodyInit });
    const before = await campaigns();
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await post(encoding, Buffer.from('{"name": "not compressed"}'));
      assert.equal(res.status, 400, encoding);
      const body = await res.json();
      assert.equal(body.error.code, 'invalid_request');
      assert.match(body.error.message, new RegExp(`not valid ${encoding} data`));
    }
    const truncated = zlib.gzipSync('{"name": "cut"}');
    assert.equal((await post('gzip', truncated.subarray(0, truncated.length - 6))).status, 400);
    for (const encoding of ['zstd', 'gzip, br']) {
      const res = await post(encoding, Buffer.from('{}'));
      assert.equal(res.status, 415);
      const body = await res.json();
      assert.equal(body.error.code, 'unsupported_media_type');
      assert.match(body.error.message, /unsupported Content-Encoding/);
    }
    assert.equal(await campaigns(), before);
    for (const charset of ['utf-16', 'ISO-8859-1']) {
      const res = await app.request('POST', '/v1/campaigns', { key, raw: '{"name": "latin"}', headers: { 'content-type': `application/json; charset=${charset}` } });
      assert.equal(res.status, 415, charset);
      assert.equal(res.body.error.code, 'unsupported_media_type');
      assert.match(res.body.error.message, /send the JSON body as UTF-8/);
    }
    assert.equal(await campaigns(), before);
    const utf8 = await app.request('POST', '/v1/campaigns', { key, raw: '{"name": "declared utf-8"}', headers: { 'content-type': 'application/json; charset=UTF-8' } });
    assert.equal(utf8.status, 201, utf8.text);
    const good = await post('gzip', zlib.gzipSync('{"name": "compressed"}'));
    assert.equal(good.status, 201);
    const bomb = await post('gzip', zlib.gzipSync(Buffer.alloc(11 * 1024 * 1024, 0x20)));
    assert.equal(bomb.status, 413);
    assert.equal((await bomb.json()).error.code, 'payload_too_large');
  });

  it('400s say what is expected in our words: unknown fields one by one, enum values listed, limits', async () => {
    const unknown = await app.request('POST', '/v1/campaigns', { key, body: { name: 'x', colour: 'red', size: 2 } });
    assert400(unknown, 'colour', /^body: unknown fields: colour, size$/);
    assert.deepEqual(unknown.body.errors, [
      { field: 'colour', message: 'unknown field' },
      { field: 'size', message: 'unknown field' },
    ]);
    const nested = await app.request('POST', '/v1/campaigns', { key, body: { name: 'x', sequenceSteps: [{ subject: 's', bodyHtml: 'b', extra: 1 }] } });
    assert400(nested, 'sequenceSteps[0].extra', /unknown field: sequenceSteps\[0\]\.extra/);
    assert400(
      await app.request('GET', '/v1/replies?classification=happy', { key }),
      'classification',
      /^query classification: must be one of: interested, not_interested, out_of_office, bounce, unsubscribe \(got "happy"\)$/,
    );
    assert400(await app.request('GET', '/v1/replies?pageSize=501', { key }), 'pageSize', /^query pageSize: must be at most 500$/);
    assert400(await app.request('GET', '/v1/replies?page=1.5', { key }), 'page', /^query page: must be an integer written in decimal digits, not "1.5"$/);
    assert400(await app.request('POST', '/v1/campaigns', { key, body: { name: 5 } }), 'name', /^body name: must be a string, not the number 5$/);
    assert400(await app.request('POST', '/v1/campaigns', { key, body: {} }), 'name', /^body name: is required$/);
    const unknownQuery = await app.request('GET', '/v1/replies?foo=1&bar=2', { key });
    assert400(unknownQuery, 'foo', /^query: unknown parameters: foo, bar$/);
    for (const res of [unknown, nested, unknownQuery]) assert.doesNotMatch(res.text, /Invalid input|Too big|Too small|Unrecognized/);
  });

  it('an error outside the middleware chain (a body Koa cannot serialize) still answers in the envelope', async () => {
    // Koa's respond() serializes the body after every middleware has returned; when that throws,
    // Koa's context.onerror used to answer plain text "Internal Server Error" (it was what a
    // 10,000-deep body echoed back in a 422 hit).
    const koa = new Koa();
    koa.silent = true;
    installEnvelopeOnError(koa, app.deps.log);
    koa.use(errorMiddleware(app.deps.log));
    koa.use((ctx) => {
      ctx.body = { big: 1n };
    });
    const server = http.createServer(koa.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/`);
      assert.equal(res.status, 500);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      assert.deepEqual(await res.json(), { error: { code: 'internal_error', message: 'internal server error' } });
    } finally {
      server.close();
    }
  });
  it('a database that cannot be reached, or a lock conflict left over, is 503 temporarily_unavailable with Retry-After; anything else unknown stays 500', async () => {
    // Real failures of real connections, each thrown out of a handler as a service would.
    const failures: Record<string, () => Promise<unknown>> = {
      // Nothing listens on port 1.
      '/refused': async () => {
        const c = new pg.Client({ connectionString: 'postgres://nobody@127.0.0.1:1/none', connectionTimeoutMillis: 2000 });
        await c.connect();
      },
      // The server ends the session (57P01), as at a shutdown or a failover.
      '/terminated': async () => {
        const c = new pg.Client({ connectionString: app.databaseUrl });
        c.on('error', () => {});
        await c.connect();
        try {
          await c.query('select pg_terminate_backend(pg_backend_pid())');
        } finally {
          await c.end().catch(() => {});
        }
      },
      // A deadlock between two sessions: PostgreSQL aborts one of them (40P01).
      '/deadlock': async () => {
        const [a, b] = [new pg.Client({ connectionString: app.databaseUrl }), new pg.Client({ connectionString: app.databaseUrl })];
        await Promise.all([a.connect(), b.connect()]);
        try {
          await Promise.all([a.query('begin'), b.query('begin')]);
          await a.query('select pg_advisory_xact_lock(424201)');
          await b.query('select pg_advisory_xact_lock(424202)');
          const both = await Promise.allSettled([a.query('select pg_advisory_xact_lock(424202)'), b.query('select pg_advisory_xact_lock(424201)')]);
          const failed = both.find((r) => r.status === 'rejected') as PromiseRejectedResult;
          throw failed.reason;
        } finally {
          await Promise.all([a.end(), b.end()]);
        }
      },
      '/other': async () => {
        throw new Error('something else');
      },
    };
    const koa = new Koa();
    koa.silent = true;
    koa.use(errorMiddleware(app.deps.log));
    koa.use(async (ctx) => {
      await failures[ctx.path]();
    });
    const server = http.createServer(koa.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      for (const [path, retryAfter] of [['/refused', '5'], ['/terminated', '5'], ['/deadlock', '1']]) {
        const res = await fetch(base + path);
        const body = await res.json();
        assert.equal(res.status, 503, `${path}: ${JSON.stringify(body)}`);
        assert.equal(body.error.code, 'temporarily_unavailable', path);
        assert.equal(res.headers.get('retry-after'), retryAfter, path);
      }
      const res = await fetch(`${base}/other`);
      assert.equal(res.status, 500);
      assert.deepEqual(await res.json(), { error: { code: 'internal_error', message: 'internal server error' } });
    } finally {
      server.close();
    }
  });
  // Requests Node's HTTP parser refuses never reach Koa; the server answers them itself.
  it('a request Node refuses before Koa (bad request line, 16 KB+ headers, an unknown Expect) is answered in the envelope', async () => {
    const { port } = new URL(app.url);
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.end(text));
        let out = '';
        socket.on('data', (d) => (out += d));
        socket.on('end', () => resolve(out));
        socket.on('error', reject);
      });
    const envelope = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));

    const garbage = await raw('NOT HTTP AT ALL\r\n\r\n');
    assert.match(garbage, /^HTTP\/1\.1 400 /);
    assert.match(garbage, /content-type: application\/json/i);
    assert.equal(envelope(garbage).error.code, 'invalid_request');

    const huge = await raw(`GET /v1/campaigns HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assert.match(huge, /^HTTP\/1\.1 431 /);
    assert.deepEqual(envelope(huge), { error: { code: 'headers_too_large', message: 'the request headers exceed the 16 KB limit' } });

    // Node answers an Expect it does not know itself, before any route.
    const expect = await raw(`POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`);
    assert.match(expect, /^HTTP\/1\.1 417 /);
    assert.match(expect, /content-type: application\/json/i);
    assert.equal(envelope(expect).error.code, 'expectation_failed');
    // 100-continue goes on to the route as before.
    const cont = await raw(`GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`);
    assert.match(cont, /^HTTP\/1\.1 (100 Continue\r\n\r\nHTTP\/1\.1 )?200 /);

    // CONNECT had no listener (the socket closed without an answer); a request without Host
    // got Node's bare 400 with an empty body.
    const connect = await raw(`CONNECT /v1/campaigns HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.match(connect, /^HTTP\/1\.1 405 /);
    assert.equal(envelope(connect).error.code, 'method_not_allowed');
    const hostless = await raw(`GET /v1/campaigns HTTP/1.1\r\nConnection: close\r\n\r\n`);
    assert.match(hostless, /^HTTP\/1\.1 400 /);
    assert.deepEqual(envelope(hostless), { error: { code: 'invalid_request', message: 'an HTTP/1.1 request must have a Host header' } });
    // HTTP/1.0 has no Host to require.
    const old = await raw(`GET /healthz HTTP/1.0\r\n\r\n`);
    assert.match(old, /^HTTP\/1\.1 200 /);
  });

  it('API answers are never stored: Cache-Control no-store on /v1 answers, errors included', async () => {
    const { adminKey } = await seedWorkspace(app);
    for (const [path, key] of [['/v1/campaigns', adminKey], ['/v1/campaigns', undefined], ['/v1/campaigns/cmp_missing', adminKey]] as const) {
      const res = await app.request('GET', path, { key });
      assert.equal(res.headers.get('cache-control'), 'no-store', `${path} ${res.status}`);
    }
  });

  it('a date-time outside years 0001-9999 once in UTC is 400 naming it and writes nothing; the timeline stops at year 0001', async () => {
    const ws = await seedWorkspace(app);
    const { sdr, sdrKey: rep } = await seedSdr(app, ws.workspace.id);
    await db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, status, category, last_message_at, created_at, updated_at)
       values ('thr_datesedge', $1, $2, 'p@example.com', 'new', 'B', now(), now(), now())`,
      [ws.workspace.id, sdr.id],
    );
    // 9999-12-31T23:00:00-14:00 is 10000-01-01T13:00:00Z: PostgreSQL would store it, and every
    // later read of the thread (and of the SDR's inbox) would fail on it.
    for (const until of ['9999-12-31T23:00:00-14:00', '10000-01-01T00:00:00Z'])
      assert400(await app.request('POST', '/v1/sdr/threads/thr_datesedge/snooze', { key: rep, body: { until } }), 'until', /^body until: must/);
    assert.equal((await db.query(`select snoozed_until from prospect_threads where id = 'thr_datesedge'`)).rows[0].snoozed_until, null);
    const inbox = await app.request('GET', '/v1/sdr/inbox', { key: rep });
    assert.equal(inbox.status, 200, inbox.text);
    assert.deepEqual(inbox.body.data.threads.map((t: { id: string }) => t.id), ['thr_datesedge']);

    const cmp = await app.request('POST', '/v1/campaigns', { key: ws.adminKey, body: { name: 'dates' } });
    const timeline = (q: string) => app.request('GET', `/v1/campaigns/${cmp.body.id}/timeline?${q}`, { key: ws.adminKey });
    assert400(await timeline('from=0000-01-01T00:00:00Z&to=0000-01-02T00:00:00Z'), 'from', /^query from: must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z/);
    assert400(await timeline('from=9999-12-31T20:00:00Z&to=9999-12-31T23:00:00-14:00'), 'to', /^query to: must lie between/);
    // The default `from` (47 hours or 29 days before `to`) would fall in 1 BC: it stops at the first instant.
    for (const bucket of ['hour', 'day']) {
      const first = await timeline(`bucket=${bucket}&to=0001-01-01T05:00:00Z`);
      assert.equal(first.status, 200, first.text);
      assert.equal(first.body.from, '0001-01-01T00:00:00.000Z');
      assert.equal(first.body.data.length, bucket === 'hour' ? 6 : 1);
    }
    const last = await timeline('bucket=day&from=9999-12-30T00:00:00Z&to=9999-12-31T23:59:59.999Z');
    assert.equal(last.status, 200, last.text);
    assert.equal(last.body.to, '9999-12-31T00:00:00.000Z');
    assert400(await app.request('GET', '/v1/replies?since=0000-12-31T23:59:59Z', { key: ws.adminKey }), 'since', /must lie between/);
    // A value that is no date-time at all is one problem, not also "must lie between ..." (it
    // said "(and 1 more problem, listed in errors)"; a review, 2026-11-29).
    for (const res of [
      await app.request('GET', '/v1/replies?since=yesterday', { key: ws.adminKey }),
      await app.request('POST', '/v1/sdr/threads/thr_datesedge/snooze', { key: rep, body: { until: 'tomorrow' } }),
    ]) {
      assert400(res, undefined, /must be an ISO 8601 date-time with a time zone/);
      assert.equal(res.body.errors.length, 1, res.text);
      assert.doesNotMatch(res.body.error.message, /more problem|must lie between/);
    }
  });

  it('a method no route takes (TRACE, PROPFIND) is 405 with Allow on a path that has routes, 404 elsewhere, in the envelope', async () => {
    const { port } = new URL(app.url);
    const call = (method: string, path: string) =>
      new Promise<{ status: number; allow: string | undefined; type: string | undefined; body: any }>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: Number(port), method, path, headers: { authorization: `Bearer ${key}` } }, (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, allow: res.headers.allow, type: res.headers['content-type'], body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end();
      });
    for (const method of ['TRACE', 'PROPFIND', 'SEARCH']) {
      const known = await call(method, '/v1/campaigns');
      assert.equal(known.status, 405, method);
      assert.equal(known.type, 'application/json; charset=utf-8');
      assert.equal(known.body.error.code, 'method_not_allowed');
      assert.match(known.allow ?? '', /GET/);
      assert.match(known.allow ?? '', /POST/);
      const unknown = await call(method, '/v1/no-such-thing');
      assert.equal(unknown.status, 404, method);
      assert.equal(unknown.body.error.code, 'not_found');
      assert.equal(unknown.allow, undefined);
    }
    // OPTIONS is answered on every path that has routes, so Allow lists it too, in its answer
    // and in a 405's (it named only the routes' methods).
    const options = await app.request('OPTIONS', '/v1/campaigns', { key });
    assert.equal(options.status, 200);
    assert.deepEqual(options.headers.get('allow')?.split(/,\s*/).sort(), ['GET', 'HEAD', 'OPTIONS', 'POST']);
    const refused = await app.request('DELETE', '/v1/campaigns', { key });
    assert.equal(refused.status, 405);
    assert.deepEqual(refused.headers.get('allow')?.split(/,\s*/).sort(), ['GET', 'HEAD', 'OPTIONS', 'POST']);
    assert.equal((await app.request('OPTIONS', '/v1/no-such-thing', { key })).status, 404);
  });

  it('a DELETE with a body (malformed, an object with fields, not JSON) or a no-body POST with [] is 400 and changes nothing', async () => {
    const made = await app.request('POST', '/v1/webhooks', { key, body: { url: 'https://1.1.1.1/hook', events: ['message.sent'] } });
    assert.equal(made.status, 201, made.text);
    const path = `/v1/webhooks/${made.body.id}`;
    assert400(await app.request('DELETE', path, { key, raw: 'garbage{', headers: json }), undefined, /^malformed JSON body/);
    assert400(await app.request('DELETE', path, { key, body: { x: 1 } }), undefined, /^this endpoint takes no request body$/);
    assert400(await app.request('DELETE', path, { key, raw: 'hello', headers: { 'content-type': 'text/plain' } }), undefined, /must be JSON/);
    assert.equal((await db.query('select count(*) from webhooks where id = $1', [made.body.id])).rows[0].count, '1');
    assert.equal((await app.request('DELETE', path, { key, body: {} })).status, 204);
    const cmp = await app.request('POST', '/v1/campaigns', { key, body: { name: 'array body' } });
    assert400(await app.request('POST', `/v1/campaigns/${cmp.body.id}/start`, { key, raw: '[]', headers: json }), undefined, /^this endpoint takes no request body$/);
    assert.equal((await db.query('select status from campaigns where id = $1', [cmp.body.id])).rows[0].status, 'draft');
  });

  it('the body is read only once the caller is known: without a key, a malformed, oversized or wrongly encoded body is 401; for no route 404', async () => {
    const before = await campaigns();
    const cases: Array<[string, Record<string, string>, string | Uint8Array]> = [
      ['malformed', json, '{bad'],
      ['oversized', json, Buffer.alloc(11 * 1024 * 1024, 0x20)],
      ['unknown encoding', { ...json, 'content-encoding': 'bogus' }, '{}'],
      ['gzip bomb', { ...json, 'content-encoding': 'gzip' }, zlib.gzipSync(Buffer.alloc(11 * 1024 * 1024, 0x20))],
    ];
    for (const [what, headers, body] of cases) {
      const res = await fetch(`${app.url}/v1/campaigns`, { method: 'POST', headers, body: body as BodyInit });
      assert.equal(res.status, 401, what);
      assert.equal((await res.json()).error.code, 'authentication_failed', what);
      const nowhere = await fetch(`${app.url}/v1/no-such-thing`, { method: 'POST', headers: { ...headers, authorization: `Bearer ${key}` }, body: body as BodyInit });
      assert.equal(nowhere.status, 404, what);
      assert.equal((await nowhere.json()).error.code, 'not_found', what);
    }
    assert.equal(await campaigns(), before);
    // With the key, the same bodies get their own answers.
    assert.equal((await app.request('POST', '/v1/campaigns', { key, raw: '{bad', headers: json })).status, 400);
  });

  it('a webhook URL with port 0 is 400 naming url, on create and on update', async () => {
    const before = (await db.query('select count(*) from webhooks')).rows[0].count;
    assert400(await app.request('POST', '/v1/webhooks', { key, body: { url: 'https://1.1.1.1:0/h', events: ['message.sent'] } }), 'url', /port 0/);
    assert.equal((await db.query('select count(*) from webhooks')).rows[0].count, before);
    const made = await app.request('POST', '/v1/webhooks', { key, body: { url: 'https://1.1.1.1:8443/h', events: ['message.sent'] } });
    assert.equal(made.status, 201, made.text);
    assert400(await app.request('PATCH', `/v1/webhooks/${made.body.id}`, { key, body: { url: 'https://1.1.1.1:0/h' } }), 'url', /port 0/);
    assert.equal((await db.query('select url from webhooks where id = $1', [made.body.id])).rows[0].url, 'https://1.1.1.1:8443/h');
  });

  it('a number past what a double holds (1e400), in a custom field or anywhere in a body, is 400 naming it (in a bulk enroll\'s lead, 422 with its index), not stored as null', async () => {
    const cmp = await app.request('POST', '/v1/campaigns', { key, body: { name: 'big numbers' } });
    const bulk = (raw: string) => app.request('POST', `/v1/campaigns/${cmp.body.id}/leads/bulk`, { key, raw, headers: json });
    assert422(await bulk('{"leads": [{"email": "inf@example.com", "score": 1e400}]}'), [[0, 'score', /^is a number beyond what a double holds/]]);
    assert422(await bulk('{"leads": [{"email": "ok@example.com"}, {"email": "inf@example.com", "plan": {"seats": [-1e999]}}]}'), [[1, 'plan.seats[0]', /beyond what a double holds/]]);
    assert.equal((await db.query('select count(*) from enrollments where campaign_id = $1', [cmp.body.id])).rows[0].count, '0');
    const fine = await bulk('{"leads": [{"email": "big@example.com", "score": 1e308}]}');
    assert.equal(fine.status, 200, fine.text);
  });

  it('a field refused after the schema (an unknown pool, a bad SDR email or calendar URL) is named in errors too, like a schema error', async () => {
    // README: every 4xx "with errors: [{field, message}] for each failing field". These answered
    // the message alone (found by a review, 2026-11-29).
    const { adminKey } = await seedWorkspace(app);
    const cases: [string, string, unknown, string, RegExp][] = [
      ['POST', '/v1/campaigns', { name: 'c', senderPoolId: 'pool_nope' }, 'senderPoolId', /sender pool pool_nope not found/],
      ['POST', '/v1/sdr-profiles', { name: 'S', email: 'not-an-email' }, 'email', /is not a valid email address/],
      ['POST', '/v1/sdr-profiles', { name: 'S', email: 's@example.com', calendarUrl: 'http://cal.example.com' }, 'calendarUrl', /is not an https URL/],
    ];
    for (const [method, path, body, field, message] of cases) {
      const res = await app.request(method, path, { key: adminKey, body });
      assert400(res, field, message);
      assert.equal(res.body.errors.length, 1, res.text);
      assert.match(res.body.errors[0].message, message);
    }
  });
});
