import type { Context, Next } from 'koa';
import { z } from 'zod';
import { ApiError } from '../shared/errors.ts';
import type { Logger } from '../adapters/logger.ts';

/** Turns a zod error into a 400 invalid_request naming every failing field. */
export function fromZod(err: z.ZodError, where: 'body' | 'query' | 'params'): ApiError {
  const errors = err.issues.map((i) => {
    const field = i.path.length ? i.path.join('.') : undefined;
    let message = i.message;
    if (i.code === 'unrecognized_keys') message = `unknown ${where === 'body' ? 'field' : 'parameter'}(s): ${i.keys.join(', ')}`;
    return { ...(field ? { field } : {}), message };
  });
  const first = errors[0];
  const message = first ? (first.field ? `${where} ${first.field}: ${first.message}` : `${where}: ${first.message}`) : `invalid ${where}`;
  return new ApiError(400, 'invalid_request', message, { errors });
}

/** Renders every error as {"error": {"code", "message"}} plus the contract's extras. */
export function errorMiddleware(log: Logger) {
  return async (ctx: Context, next: Next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new ApiError(404, 'not_found', `no route for ${ctx.method} ${ctx.path}`);
      if (ctx.status === 405 && ctx.body === undefined)
        throw new ApiError(405, 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
    } catch (err) {
      let apiErr: ApiError;
      if (err instanceof ApiError) apiErr = err;
      else if (err instanceof z.ZodError) apiErr = fromZod(err, 'body');
      else {
        const e = err as { status?: number; statusCode?: number; type?: string; message?: string; expose?: boolean };
        const status = e.status ?? e.statusCode;
        if (status === 413 || e.type === 'entity.too.large') apiErr = new ApiError(413, 'payload_too_large', 'request body exceeds the 10 MB limit');
        else if (status === 400 || e.type === 'entity.parse.failed') apiErr = ApiError.invalid('malformed JSON body');
        else if (status === 415) apiErr = ApiError.invalid('request body must be JSON (Content-Type: application/json)');
        else if (status && status >= 400 && status < 500 && e.expose) apiErr = new ApiError(status, 'invalid_request', e.message ?? 'bad request');
        else {
          log.error({ err, method: ctx.method, path: ctx.path }, 'unhandled error');
          apiErr = new ApiError(500, 'internal_error', 'internal server error');
        }
      }
      ctx.status = apiErr.status;
      ctx.body = { error: { code: apiErr.code, message: apiErr.message }, ...apiErr.extras };
    }
  };
}
