// Property-based fuzzing of every route of the OpenAPI document against the real app and
// PostgreSQL: hostile input (NUL, lone surrogates, wrong types, huge numbers, empty and
// oversized strings, unknown fields, deep and wide nesting, bad ids, broken content
// encodings) must never reach a 5xx, must always answer in the contract's envelope, and a
// refused request must leave every table exactly as it was.
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import fc from 'fast-check';
import pg from 'pg';
import { Agent, fetch } from 'undici';
import { apiRoutes } from '../../src/app.ts';
import { startTestApp, seedWorkspace, seedSdr, type TestApp } from '../support/harness.ts';
import { checkResponse } from '../support/openapi-check.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: Json[];
  const?: Json;
  format?: string;
  minimum?: number;
  minItems?: number;
  anyOf?: JsonSchema[];
  default?: Json;
}
interface Operation {
  method: string;
  path: string;
  access: string;
  pathParams: string[];
  query: Record<string, JsonSchema>;
  body?: JsonSchema;
}
/** One request as the fuzzer sends it: the URL's pieces raw (already percent-encoded). */
interface Req {
  params: Record<string, string>;
  query: Array<[string, string]>;
  headers: Record<string, string>;
  body?: Uint8Array | string;
}
type Location = 'body' | 'query' | 'path';

const NUMBER_LITERALS = ['1e400', '-1e400', '1e308', '-1e308', '18446744073709551616', '9007199254740993', '-0', '0.0000001', '123456789012345678901234567890'];

/** Percent-encodes what a client would send; a lone surrogate becomes its (invalid) UTF-8 bytes. */
function encode(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff) {
      out += encodeURIComponent(s.slice(i, i + 2));
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += `%ED%${(0xa0 + ((c >> 6) & 0x1f)).toString(16).toUpperCase()}%${(0x80 + (c & 0x3f)).toString(16).toUpperCase()}`;
    } else out += encodeURIComponent(s[i]);
  }
  return out;
}

/** A value the schema accepts in the simplest case (the mutations break it from there). */
function sample(s: JsonSchema | undefined, depth = 0): Json {
  if (!s || depth > 4) return 'x';
  if (s.const !== undefined) return s.const;
  if (s.enum?.length) return s.enum[0];
  if (s.default !== undefined) return s.default;
  if (s.anyOf?.length) return sample(s.anyOf.find((o) => o.type !== 'null') ?? s.anyOf[0], depth + 1);
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  switch (type) {
    case 'string':
      return s.format === 'email' ? 'fuzz@example.com' : s.format === 'date-time' ? '2030-01-01T00:00:00Z' : s.format === 'uri' ? 'https://example.com/' : 'x';
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return true;
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => sample(s.items, depth + 1));
    case 'object': {
      const o: Record<string, Json> = {};
      for (const k of s.required ?? []) o[k] = sample(s.properties?.[k], depth + 1);
      return o;
    }
    default:
      return 'x';
  }
}

function deep(levels: number, object: boolean): string {
  return object ? '{"a":'.repeat(levels) + '1' + '}'.repeat(levels) : '['.repeat(levels) + ']'.repeat(levels);
}

/**
 * A body with `value` (JSON text) at `field`, or at a field inside an item of `field` when
 * `nested` (so a lead's firstName or a step's subject is hit, not only top-level fields).
 */
function bodyWith(op: Operation, field: string, valueJson: string, nested: boolean): string {
  const base = (sample(op.body) ?? {}) as Record<string, Json>;
  const marker = '"__FUZZ_VALUE__"';
  const prop = op.body?.properties?.[field];
  const isList = prop?.type === 'array' || (Array.isArray(prop?.type) && prop.type.includes('array'));
  let slot: Json = '__FUZZ_VALUE__';
  if (nested && isList) slot = [{ email: 'fuzz@example.com', firstName: '__FUZZ_VALUE__' }];
  else if (nested) slot = { inner: '__FUZZ_VALUE__' };
  return JSON.stringify({ ...base, [field]: slot }).replace(marker, valueJson);
}

// Three runs per pair keep the suite's time; MAILGATE_FUZZ_RUNS=50 (say) digs deeper by hand.
const RUNS = Number(process.env.MAILGATE_FUZZ_RUNS) || 3;

describe('HTTP fuzz: every route of the OpenAPI document under hostile input', function () {
  this.timeout(60_000 * Math.max(3, RUNS));
  let app: TestApp;
  let db: pg.Client;
  let ops: Operation[];
  let keys: { admin: string; sdr: string };
  const realIds: Record<string, string> = {};
  let checksumSql = '';

  before(async () => {
    app = await startTestApp({ config: { webhookAllowPrivate: true } });
    const { workspace, adminKey } = await seedWorkspace(app);
    const { sdrKey, sdr } = await seedSdr(app, workspace.id);
    keys = { admin: adminKey, sdr: sdrKey };
    const s = app.services();
    const campaign = await s.campaigns.create(workspace.id, { name: 'fuzz', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] });
    await s.campaigns.enroll(workspace.id, campaign.id, [{ email: 'lead@example.com', firstName: 'Lee' }]);
    const hook = await s.webhooks.create(workspace.id, { url: 'https://127.0.0.1:9/hook', events: ['message.sent'] });
    realIds.campaignId = campaign.id;
    realIds.webhookId = hook.id;
    // The dashboard's /v1 routes (issue 17): a sender account, a pool and an SDR to act on.
    const sender = await s.senders.add({ workspaceId: workspace.id, email: 'fuzz-sender@example.com', name: 'Fuzz', smtpUrl: 'smtp://u:p@127.0.0.1:9' });
    const pool = await s.senders.createPool(workspace.id, 'fuzz', 10, [sender.id]);
    realIds.senderAccountId = sender.id;
    realIds.poolId = pool.id;
    realIds.sdrId = sdr.id;

    const doc = (await app.request('GET', '/v1/openapi.json')).body;
    const access = new Map(apiRoutes.map((r) => [`${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`, r.access]));
    ops = [];
    for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(methods)) {
        // The declared API routes; health probes and the tracking links are not route declarations.
        if (!access.has(`${method} ${path}`)) continue;
        const params = (op.parameters ?? []) as Array<{ name: string; in: string; schema: JsonSchema }>;
        ops.push({
          method: method.toUpperCase(),
          path,
          access: access.get(`${method} ${path}`)!,
          pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
          query: Object.fromEntries(params.filter((p) => p.in === 'query').map((p) => [p.name, p.schema])),
          body: op.requestBody?.content?.['application/json']?.schema,
        });
      }
    }
    // The document and the mounted routes are the same list: nothing is left unfuzzed.
    assert.equal(ops.length, apiRoutes.length);
    assert.ok(ops.every((o) => o.access));

    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    const { rows } = await db.query<{ t: string }>(`select tablename as t from pg_tables where schemaname = 'public' order by 1`);
    // Every row's full text is hashed, so an update is seen as well as an insert or delete;
    // api_keys alone is counted, because authentication itself stamps last_used_at.
    checksumSql = rows
      .map(({ t }) =>
        t === 'api_keys'
          ? `select '${t}' as t, count(*)::text as n, '' as h from "${t}"`
          : `select '${t}' as t, count(*)::text as n, coalesce(sum(hashtext(x::text)::bigint), 0)::text as h from "${t}" x`,
      )
      .join(' union all ');
  });
  after(async () => {
    await db?.end();
    await app?.close();
    await fresh.close();
  });

  async function checksum(): Promise<string> {
    const { rows } = await db.query<{ t: string; n: string; h: string }>(checksumSql);
    return rows.map((r) => `${r.t}:${r.n}:${r.h}`).join(',');
  }

  function baseReq(op: Operation): Req {
    const params: Record<string, string> = {};
    for (const p of op.pathParams) params[p] = encode(realIds[p] ?? `${p}_nope`);
    const headers: Record<string, string> = { authorization: `Bearer ${op.access === 'sdr' ? keys.sdr : keys.admin}` };
    const hasBody = op.method === 'POST' || op.method === 'PATCH';
    if (hasBody) headers['content-type'] = 'application/json';
    return { params, query: [], headers, body: hasBody && op.body ? JSON.stringify(sample(op.body)) : undefined };
  }

  let baseline = '';
  // One connection per request: a reset is then the server's doing, never a keep-alive race
  // with a socket the server closed while idle.
  const fresh = new Agent({ pipelining: 0 });
  const stats = { requests: 0, refused: 0, accepted: 0, serverErrors: 0 };

  async function send(op: Operation, req: Req) {
    const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => req.params[name]);
    const qs = req.query.map(([k, v]) => `${k}=${v}`).join('&');
    const res = await fetch(app.url + path + (qs ? `?${qs}` : ''), { method: op.method, headers: req.headers, body: req.body, dispatcher: fresh });
    const text = await res.text();
    stats.requests++;
    checkResponse(op.method, path, res.status, res.headers, text);
    const label = `${op.method} ${path}${qs ? `?${qs.slice(0, 200)}` : ''} -> ${res.status} ${text.slice(0, 300)}`;
    if (res.status >= 500) stats.serverErrors++;
    assert.ok(res.status < 500, label);
    if (res.status >= 400) {
      stats.refused++;
      assert.match(res.headers.get('content-type') ?? '', /application\/json/, label);
      const body = JSON.parse(text);
      assert.equal(typeof body.error?.code, 'string', label);
      assert.ok(typeof body.error?.message === 'string' && body.error.message.length > 0, label);
      const after = await checksum();
      assert.equal(after, baseline, `a refused request wrote to the database: ${label}`);
    } else {
      stats.accepted++;
      baseline = await checksum();
    }
  }

  // A string argument that lands in one of the request's places: a body field (top level or
  // inside an item), a query parameter, or a path parameter.
  function placed(op: Operation, value: fc.Arbitrary<string>, locations: Location[] = ['body', 'query', 'path']) {
    const usable = locations.filter((l) => (l === 'body' ? op.method === 'POST' || op.method === 'PATCH' : l === 'path' ? op.pathParams.length > 0 : true));
    const bodyFields = Object.keys(op.body?.properties ?? {});
    const queryNames = Object.keys(op.query);
    return fc.record({
      where: fc.constantFrom(...usable),
      field: fc.constantFrom(...(bodyFields.length ? bodyFields : ['fuzz'])),
      queryName: fc.constantFrom(...(queryNames.length ? queryNames : ['fuzz'])),
      param: fc.constantFrom(...(op.pathParams.length ? op.pathParams : ['none'])),
      nested: fc.boolean(),
      value,
    });
  }

  function applyString(op: Operation, p: { where: Location; field: string; queryName: string; param: string; nested: boolean; value: string }): Req {
    const req = baseReq(op);
    if (p.where === 'body') req.body = bodyWith(op, p.field, JSON.stringify(p.value), p.nested);
    else if (p.where === 'query') req.query.push([encode(p.queryName), encode(p.value)]);
    else req.params[p.param] = encode(p.value) || '%20';
    return req;
  }

  const nulString = fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => `${a}\u0000${b}`);
  const loneSurrogate = fc
    .tuple(fc.string({ maxLength: 8 }), fc.integer({ min: 0xd800, max: 0xdfff }), fc.string({ maxLength: 8 }))
    .map(([a, c, b]) => `${a}${String.fromCharCode(c)}${c < 0xdc00 ? 'z' : ''}${b}`);

  interface Mutation {
    name: string;
    applies(op: Operation): boolean;
    arbitrary(op: Operation): fc.Arbitrary<Req>;
  }
  const hasBody = (op: Operation) => op.method === 'POST' || op.method === 'PATCH';
  const always = () => true;

  const mutations: Mutation[] = [
    { name: 'NUL character', applies: always, arbitrary: (op) => placed(op, nulString).map((p) => applyString(op, p)) },
    { name: 'lone surrogate', applies: always, arbitrary: (op) => placed(op, loneSurrogate).map((p) => applyString(op, p)) },
    {
      name: 'wrong type',
      applies: always,
      arbitrary: (op) =>
        fc
          .record({
            value: fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }), fc.string({ maxLength: 10 })),
            root: fc.boolean(),
            placement: placed(op, fc.constant('')),
          })
          .map(({ value, root, placement }) => {
            const req = baseReq(op);
            if (placement.where === 'body' && root) req.body = JSON.stringify(value);
            else if (placement.where === 'body') req.body = bodyWith(op, placement.field, JSON.stringify(value), placement.nested);
            else if (placement.where === 'query') {
              // A repeated parameter is an array where one value is expected.
              req.query.push([placement.queryName, encode(typeof value === "string" ? value : JSON.stringify(value))], [placement.queryName, "abc"]);
            } else req.params[placement.param] = encode(JSON.stringify(value));
            return req;
          }),
    },
    {
      name: 'huge number',
      applies: always,
      arbitrary: (op) =>
        placed(op, fc.constantFrom(...NUMBER_LITERALS)).map((p) => {
          const req = baseReq(op);
          if (p.where === 'body') req.body = bodyWith(op, p.field, p.value, p.nested);
          else if (p.where === 'query') req.query.push([p.queryName, encode(p.value)]);
          else req.params[p.param] = encode(p.value);
          return req;
        }),
    },
    { name: 'empty string', applies: always, arbitrary: (op) => placed(op, fc.constant('')).map((p) => applyString(op, p)) },
    {
      name: 'oversized string',
      applies: always,
      arbitrary: (op) =>
        fc.record({ size: fc.constantFrom(1_001, 70_000, 1_100_000), placement: placed(op, fc.constant('')), big: fc.boolean() }).map(({ size, placement, big }) => {
          if (placement.where === 'body' && big && size === 1_100_000) {
            // Over the 10 MB body limit.
            const req = baseReq(op);
            req.body = bodyWith(op, placement.field, JSON.stringify('y'.repeat(10 * 1024 * 1024 + 1)), false);
            return req;
          }
          // A URL stays under Node's 16 KB header limit (above it Node answers 431 itself).
          const value = 'x'.repeat(placement.where === 'body' ? size : 4_000);
          return applyString(op, { ...placement, value });
        }),
    },
    {
      name: 'unknown field',
      applies: always,
      arbitrary: (op) =>
        fc.record({ name: fc.stringMatching(/^[a-z][A-Za-z0-9]{0,11}$/), inBody: fc.boolean() }).map(({ name, inBody }) => {
          const req = baseReq(op);
          const unknown = `zz${name}`;
          if (inBody && hasBody(op)) req.body = JSON.stringify({ ...(sample(op.body) as object), [unknown]: 'v' });
          else req.query.push([unknown, '1']);
          return req;
        }),
    },
    {
      name: 'deep nesting',
      applies: hasBody,
      arbitrary: (op) =>
        fc.record({ levels: fc.oneof(fc.integer({ min: 33, max: 200 }), fc.constant(10_000)), object: fc.boolean(), root: fc.boolean(), placement: placed(op, fc.constant(''), ['body']) }).map(({ levels, object, root, placement }) => {
          const req = baseReq(op);
          req.body = root ? deep(levels, object) : bodyWith(op, placement.field, deep(levels, object), placement.nested);
          return req;
        }),
    },
    {
      name: 'wide nesting',
      applies: hasBody,
      arbitrary: (op) =>
        fc.record({ object: fc.boolean(), placement: placed(op, fc.constant(''), ['body']) }).map(({ object, placement }) => {
          const req = baseReq(op);
          const wide = object ? `{${Array.from({ length: 10_000 }, (_, i) => `"k${i}":[[]]`).join(',')}}` : `[${Array(10_000).fill('[[]]').join(',')}]`;
          req.body = bodyWith(op, placement.field, wide, placement.nested);
          return req;
        }),
    },
    {
      name: 'bad id',
      applies: (op) => op.pathParams.length > 0,
      arbitrary: (op) =>
        fc
          .record({
            param: fc.constantFrom(...op.pathParams),
            raw: fc.oneof(
              fc.constantFrom('%00', '%ED%A0%80', '%FF', '%C0%AF', '%', '%zz', '..', '%2F', '%2e%2e', `cmp_${'x'.repeat(300)}`, "'%20or%201=1--", 'null', '0', '-1'),
              fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }).map(encode),
              fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }).map(encode),
            ),
          })
          .map(({ param, raw }) => {
            const req = baseReq(op);
            req.params[param] = raw;
            return req;
          }),
    },
    {
      name: 'broken content encoding',
      applies: hasBody,
      arbitrary: (op) =>
        fc
          .record({
            encoding: fc.constantFrom('gzip', 'deflate', 'br', 'x-gzip', 'zstd', 'compress', 'gzip, br', 'GZIP', 'bogus'),
            kind: fc.constantFrom('garbage', 'truncated', 'plain'),
            garbage: fc.uint8Array({ minLength: 0, maxLength: 64 }),
          })
          .map(({ encoding, kind, garbage }) => {
            const req = baseReq(op);
            const plain = Buffer.from(typeof req.body === 'string' ? req.body : '{}');
            const gz = zlib.gzipSync(plain);
            req.headers['content-encoding'] = encoding;
            req.body = kind === 'garbage' ? Buffer.from(garbage) : kind === 'truncated' ? gz.subarray(0, Math.max(1, gz.length - 5)) : plain;
            return req;
          }),
    },
  ];

  it(`answers every route × mutation with a 4xx in the envelope (or a success), never a 5xx, and writes nothing when it refuses`, async () => {
    baseline = await checksum();
    let pairs = 0;
    const perMutation: Record<string, number> = {};
    for (const op of ops) {
      for (const m of mutations) {
        if (!m.applies(op)) continue;
        pairs++;
        perMutation[m.name] = (perMutation[m.name] ?? 0) + 1;
        await fc.assert(
          fc.asyncProperty(m.arbitrary(op), async (req) => send(op, req)),
          { numRuns: RUNS, endOnFailure: true },
        );
      }
    }
    console.log(
      `      fuzz: ${ops.length} routes × ${mutations.length} mutation classes = ${pairs} applicable pairs, ${stats.requests} requests ` +
        `(${stats.refused} refused, ${stats.accepted} accepted), 5xx: ${stats.serverErrors}; per class: ${JSON.stringify(perMutation)}`,
    );
    assert.equal(stats.serverErrors, 0);
    assert.equal(pairs, Object.values(perMutation).reduce((a, b) => a + b, 0));
  });
});
