import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import type { Logger } from '../adapters/logger.ts';
import type { Metrics } from '../adapters/metrics.ts';

/** A caller's X-Request-Id is kept when it is sane: 1 to 128 printable ASCII characters. */
const SANE_ID = /^[\x21-\x7e]{1,128}$/;

/** The label of a request that matched no route: never the raw URL (unbounded, and it may hold tokens). */
export const UNMATCHED = 'unmatched';

/**
 * Outermost middleware: the request id (echoed in `X-Request-Id`, kept in ctx.state for the
 * error log), one access log line per request at info, and the HTTP metrics. The route is koa
 * router's template (`/v1/campaigns/:id`), never the path: ids and the tracking and unsubscribe
 * tokens in paths stay out of logs and labels. The dashboard's files, which no router serves,
 * are labelled by http/dashboard-static.ts (`dashboard:page`, `dashboard:asset`). Headers and the
 * query string are never logged.
 */
export function observeRequests(log: Logger, metrics: Metrics): Koa.Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const given = ctx.get('x-request-id');
    const requestId = SANE_ID.test(given) ? given : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (ctx as unknown as { _matchedRoute?: string | RegExp })._matchedRoute;
      const label = typeof route === 'string' ? route : typeof ctx.state.routeLabel === 'string' ? ctx.state.routeLabel : UNMATCHED;
      const labels = { method: ctx.method, route: label, status: String(ctx.status) };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, seconds);
      log.info({ requestId, method: ctx.method, route: labels.route, status: ctx.status, ms: Math.round(seconds * 10_000) / 10 }, 'request');
    }
  };
}
