// Every response the test suite receives through the harness (and the fuzz test's own requests)
// is checked against the served OpenAPI document: the operation's status must be listed, the
// media type declared, a JSON body valid against the response schema (JSON Schema 2020-12,
// ajv) and required headers present. So the document cannot drift from the server. The counts
// are printed at the end of the run (test/support/global.ts).
import assert from 'node:assert/strict';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { openApiDocument } from '../../src/app.ts';

type Json = Record<string, any>;

interface Op {
  method: string;
  template: string;
  regex: RegExp;
  params: number;
  op: Json;
}

const doc = openApiDocument() as Json;
const SCHEMA_URN = 'urn:mailgate:schemas:';

/** '#/components/schemas/X' becomes a URN ajv resolves among the schemas added below. */
function relink(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(relink);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => [k, k === '$ref' && typeof x === 'string' ? x.replace('#/components/schemas/', SCHEMA_URN) : relink(x)]),
    );
  return v;
}

// strictSchema stays on (an unknown keyword in the document is an error); type unions are the
// document's normal null handling, not a mistake to warn about.
const ajv = new Ajv2020({ allErrors: true, strictTypes: false, strictTuples: false });
ajv.addFormat('date-time', (s: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(s) && !Number.isNaN(Date.parse(s)));
ajv.addFormat('email', (s: string) => /^[^\s@]+@[^\s@]+$/.test(s));
for (const [name, schema] of Object.entries(doc.components.schemas as Json)) ajv.addSchema(relink(schema) as Json, SCHEMA_URN + name);

const ops: Op[] = [];
for (const [template, methods] of Object.entries(doc.paths as Json)) {
  for (const [method, op] of Object.entries(methods as Json)) {
    const pattern = template
      .split('/')
      .map((seg) => (/^\{\w+\}$/.test(seg) ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    ops.push({ method: method.toUpperCase(), template, regex: new RegExp(`^${pattern}$`), params: (template.match(/\{/g) ?? []).length, op });
  }
}
// A literal segment wins over a parameter (POST /v1/sdr/drafts/generate is no {draftId}).
ops.sort((a, b) => a.params - b.params);

const validators = new Map<string, ValidateFunction>();
// On globalThis: global.ts (loaded through --require) may get a module instance of its own.
const STATS = Symbol.for('mailgate.openapi-check');
const stats: { validated: number; outside: number; byOperation: Map<string, number> } = ((globalThis as Record<symbol, unknown>)[STATS] ??= {
  validated: 0,
  outside: 0,
  byOperation: new Map<string, number>(),
}) as never;

function resolveResponse(r: Json | undefined): Json | undefined {
  if (!r?.$ref) return r;
  return doc.components.responses[String(r.$ref).replace('#/components/responses/', '')];
}

/**
 * Checks one response; throws an AssertionError naming the operation and what disagrees. A
 * request the document has no operation for (an unknown path, a 405) is counted, not checked.
 */
export function checkResponse(method: string, url: string, status: number, headers: Headers, text: string) {
  const pathname = new URL(url, 'http://x').pathname;
  const found = ops.find((o) => o.method === method.toUpperCase() && o.regex.test(pathname));
  if (!found) {
    stats.outside++;
    return;
  }
  const label = `${found.method} ${found.template} (${found.op.operationId}) answered ${status}`;
  const response = resolveResponse(found.op.responses[String(status)]);
  assert.ok(response, `${label}, a status the OpenAPI document does not list for it: ${text.slice(0, 300)}`);
  if (!response.content) {
    assert.equal(text, '', `${label} with a body, where the document declares none`);
  } else {
    const media = (headers.get('content-type') ?? '').split(';')[0].trim();
    const entry = response.content[media];
    assert.ok(entry, `${label} as ${media || 'no Content-Type'}; the document declares ${Object.keys(response.content).join(', ')}`);
    if (media === 'application/json') {
      const key = `${found.method} ${found.template} ${status}`;
      let validate = validators.get(key);
      if (!validate) {
        validate = ajv.compile(relink(entry.schema) as Json);
        validators.set(key, validate);
      }
      const body = JSON.parse(text);
      if (!validate(body))
        assert.fail(`${label} with a body the document's schema refuses: ${ajv.errorsText(validate.errors, { separator: '; ' })}\nbody: ${text.slice(0, 600)}`);
    }
  }
  for (const [name, h] of Object.entries((response.headers ?? {}) as Json)) {
    const value = headers.get(name);
    if (h.required) assert.ok(value !== null, `${label} without its ${name} header`);
    if (value !== null && h.schema?.type === 'integer') assert.match(value, /^\d+$/, `${label}: ${name} is not an integer`);
  }
  stats.validated++;
  stats.byOperation.set(found.op.operationId, (stats.byOperation.get(found.op.operationId) ?? 0) + 1);
}

/** Operations of the document, and how many of them the run's responses covered. */
export function coverage() {
  const all = ops.map((o) => o.op.operationId as string);
  return {
    validated: stats.validated,
    outside: stats.outside,
    operations: all.length,
    covered: all.filter((id) => stats.byOperation.has(id)).length,
    uncovered: all.filter((id) => !stats.byOperation.has(id)),
  };
}
