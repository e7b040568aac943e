import type Koa from 'koa';
import type { Context, Next } from 'koa';
import { z } from 'zod';
import { ApiError, type FieldError } from '../shared/errors.ts';
import { fieldPath } from '../shared/text.ts';
import '../shared/zod-messages.ts';
import type { Logger } from '../adapters/logger.ts';
import { databaseUnreachable } from '../db/sql.ts';
import { transientConflict } from '../db/transaction.ts';

type Where = 'body' | 'query' | 'params';
const WHERE_NAME: Record<Where, string> = { body: 'body', query: 'query', params: 'path parameter' };

/**
 * Turns a zod error into a 400 invalid_request naming every failing field: one `errors` entry
 * per field (an unknown field gets its own), and the first of them in the message.
 */
export function fromZod(err: z.ZodError, where: Where): ApiError {
  const unknownWord = where === 'body' ? 'field' : 'parameter';
  const errors: FieldError[] = [];
  for (const i of err.issues) {
    if (i.code === 'unrecognized_keys') {
      for (const key of i.keys) errors.push({ field: fieldPath([...i.path, key]), message: `unknown ${unknownWord}` });
      continue;
    }
    const field = fieldPath(i.path);
    errors.push({ ...(field ? { field } : {}), message: i.message });
  }
  const unknown = errors.filter((e) => e.message === `unknown ${unknownWord}`).map((e) => e.field);
  const first = errors[0];
  let message: string;
  if (unknown.length && first?.message === `unknown ${unknownWord}`) {
    message = `${WHERE_NAME[where]}: unknown ${unknownWord}${unknown.length === 1 ? '' : 's'}: ${unknown.join(', ')}`;
  } else if (first) {
    message = first.field ? `${WHERE_NAME[where]} ${first.field}: ${first.message}` : `${WHERE_NAME[where]}: ${first.message}`;
  } else {
    message = `invalid ${WHERE_NAME[where]}`;
  }
  const others = errors.length - (unknown.length && first?.message === `unknown ${unknownWord}` ? unknown.length : 1);
  if (others > 0) message += ` (and ${others} more problem${others === 1 ? '' : 's'}, listed in errors)`;
  return new ApiError(400, 'invalid_request', message, { errors });
}

/** What the client sees for any error: an ApiError, or a known library error mapped to one. */
export function toApiError(err: unknown, log: Logger, ctx: Context): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof z.ZodError) return fromZod(err, 'body');
  const e = (err ?? {}) as { status?: number; statusCode?: number; type?: string; message?: string; expose?: boolean };
  const status = e.status ?? e.statusCode;
  if (status === 413 || e.type === 'entity.too.large') return new ApiError(413, 'payload_too_large', 'request body exceeds the 10 MB limit');
  // Errors of Koa and the router (http-errors): their message is meant for the client.
  if (typeof status === 'number' && status >= 400 && status < 500 && e.expose)
    return new ApiError(status, status === 404 ? 'not_found' : status === 405 ? 'method_not_allowed' : 'invalid_request', e.message || 'bad request');
  // Nothing wrong with the request, and nothing of it written: the caller may simply try again.
  if (transientConflict(err)) {
    // Left after the transaction's own retries (db/transaction.ts), or from a statement outside one.
    log.warn({ err, requestId: ctx.state.requestId, method: ctx.method, route: routeOf(ctx) }, 'request aborted by a conflicting transaction');
    return new ApiError(503, 'temporarily_unavailable', 'the request conflicted with concurrent changes and was rolled back (nothing was written): try again', {}, 1);
  }
  if (databaseUnreachable(err)) {
    log.error({ err, requestId: ctx.state.requestId, method: ctx.method, route: routeOf(ctx) }, 'database unavailable');
    return new ApiError(503, 'temporarily_unavailable', 'the database is unavailable: try again shortly', {}, 5);
  }
  log.error({ err, requestId: ctx.state.requestId, method: ctx.method, route: routeOf(ctx) }, 'unhandled error');
  return new ApiError(500, 'internal_error', 'internal server error');
}

/**
 * A 400 invalid_request a service threw as `field: what is wrong` (checks after the schema: an
 * unknown pool, an address, a URL) names its field in `errors` like a schema error does (README:
 * "errors: [{field, message}] for each failing field"); until 2026-11-29 only the message said it.
 */
const FIELD_MESSAGE = /^([A-Za-z][A-Za-z0-9_]*(?:(?:\.[A-Za-z0-9_]+)|\[\d+\])*): (.+)$/s;

function extrasOf(apiErr: ApiError): Record<string, unknown> {
  if (apiErr.code !== 'invalid_request' || 'errors' in apiErr.extras) return apiErr.extras;
  const m = FIELD_MESSAGE.exec(apiErr.message);
  return m ? { ...apiErr.extras, errors: [{ field: m[1], message: m[2] }] } : apiErr.extras;
}

function render(ctx: Context, apiErr: ApiError) {
  ctx.status = apiErr.status;
  if (apiErr.retryAfter !== undefined) ctx.set('Retry-After', String(apiErr.retryAfter));
  ctx.body = { error: { code: apiErr.code, message: apiErr.message }, ...extrasOf(apiErr) };
}

/** Renders every error as {"error": {"code", "message"}} plus the contract's extras. */
export function errorMiddleware(log: Logger) {
  return async (ctx: Context, next: Next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new ApiError(404, 'not_found', `no route for ${ctx.method} ${ctx.path}`);
      if (ctx.status === 405 && ctx.body === undefined)
        throw new ApiError(405, 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
      // A method no route uses anywhere (TRACE, PROPFIND, ...): the router answers 501 with the
      // path's methods in Allow. It is the caller's request that is wrong, so it is answered as
      // any other method the path does not take (405 with Allow), or 404 where no route matches.
      if (ctx.status === 501 && ctx.body === undefined) {
        if (ctx.response.get('allow')) throw new ApiError(405, 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
        ctx.remove('allow');
        throw new ApiError(404, 'not_found', `no route for ${ctx.method} ${ctx.path}`);
      }
    } catch (err) {
      render(ctx, toApiError(err, log, ctx));
    }
  };
}

/**
 * Koa's last resort (context.onerror) answers plain text "Internal Server Error": it runs for
 * errors that escape the middleware chain, such as a response body that cannot be serialized
 * in Koa's respond(). This one answers in the envelope instead.
 */
export function installEnvelopeOnError(app: Koa, log: Logger) {
  app.context.onerror = function onerror(this: Context, err: Error) {
    if (err == null) return;
    log.error({ err, requestId: this.state?.requestId, method: this.method, route: routeOf(this) }, 'error outside the middleware chain');
    if (this.headerSent || !this.writable) return;
    const apiErr = new ApiError(500, 'internal_error', 'internal server error');
    const body = JSON.stringify({ error: { code: apiErr.code, message: apiErr.message } });
    const res = this.res;
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    res.statusCode = apiErr.status;
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(body));
    res.end(body);
  };
}

/** The matched route's template for a log line, never the raw path (ids and link tokens stay out). */
function routeOf(ctx: Context): string {
  const route = (ctx as unknown as { _matchedRoute?: unknown })._matchedRoute;
  return typeof route === 'string' ? route : 'unmatched';
}
