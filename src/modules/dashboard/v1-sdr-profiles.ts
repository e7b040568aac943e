import type { AnyRoute } from '../../http/route.ts';

export const sdrProfileRoutes: AnyRoute[] = [];
