import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import type { AuthContext } from '../../http/auth.ts';
import type { ThreadScope } from './threads.ts';

const followup = z.object({
  id: z.string(),
  threadId: z.string(),
  sdrId: z.string(),
  status: z.enum(['pending', 'done', 'cancelled', 'skipped']),
  dueAt: z.string(),
  ruleId: z.string().nullable(),
  attempt: z.number().int(),
  createdAt: z.string(),
});

const params = z.object({ id: z.string().min(1) });
const closeErrors = { 401: 'authentication_failed', 403: 'forbidden', 404: 'followup_not_found', 409: 'followup_not_pending' };

function scope(auth: AuthContext): ThreadScope {
  return { workspaceId: auth.workspaceId, sdrId: auth.sdrId! };
}

export const followupRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/sdr/followups/due',
    access: 'sdr',
    tag: 'SDR desk',
    summary: "Pending follow-up tasks of the key's SDR, due first",
    query: z.strictObject({
      limit: z.coerce.number().int().min(1).max(200).default(50),
      includeUpcoming: z.enum(['true', 'false']).default('false').describe('true also returns not-yet-due follow-ups'),
    }),
    response: z.object({ data: z.array(followup) }),
    errors: { 400: 'invalid_request', 401: 'authentication_failed', 403: 'forbidden' },
    async handler({ auth, services, query }) {
      return { data: await services.followups.listDue(scope(auth), { limit: query.limit, includeUpcoming: query.includeUpcoming === 'true' }) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/followups/:id/complete',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'Mark a pending follow-up done',
    params,
    response: z.object({ data: followup }),
    errors: closeErrors,
    async handler({ auth, services, params: p }) {
      return { data: await services.followups.complete(scope(auth), p.id) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/followups/:id/skip',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'Skip a pending follow-up',
    params,
    response: z.object({ data: followup }),
    errors: closeErrors,
    async handler({ auth, services, params: p }) {
      return { data: await services.followups.skip(scope(auth), p.id) };
    },
  }),
];
