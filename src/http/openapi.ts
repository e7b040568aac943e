import { z } from 'zod';
import type { Access, AnyRoute } from './route.ts';

type Json = Record<string, unknown>;

/** An endpoint mounted outside `apiRoutes` (health, tracking links, the document itself), documented by hand. */
export interface StaticOperation {
  method: 'get' | 'post';
  /** OpenAPI form: `/u/{token}`. */
  path: string;
  operation: Json;
}

const SCHEMAS = '#/components/schemas/';

const fieldError = {
  type: 'object',
  description: 'one failing field or item',
  required: ['message'],
  properties: {
    index: { type: 'integer', minimum: 0, description: 'position of the failing item in the submitted array (bulk leads, suppression emails)' },
    field: { type: 'string', description: 'the failing field (`leads[3].email`, `Idempotency-Key`); absent when the whole body is wrong' },
    value: { description: 'the submitted value that failed, where it helps' },
    message: { type: 'string' },
  },
};

const errorEnvelope = {
  type: 'object',
  description: 'Every 4xx and 5xx answer (contract §3). Some routes add top-level fields, declared on their responses.',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string', description: 'machine code, listed per response' }, message: { type: 'string', description: 'a sentence for people' } },
    },
    errors: { type: 'array', description: 'each failing field or item', items: { $ref: `${SCHEMAS}FieldError` } },
  },
};

const ROLE_LINE: Record<Access, string> = {
  admin: 'Role: **admin** API key (`Authorization: Bearer <key>`), or the dashboard session of one.',
  sdr: 'Role: **SDR** API key (`Authorization: Bearer <key>` of a key with role `sdr` linked to an active SDR), or the dashboard session of one; the operation acts for that SDR.',
  none: 'Role: none; no API key.',
};

const SECURITY: Record<Access, unknown[]> = {
  // OpenAPI 3.1 lets a non-OAuth requirement name the roles it needs.
  admin: [{ bearer: ['admin'] }, { session: ['admin'] }],
  sdr: [{ bearer: ['sdr'] }, { session: ['sdr'] }],
  none: [],
};

type DashboardAccess = NonNullable<AnyRoute['dashboard']>;

const DASHBOARD_LINE: Record<DashboardAccess, string> = {
  admin: 'Dashboard only: the session cookie of an **admin** key and its `X-CSRF-Token`; an API key (`Authorization` header) is refused with 403 `forbidden`.',
  any: 'Dashboard only: a session cookie (admin or SDR key) and its `X-CSRF-Token`; an API key (`Authorization` header) is refused with 403 `forbidden`.',
  'sign-in': 'Dashboard sign-in: exchanges an API key for a session cookie; no key in the `Authorization` header.',
  'sign-out': 'Dashboard only: any session cookie and its `X-CSRF-Token`, also one of an inactive SDR\'s key; an API key (`Authorization` header) is refused with 403 `forbidden`.',
};

const DASHBOARD_SECURITY: Record<DashboardAccess, unknown[]> = {
  admin: [{ session: ['admin'] }],
  any: [{ session: [] }],
  'sign-in': [],
  'sign-out': [{ session: [] }],
};

/**
 * zod's JSON Schema for one request or response. Schemas registered with `.meta({ id })` come
 * out as `$defs`; they are moved into `components.schemas` (`defs`) so generated clients get
 * named types, and a second, different schema under a taken name is refused.
 */
export function jsonSchema(s: z.ZodType, io: 'input' | 'output', defs: Record<string, unknown>): Json {
  const { $schema: _ignored, $defs, ...rest } = z.toJSONSchema(s, { io, unrepresentable: 'any' }) as Json & { $defs?: Record<string, unknown> };
  for (const [name, def] of Object.entries($defs ?? {})) {
    const moved = relink(def);
    if (name in defs && JSON.stringify(defs[name]) !== JSON.stringify(moved)) throw new Error(`two different schemas are named ${name} in the OpenAPI document`);
    defs[name] = moved;
  }
  return relink(rest) as Json;
}

function relink(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(relink);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === '$ref' && typeof x === 'string' ? x.replace('#/$defs/', SCHEMAS) : relink(x)]));
  }
  return v;
}

/** An error response listing the codes it can carry; `extras` are top-level fields beside `error`. */
export function errorResponse(codes: string[], extras: Record<string, unknown> = {}): Json {
  const narrowed = {
    type: 'object',
    properties: { error: { type: 'object', properties: { code: { enum: codes } } }, ...extras },
  };
  return {
    description: codes.map((c) => `\`${c}\``).join(', '),
    content: { 'application/json': { schema: { allOf: [{ $ref: `${SCHEMAS}Error` }, narrowed] } } },
  };
}

/** The answers most operations share, under components.responses (one code each). */
const SHARED: Record<string, { status: number; code: string }> = {
  InvalidRequest: { status: 400, code: 'invalid_request' },
  AuthenticationFailed: { status: 401, code: 'authentication_failed' },
  Forbidden: { status: 403, code: 'forbidden' },
  WorkspaceNotFound: { status: 404, code: 'workspace_not_found' },
  PayloadTooLarge: { status: 413, code: 'payload_too_large' },
  UnsupportedMediaType: { status: 415, code: 'unsupported_media_type' },
  InternalError: { status: 500, code: 'internal_error' },
  TemporarilyUnavailable: { status: 503, code: 'temporarily_unavailable' },
};

/** Extra fields of a shared answer's description (the 503's Retry-After). */
const SHARED_HEADERS: Record<string, Json> = {
  TemporarilyUnavailable: {
    'Retry-After': {
      description: 'Seconds to wait before trying again: 1 after a conflict with concurrent changes, 5 while the database is unavailable',
      schema: { type: 'integer', minimum: 1 },
    },
  },
};

function sharedResponse(status: number, codes: string[]): Json | undefined {
  const name = Object.keys(SHARED).find((n) => SHARED[n].status === status && codes.length === 1 && codes[0] === SHARED[n].code);
  return name ? { $ref: `#/components/responses/${name}` } : undefined;
}

/** The codes every route can answer, by status, before its own. */
function commonErrors(r: AnyRoute): Record<number, string[]> {
  const codes: Record<number, string[]> = { 400: ['invalid_request'] };
  // A state-changing request authenticated by the dashboard session cookie needs its CSRF token.
  const forbidden = r.method === 'get' ? ['forbidden'] : ['forbidden', 'csrf_failed'];
  if (r.dashboard) {
    if (r.dashboard !== 'sign-in') Object.assign(codes, { 401: ['authentication_failed'], 403: forbidden });
  } else if (r.access !== 'none') Object.assign(codes, { 401: ['authentication_failed'], 403: forbidden, 404: ['workspace_not_found'] });
  // The JSON body reader runs on every POST/PATCH/DELETE route once the caller is authorized.
  if (r.method !== 'get') Object.assign(codes, { 413: ['payload_too_large'], 415: ['unsupported_media_type'] });
  codes[500] = ['internal_error'];
  // Nothing wrong with the request: the database is unreachable, or the transaction lost a lock
  // conflict after its retries (db/transaction.ts). Nothing was written; try again.
  codes[503] = ['temporarily_unavailable'];
  return codes;
}

function operationOf(r: AnyRoute, defs: Record<string, unknown>): Json {
  const parameters: unknown[] = [];
  const pathSchema = r.params ? (jsonSchema(r.params, 'input', defs) as { properties?: Record<string, Json> }) : {};
  for (const m of r.path.matchAll(/:(\w+)/g)) {
    const { description, ...schema } = pathSchema.properties?.[m[1]] ?? { type: 'string' };
    parameters.push({ name: m[1], in: 'path', required: true, ...(description ? { description } : {}), schema });
  }
  if (r.query) {
    const q = jsonSchema(r.query, 'input', defs) as { properties?: Record<string, Json>; required?: string[] };
    for (const [name, { description, ...schema }] of Object.entries(q.properties ?? {}))
      parameters.push({ name, in: 'query', required: q.required?.includes(name) ?? false, ...(description ? { description } : {}), schema });
  }
  for (const [name, h] of Object.entries(r.requestHeaders ?? {}))
    parameters.push({ name, in: 'header', required: h.required ?? false, description: h.description, schema: h.schema });

  const responses: Record<string, unknown> = {};
  const status = r.status ?? 200;
  if (status === 204) responses['204'] = { description: 'Done; no body' };
  else {
    if (!r.response) throw new Error(`${r.operationId}: a route answering ${status} declares its response schema`);
    responses[String(status)] = {
      description: status === 201 ? 'Created' : 'Success',
      ...(r.responseHeaders ? { headers: r.responseHeaders } : {}),
      content: { 'application/json': { schema: jsonSchema(r.response, 'output', defs) } },
    };
  }
  const codes = commonErrors(r);
  for (const [s, list] of Object.entries(r.errors ?? {})) {
    const own = list.split('|').map((c) => c.trim());
    codes[Number(s)] = [...new Set([...(codes[Number(s)] ?? []), ...own])];
  }
  for (const s of Object.keys(codes).sort()) {
    const fields = r.errorFields?.[Number(s)];
    if (!fields) {
      responses[s] = sharedResponse(Number(s), codes[Number(s)]) ?? errorResponse(codes[Number(s)]);
      continue;
    }
    const extras = Object.fromEntries(Object.entries(fields).map(([name, f]) => [name, jsonSchema(f, 'output', defs)]));
    responses[s] = errorResponse(codes[Number(s)], extras);
  }

  return {
    operationId: r.operationId,
    summary: r.summary,
    description: [r.dashboard ? DASHBOARD_LINE[r.dashboard] : ROLE_LINE[r.access], r.description].filter(Boolean).join('\n\n'),
    tags: [r.tag],
    security: r.dashboard ? DASHBOARD_SECURITY[r.dashboard] : SECURITY[r.access],
    'x-mailgate-role': r.dashboard ? `dashboard-${r.dashboard}` : r.access,
    ...(parameters.length ? { parameters } : {}),
    // A body schema that takes nothing (undefined: every field optional) makes the body optional.
    ...(r.body ? { requestBody: { required: !r.body.safeParse(undefined).success, content: { 'application/json': { schema: jsonSchema(r.body, 'input', defs) } } } } : {}),
    responses,
  };
}

const TAGS: Record<string, string> = {
  Senders: 'Sender accounts and pools: listed with their health and usage; added (after a live test of their servers), paused, resumed and pooled here or with the CLI.',
  Campaigns: 'Campaigns, their sequence steps, lead enrollment, start/pause and metrics.',
  Replies: 'Inbound replies and bounces as classified from the sender accounts\u2019 mailboxes.',
  Suppression: 'The workspace-wide list of addresses never contacted.',
  'SDR desk': 'Reply assignment and the SDR\u2019s prospect threads, mailbox and follow-ups.',
  'SDR admin': 'SDR profiles, active flags and mail connection states, managed by admins (the SDR desk itself is under SDR desk).',
  'AI drafts': 'AI-assisted reply drafts, their guardrails and sending.',
  Workspace: 'The workspace\u2019s API keys (listed here; created and revoked in the dashboard).',
  Webhooks: 'Webhook registrations and their delivery log.',
  Operations: 'Health and readiness probes and this document.',
  Dashboard: 'The dashboard\u2019s session and the flows the spec keeps out of the API (creating and revoking keys, removing a suppressed address, an SDR\u2019s mail connection): session cookie and CSRF token only, never an API key (docs/dashboard.md).',
  Tracking: 'The open-tracking pixel and unsubscribe links put into emails (no API key; signed tokens).',
};

/**
 * The OpenAPI 3.1 document: the declared routes (from the zod schemas they validate with) and
 * the hand-documented endpoints mounted beside them.
 */
export function buildOpenApi(routes: AnyRoute[], version: string, others: StaticOperation[] = []) {
  const defs: Record<string, unknown> = {};
  const paths: Record<string, Record<string, unknown>> = {};
  const add = (path: string, method: string, op: Json) => {
    paths[path] ??= {};
    if (paths[path][method]) throw new Error(`${method} ${path} is documented twice`);
    paths[path][method] = op;
  };
  for (const r of routes) add(r.path.replace(/:(\w+)/g, '{$1}'), r.method, operationOf(r, defs));
  for (const o of others) add(o.path, o.method, o.operation);
  const ids = Object.values(paths).flatMap((p) => Object.values(p).map((op) => (op as Json).operationId));
  const dup = ids.find((id, i) => ids.indexOf(id) !== i);
  if (dup) throw new Error(`operationId ${String(dup)} is used twice`);
  const used = new Set(Object.values(paths).flatMap((p) => Object.values(p).flatMap((op) => (op as Json).tags as string[])));
  return {
    openapi: '3.1.0',
    info: {
      title: 'mailgate API',
      version,
      description:
        'Outbound email campaigns and the SDR reply workflow. Every error answers `{"error": {"code", "message"}}`, ' +
        'with `errors: [{index?, field?, value?, message}]` for failing fields. A human reference: docs/api.md in the repository.',
    },
    servers: [{ url: '/', description: 'the host that serves this document' }],
    tags: Object.entries(TAGS)
      .filter(([name]) => used.has(name))
      .map(([name, description]) => ({ name, description })),
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key: `Authorization: Bearer mgk_...`. Keys have the role `admin` or `sdr` (`mailgate key create`); each operation names the role it needs.',
        },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: 'mailgate_session',
          description:
            'A dashboard session (POST /dashboard/api/session): the cookie acts with the role of the key it signed in with; every POST, PATCH and DELETE also needs the header `X-CSRF-Token` (403 `csrf_failed` otherwise).',
        },
      },
      schemas: { Error: errorEnvelope, FieldError: fieldError, ...Object.fromEntries(Object.entries(defs).sort(([a], [b]) => a.localeCompare(b))) },
      responses: Object.fromEntries(
        Object.entries(SHARED).map(([name, { code }]) => [name, { ...errorResponse([code]), ...(SHARED_HEADERS[name] ? { headers: SHARED_HEADERS[name] } : {}) }]),
      ),
    },
    paths,
  };
}
