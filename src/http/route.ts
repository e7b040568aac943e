import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { ApiError } from '../shared/errors.ts';
import { fromZod } from './errors.ts';
import { readJsonBody } from './body.ts';
import { textProblem } from '../shared/text.ts';
import type { Access, AuthContext } from './auth.ts';
import type { Services } from '../services.ts';

export type { Access };

/** A header of the OpenAPI document (its schema is JSON Schema, as the document holds it). */
export interface HeaderDoc {
  description: string;
  schema: Record<string, unknown>;
  required?: boolean;
}

export interface RouteSpec<Q extends z.ZodType, B extends z.ZodType, P extends z.ZodType> {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** Path parameters are named after what they identify (`:campaignId`, never `:id`). */
  path: string;
  access: Access;
  /**
   * A dashboard-only route (docs/dashboard.md): served to signed-in dashboard sessions (`admin`
   * sessions, or `any` session), never to an API key; `sign-in` needs no session; `sign-out`
   * takes any session, even one of an inactive SDR's key (signing out always works). Its
   * `access` is `none` (no API key).
   */
  dashboard?: 'admin' | 'any' | 'sign-in' | 'sign-out';
  /** Stable camelCase name of the operation (generated clients name their methods after it). */
  operationId: string;
  summary: string;
  /** Longer text for the OpenAPI document, after the role line. */
  description?: string;
  tag: string;
  query?: Q;
  body?: B;
  params?: P;
  /** Documented response schema (OpenAPI only). */
  response?: z.ZodType;
  status?: number;
  /**
   * Error codes this route can answer beyond the common ones (http/openapi.ts adds 400
   * invalid_request, 401, 403, 404 workspace_not_found, 413, 415 and 500); several codes of one
   * status are separated by " | ".
   */
  errors?: Record<number, string>;
  /** Top-level fields the error bodies of one status carry beside `error` (contract §3). */
  errorFields?: Record<number, Record<string, z.ZodType>>;
  /**
   * `items`: the route's own validation applies the text rule (shared/text.ts) to everything of
   * the body it keeps, naming each failing item (bulk enroll: 422 with the lead's index), and its
   * body schema refuses any other field. Otherwise the rule runs on the whole body first (400).
   */
  bodyTextRule?: 'items';
  /** Request headers the route reads. */
  requestHeaders?: Record<string, HeaderDoc>;
  /** Headers of the success response. */
  responseHeaders?: Record<string, HeaderDoc>;
  handler: (req: {
    query: z.output<Q>;
    body: z.output<B>;
    params: z.output<P>;
    auth: AuthContext;
    services: Services;
    ctx: Context;
  }) => Promise<unknown>;
}

export type AnyRoute = RouteSpec<z.ZodType, z.ZodType, z.ZodType>;

export function defineRoute<Q extends z.ZodType = z.ZodObject<{}>, B extends z.ZodType = z.ZodUndefined, P extends z.ZodType = z.ZodObject<{}>>(
  spec: RouteSpec<Q, B, P>,
): AnyRoute {
  return spec as unknown as AnyRoute;
}

/** Parses one query string into a plain object; a repeated key becomes an array. */
function queryObject(ctx: Context): Record<string, unknown> {
  return { ...ctx.query };
}

function refuse(where: 'query' | 'path parameter', field: string, message: string): ApiError {
  return ApiError.invalid(`${where} ${field}: ${message}`, { errors: [{ field, message }] });
}

/**
 * The text rule (shared/text.ts) for query values and path parameters, checked on the raw URL:
 * Koa's query parser and the router turn malformed percent-encoding into U+FFFD or leave it
 * encoded, so only the raw text tells that a value was not UTF-8.
 */
function checkUrlText(ctx: Context, routePath: string) {
  for (const pair of ctx.querystring ? ctx.querystring.split('&') : []) {
    const eq = pair.indexOf('=');
    const [rawKey, rawValue] = eq < 0 ? [pair, ''] : [pair.slice(0, eq), pair.slice(eq + 1)];
    const key = strictDecode(rawKey, true);
    if (key === null) throw refuse('query', rawKey, 'the parameter name is not valid percent-encoded UTF-8');
    const keyProblem = textProblem(key);
    if (keyProblem) throw refuse('query', JSON.stringify(key).slice(1, -1), `the parameter name ${keyProblem}`);
    const value = strictDecode(rawValue, true);
    if (value === null) throw refuse('query', key, 'must be valid percent-encoded UTF-8');
    const problem = textProblem(value);
    if (problem) throw refuse('query', key, problem);
  }
  const pattern = routePath.split('/');
  const actual = ctx.path.split('/');
  pattern.forEach((segment, i) => {
    if (!segment.startsWith(':') || actual[i] === undefined) return;
    const name = segment.slice(1);
    const value = strictDecode(actual[i]);
    if (value === null) throw refuse('path parameter', name, 'must be valid percent-encoded UTF-8');
    const problem = textProblem(value);
    if (problem) throw refuse('path parameter', name, problem);
  });
}

/** Percent-decoding that refuses what is not UTF-8 (null); in a query, + is a space. */
function strictDecode(raw: string, plusIsSpace = false): string | null {
  try {
    return decodeURIComponent(plusIsSpace ? raw.replace(/\+/g, ' ') : raw);
  } catch {
    return null;
  }
}

/**
 * Mounts a route: authorize, read the body (http/body.ts), validate (unknown query parameters
 * and body fields are 400), call the handler, shape the response.
 */
export function mount(router: Router, route: AnyRoute, authorize: (ctx: Context, access: Access) => Promise<AuthContext>) {
  const query = route.query ?? z.strictObject({});
  const params = route.params ?? z.object({});
  router[route.method](route.path, async (ctx: Context) => {
    const auth = await authorize(ctx, route.access);
    // The body only once the caller is known: 401 before 400, 413 or 415.
    if (route.method !== 'get') await readJsonBody(ctx, { textRule: route.bodyTextRule !== 'items' });
    checkUrlText(ctx, route.path);
    const q = query.safeParse(queryObject(ctx));
    if (!q.success) throw fromZod(q.error, 'query');
    const p = params.safeParse(ctx.params);
    if (!p.success) throw fromZod(p.error, 'params');
    let body: unknown = undefined;
    if (route.method !== 'get') {
      const hasBody = ctx.request.rawBody !== undefined && ctx.request.rawBody.trim() !== '';
      if (ctx.request.length && !ctx.request.is('application/json', '+json'))
        throw ApiError.invalid('request body must be JSON (Content-Type: application/json)');
      if (route.body) {
        const b = route.body.safeParse(hasBody ? ctx.request.body : undefined);
        if (!b.success) throw fromZod(b.error, 'body');
        body = b.data;
      } else if (hasBody && !(typeof ctx.request.body === 'object' && ctx.request.body && !Array.isArray(ctx.request.body) && Object.keys(ctx.request.body).length === 0)) {
        throw ApiError.invalid('this endpoint takes no request body');
      }
    }
    const result = await route.handler({ query: q.data, body, params: p.data, auth, services: ctx.state.services, ctx });
    if (route.status === 204) {
      ctx.status = 204;
      ctx.body = null;
      return;
    }
    ctx.status = route.status ?? 200;
    ctx.body = result;
  });
}
