// The OpenAPI document as served: complete (every mounted endpoint, each operation with its id,
// summary, role and error answers), clean under Redocly's recommended rules, equal to the
// committed docs/openapi.json and docs/api.md, and true: the health, readiness and tracking
// answers are checked against it here; the rest of the suite's responses are checked by the
// harness (test/support/openapi-check.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type Router from '@koa/router';
import pg from 'pg';
import { buildApp, apiRoutes, dashboardRoutes } from '../../src/app.ts';
import { apiMarkdown, documentText } from '../../scripts/api-docs.ts';
import { startTestApp, seedWorkspace, type TestApp } from '../support/harness.ts';
import { checkResponse } from '../support/openapi-check.ts';
import { startMetricsServer } from '../../src/http/metrics-server.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');

type Json = Record<string, any>;

function operations(doc: Json): Array<{ method: string; path: string; op: Json }> {
  return Object.entries(doc.paths as Json).flatMap(([p, methods]) => Object.entries(methods as Json).map(([method, op]) => ({ method, path: p, op })));
}

/** Every object under `node`, with its JSON pointer. */
function* schemaNodes(node: unknown, at: string): Generator<[string, Json]> {
  if (!node || typeof node !== 'object') return;
  if (!Array.isArray(node)) yield [at, node as Json];
  for (const [k, v] of Object.entries(node)) yield* schemaNodes(v, `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
}

describe('OpenAPI document', function () {
  this.timeout(60_000);
  let app: TestApp;
  let doc: Json;

  before(async () => {
    app = await startTestApp();
    const res = await app.request('GET', '/v1/openapi.json');
    assert.equal(res.status, 200);
    doc = res.body;
  });
  after(async () => {
    await app?.close();
  });

  it('lints with 0 errors and 0 warnings under Redocly recommended (redocly.yaml)', async () => {
    // The served document, under the repository's lint configuration and its list of accepted problems.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-openapi-'));
    try {
      mkdirSync(path.join(dir, 'docs'));
      writeFileSync(path.join(dir, 'docs/openapi.json'), JSON.stringify(doc));
      cpSync(path.join(ROOT, 'redocly.yaml'), path.join(dir, 'redocly.yaml'));
      cpSync(path.join(ROOT, '.redocly.lint-ignore.yaml'), path.join(dir, '.redocly.lint-ignore.yaml'));
      const cli = path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');
      const { stdout } = await run(process.execPath, [cli, 'lint', 'mailgate', '--format=json'], {
        cwd: dir,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
        maxBuffer: 64 * 1024 * 1024,
      }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
      const result = JSON.parse(stdout.slice(stdout.indexOf('{')));
      const problems = (result.problems as Json[]).map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`);
      assert.deepEqual(problems, []);
      assert.deepEqual([result.totals.errors, result.totals.warnings], [0, 0]);
      console.log(`      redocly lint (recommended): ${result.totals.errors} errors, ${result.totals.warnings} warnings, ${result.totals.ignored} accepted in .redocly.lint-ignore.yaml`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('equals docs/openapi.json, and docs/api.md lists every operation (npm run docs:api)', () => {
    // assert.ok, not equal: a diff of 200 KB of JSON helps nobody; the command fixes it.
    assert.ok(readFileSync(path.join(ROOT, 'docs/openapi.json'), 'utf8') === documentText(doc), 'docs/openapi.json is stale: run npm run docs:api');
    const md = readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');
    assert.ok(md === apiMarkdown(md, doc), 'the operation table of docs/api.md is stale: run npm run docs:api');
  });

  it('documents every endpoint the API process mounts, and nothing it does not', () => {
    const koa = buildApp(app.deps);
    const router = koa.middleware.map((m) => (m as { router?: Router }).router).find(Boolean);
    assert.ok(router, 'the router of the app');
    const mounted = router.stack.flatMap((layer) =>
      layer.methods.filter((m) => m !== 'HEAD').map((m) => `${m.toLowerCase()} ${String(layer.path).replace(/:(\w+)/g, '{$1}')}`),
    );
    // An operation with servers of its own is answered by another listener (the metrics one).
    const elsewhere = operations(doc).filter((o) => o.op.servers).map((o) => `${o.method} ${o.path}`);
    assert.deepEqual(elsewhere, ['get /metrics']);
    const documented = operations(doc)
      .filter((o) => !o.op.servers)
      .map((o) => `${o.method} ${o.path}`);
    assert.deepEqual([...mounted].sort(), [...documented].sort());
    assert.equal(apiRoutes.length + dashboardRoutes.length, documented.length - 6, 'the route declarations (API and dashboard) plus health, readiness, the document and the three tracking endpoints');
  });

  it('the metrics listener answers GET /metrics as documented', async () => {
    const m = await startMetricsServer('127.0.0.1:0', app.deps.metrics, app.deps.log);
    try {
      const res = await fetch(`http://127.0.0.1:${m.port}/metrics`);
      const [type] = Object.keys(doc.paths['/metrics'].get.responses['200'].content);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type')?.replace(/\s/g, '').toLowerCase(), type.replace(/\s/g, '').toLowerCase());
      assert.match(await res.text(), /^# HELP /m);
    } finally {
      await new Promise((resolve) => m.server.close(resolve));
    }
  });

  it('gives every operation an id, a summary, its role and its error answers', () => {
    const ids = new Set<string>();
    for (const { method, path: p, op } of operations(doc)) {
      const at = `${method.toUpperCase()} ${p}`;
      assert.match(op.operationId, /^[a-z][a-zA-Z0-9]+$/, `${at}: camelCase operationId`);
      assert.ok(!ids.has(op.operationId), `${at}: operationId ${op.operationId} is unique`);
      ids.add(op.operationId);
      assert.ok(op.summary?.length > 5, `${at}: summary`);
      const role = op['x-mailgate-role'];
      assert.ok(['admin', 'sdr', 'none', 'dashboard-admin', 'dashboard-any', 'dashboard-sign-in', 'dashboard-sign-out'].includes(role), `${at}: x-mailgate-role`);
      const dashboard = role.startsWith('dashboard-');
      if (dashboard) {
        // The dashboard's own routes (docs/dashboard.md): a session cookie, never an API key.
        assert.ok(p.startsWith('/dashboard/api/'), `${at}: under /dashboard/api`);
        assert.match(op.description, role === 'dashboard-sign-in' ? /^Dashboard sign-in/ : /^Dashboard only: .*refused with 403/, `${at}: the role line`);
        assert.deepEqual(op.security, role === 'dashboard-admin' ? [{ session: ['admin'] }] : role === 'dashboard-any' || role === 'dashboard-sign-out' ? [{ session: [] }] : [], `${at}: security`);
      } else {
        assert.match(op.description, role === 'none' ? /^Role: none/ : role === 'admin' ? /^Role: \*\*admin\*\*/ : /^Role: \*\*SDR\*\*/, `${at}: the role line`);
        assert.deepEqual(op.security, role === 'none' ? [] : [{ bearer: [role] }, { session: [role] }], `${at}: security`);
      }
      const statuses = Object.keys(op.responses);
      assert.ok(statuses.includes('500'), `${at}: 500`);
      if (role !== 'none' && role !== 'dashboard-sign-in') for (const s of dashboard ? ['400', '401', '403'] : ['400', '401', '403', '404']) assert.ok(statuses.includes(s), `${at}: ${s}`);
      if (role !== 'none' && method !== 'get') {
        const forbidden = op.responses['403'];
        const codes = (forbidden.$ref ? doc.components.responses[forbidden.$ref.split('/').pop()] : forbidden).content['application/json'].schema.allOf[1].properties.error.properties.code.enum;
        assert.ok(codes.includes('csrf_failed'), `${at}: 403 csrf_failed (a session's write without its CSRF token)`);
      }
      if (role !== 'none' && (method === 'post' || method === 'patch')) for (const s of ['413', '415']) assert.ok(statuses.includes(s), `${at}: ${s}`);
      // A readiness 503 is the probe's answer ({status, pending}), not an error envelope.
      for (const s of statuses.filter((x) => Number(x) >= 400 && !(op.operationId === 'getReadiness' && x === '503'))) {
        const r = op.responses[s].$ref ? doc.components.responses[op.responses[s].$ref.split('/').pop()] : op.responses[s];
        const schema = r.content['application/json'].schema;
        assert.equal(schema.allOf[0].$ref, '#/components/schemas/Error', `${at} ${s}: the envelope`);
        assert.ok(schema.allOf[1].properties.error.properties.code.enum.length > 0, `${at} ${s}: its codes`);
      }
      // Named after what they identify: no bare {id} (a suppression entry is identified by its address).
      for (const name of p.match(/\{(\w+)\}/g) ?? []) assert.match(name, /^\{([a-z][A-Za-z]*Id|token|email)\}$/, `${at}: path parameter ${name}`);
    }
    const envelope = doc.components.schemas.Error;
    assert.deepEqual(envelope.required, ['error']);
    assert.deepEqual(envelope.properties.error.required, ['code', 'message']);
    assert.equal(envelope.properties.errors.items.$ref, '#/components/schemas/FieldError');
  });

  it('declares X-Total-Count, Idempotency-Key and the lenient items with their real shapes', () => {
    const replies = doc.paths['/v1/replies'].get.responses['200'];
    assert.deepEqual(replies.headers['X-Total-Count'].schema, { type: 'integer', minimum: 0 });
    const send = doc.paths['/v1/sdr/threads/{threadId}/send-manual'].post;
    assert.ok(send.parameters.some((p: Json) => p.in === 'header' && p.name === 'Idempotency-Key' && p.required === false));
    const withKey = operations(doc).filter(({ op }) => (op.parameters ?? []).some((p: Json) => p.name === 'Idempotency-Key'));
    assert.deepEqual(withKey.map((o) => o.op.operationId), ['sendManualReply']);
    const bulk = doc.paths['/v1/campaigns/{campaignId}/leads/bulk'].post.requestBody.content['application/json'].schema;
    assert.equal(bulk.properties.leads.items.$ref, '#/components/schemas/LeadInput');
    assert.deepEqual(doc.components.schemas.LeadInput.required, ['email']);
    const suppress = doc.paths['/v1/suppression-list'].post.requestBody.content['application/json'].schema;
    assert.deepEqual([suppress.properties.emails.items.type, suppress.properties.emails.items.format], ['string', 'email']);
    const thread = doc.components.schemas.ProspectThreadDetail.properties;
    assert.equal(thread.messages.items.$ref, '#/components/schemas/ThreadMessage');
    assert.equal(thread.drafts.items.$ref, '#/components/schemas/ThreadDraft');
    assert.equal(doc.components.schemas.Handoff.properties.snapshot.$ref, '#/components/schemas/HandoffSnapshot');
  });

  it('has no untyped value in a response or request schema but the free-form JSON a client sent', () => {
    // A schema with no type, $ref, const, enum or combinator is "any": a generated client says unknown.
    const allowed = new Set(['/components/schemas/FieldError/properties/value']);
    const untyped: string[] = [];
    for (const [at, node] of schemaNodes(doc, '')) {
      const slot = /\/(schema|items|additionalProperties|properties\/[^/]+)$/.test(at) && /\/(content\/[^/]+\/schema|components\/schemas\/)/.test(at);
      if (!slot) continue;
      const typed = ['type', '$ref', 'const', 'enum', 'anyOf', 'oneOf', 'allOf'].some((k) => k in node);
      // Custom fields are any JSON by design (a lead's own data), described as such.
      if (!typed && !allowed.has(at) && !/\/customFields\/additionalProperties$/.test(at) && !/LeadInput\/additionalProperties$/.test(at)) untyped.push(at);
    }
    assert.deepEqual(untyped, []);
  });

  it('health, readiness, the document and the tracking and unsubscribe links answer as documented', async () => {
    // Each answer goes through the harness's check against the document.
    assert.equal((await app.request('GET', '/healthz')).status, 200);
    assert.equal((await app.request('GET', '/readyz')).status, 200);
    assert.equal((await app.request('GET', '/v1/openapi.json')).status, 200);
    const { workspace } = await seedWorkspace(app);
    const s = app.services();
    const campaign = await s.campaigns.create(workspace.id, { name: 'docs', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] });
    await s.campaigns.enroll(workspace.id, campaign.id, [{ email: 'lee@example.com' }]);
    // A message as the dispatcher records a sent one (the links need nothing else).
    const db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    const { rows } = await db
      .query(
        `insert into outbound_messages (id, workspace_id, campaign_id, lead_id, enrollment_id, step_index, to_email, state, due_at, sent_at, created_at, updated_at)
         select 'msg_docs1', e.workspace_id, e.campaign_id, e.lead_id, e.id, 0, 'lee@example.com', 'sent', now(), now(), now(), now()
           from enrollments e where e.campaign_id = $1 returning id`,
        [campaign.id],
      )
      .finally(() => db.end());
    assert.equal(rows.length, 1);
    const open = await app.request('GET', `/t/o/${app.deps.crypto.sign('o.msg_docs1')}`);
    assert.deepEqual([open.status, open.headers.get('content-type')], [200, 'image/gif']);
    assert.equal((await app.request('GET', '/t/o/forged')).status, 404);
    const unsubscribe = `/u/${app.deps.crypto.sign('u.msg_docs1')}`;
    const page = await app.request('GET', unsubscribe);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.deepEqual((await app.request('POST', unsubscribe, { headers: { accept: 'application/json' } })).body, { unsubscribed: true });
    assert.equal((await app.request('POST', unsubscribe, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, raw: 'List-Unsubscribe=One-Click' })).status, 200);
    assert.equal((await app.request('POST', '/u/forged')).status, 404);
  });

  it('the harness check refuses an answer the document does not describe', async () => {
    const { adminKey } = await seedWorkspace(app);
    const res = await app.request('POST', '/v1/campaigns', { key: adminKey, body: { name: 'drift' } });
    assert.equal(res.status, 201);
    const check = (status: number, body: unknown, headers = res.headers) => () => checkResponse('POST', '/v1/campaigns', status, headers, JSON.stringify(body));
    assert.doesNotThrow(check(201, res.body));
    assert.throws(check(201, { ...res.body, surprise: 1 }), /must NOT have additional properties/);
    assert.throws(check(201, { ...res.body, createdAt: 'yesterday' }), /must match format "date-time"/);
    assert.throws(check(409, { error: { code: 'conflict', message: 'x' } }), /a status the OpenAPI document does not list/);
    assert.throws(check(404, { error: { code: 'campaign_not_found', message: 'x' } }), /must be equal to one of the allowed values/);
    const total = await app.request('GET', '/v1/replies', { key: adminKey });
    const withoutTotal = new Headers(total.headers);
    withoutTotal.delete('x-total-count');
    assert.throws(() => checkResponse('GET', '/v1/replies', 200, withoutTotal, total.text), /without its X-Total-Count header/);
  });
});
