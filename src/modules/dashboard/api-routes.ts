import type { AnyRoute } from '../../http/route.ts';

// The /v1 routes the dashboard needs (docs/dashboard.md): ordinary API routes, with schemas, in
// the OpenAPI document, reachable with an API key or a dashboard session.
export const dashboardApiRoutes: AnyRoute[] = [];
