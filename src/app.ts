import { sql } from './db/sql.ts';
import Koa from 'koa';
import Router from '@koa/router';
import type { Deps } from './deps.ts';
import { createServices } from './services.ts';
import { errorMiddleware, installEnvelopeOnError } from './http/errors.ts';
import { authorizer } from './http/auth.ts';
import { mount, type AnyRoute } from './http/route.ts';
import { buildOpenApi } from './http/openapi.ts';
import { observeRequests } from './http/observe.ts';
import { pendingMigrations } from './db/orm.ts';
import { senderRoutes } from './modules/senders/routes.ts';
import { suppressionRoutes } from './modules/suppression/routes.ts';
import { sdrRoutes } from './modules/sdrs/routes.ts';
import { followupRoutes } from './modules/sdrs/followup-routes.ts';
import { campaignRoutes } from './modules/campaigns/routes.ts';
import { replyRoutes } from './modules/inbound/routes.ts';
import { assignRoutes } from './modules/sdrs/assign-routes.ts';
import { deskMailRoutes } from './modules/sdrs/desk-routes.ts';
import { mountTrackingRoutes, trackingOperations } from './modules/tracking/routes.ts';
import { systemOperations } from './http/system-docs.ts';
import { webhookRoutes } from './modules/webhooks/routes.ts';
import { draftRoutes } from './modules/drafts/routes.ts';
import { dashboardRoutes } from './modules/dashboard/routes.ts';
import { dashboardApiRoutes } from './modules/dashboard/api-routes.ts';
import { dashboardAuthorizer } from './http/auth.ts';
import { touchSessions } from './http/session.ts';
import { dashboardStatic, DEFAULT_DASHBOARD_DIR } from './http/dashboard-static.ts';

export const apiRoutes: AnyRoute[] = [...senderRoutes, ...campaignRoutes, ...replyRoutes, ...assignRoutes, ...deskMailRoutes, ...suppressionRoutes, ...sdrRoutes, ...followupRoutes, ...draftRoutes, ...webhookRoutes, ...dashboardApiRoutes];

/** The dashboard's session and dashboard-only routes (docs/dashboard.md): no API key. */
export { dashboardRoutes };

const VERSION = '0.1.0';

/** The document GET /v1/openapi.json serves: every route of the API process. */
export function openApiDocument() {
  return buildOpenApi([...apiRoutes, ...dashboardRoutes], VERSION, [...systemOperations, ...trackingOperations]);
}

/**
 * The Koa application without listen(): tests drive it over real HTTP. `api: false` builds
 * the worker's variant, which answers only /healthz and /readyz.
 */
export function buildApp(deps: Deps, opts: { api?: boolean } = {}): Koa {
  const app = new Koa();
  app.proxy = true;
  app.silent = true;
  installEnvelopeOnError(app, deps.log);
  const router = new Router();

  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    try {
      const em = deps.orm.em.fork();
      await sql(em, 'select 1');
      const pending = await pendingMigrations(deps.orm);
      if (pending.length) {
        ctx.status = 503;
        ctx.body = { status: 'migrations_pending', pending };
        return;
      }
      ctx.body = { status: 'ready' };
    } catch (err) {
      deps.log.warn({ err }, 'readiness check failed');
      ctx.status = 503;
      ctx.body = { status: 'database_unreachable' };
    }
  });

  if (opts.api !== false) {
    const openapi = openApiDocument();
    router.get('/v1/openapi.json', (ctx) => {
      ctx.body = openapi;
    });
    const sessions = { crypto: deps.crypto, idleMs: deps.config.dashboardSessionIdle };
    const authorize = authorizer(deps.clock, sessions);
    for (const route of apiRoutes) mount(router, route, authorize);
    const dashboardAuthorize = dashboardAuthorizer(deps.clock, sessions);
    for (const route of dashboardRoutes) mount(router, route, dashboardAuthorize(route.dashboard!));
    mountTrackingRoutes(router);
  }

  // Outside the error middleware: the access log and metrics see the status as answered.
  app.use(observeRequests(deps.log, deps.metrics));
  // API answers are never stored by a browser or a proxy: some carry secrets shown once (a new
  // key, a webhook's signing secret), all carry a workspace's data.
  app.use(async (ctx, next) => {
    await next();
    if ((ctx.path.startsWith('/v1/') || ctx.path.startsWith('/dashboard/api/')) && !ctx.response.get('Cache-Control')) ctx.set('Cache-Control', 'no-store');
  });
  app.use(errorMiddleware(deps.log));
  // One EntityManager (identity map) per request.
  app.use(async (ctx, next) => {
    const em = deps.orm.em.fork();
    ctx.state.em = em;
    ctx.state.services = createServices(deps, em);
    await next();
  });
  if (opts.api !== false) {
    app.use(touchSessions(() => deps.clock.now()));
    app.use(dashboardStatic({ dir: deps.config.dashboardDir ?? DEFAULT_DASHBOARD_DIR, log: deps.log }));
  }
  app.use(router.routes());
  app.use(listOptionsInAllow);
  app.use(router.allowedMethods());
  return app;
}

/**
 * The router answers OPTIONS on a path with the path's methods in Allow, and a method the path
 * does not take with 405 and the same Allow; OPTIONS is answered on every such path, so it is
 * listed too (RFC 9110 10.2.1: Allow lists the methods the resource supports).
 */
async function listOptionsInAllow(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  await next();
  const allow = ctx.response.get('allow');
  if (allow && !/\bOPTIONS\b/.test(allow)) ctx.set('Allow', `${allow}, OPTIONS`);
}
