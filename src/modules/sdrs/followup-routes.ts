import { z } from 'zod';
import { queryInt } from '../../shared/query.ts';
import { defineRoute } from '../../http/route.ts';
import type { AuthContext } from '../../http/auth.ts';
import type { ThreadScope } from './threads.ts';
import { isoTime } from '../../http/doc-schemas.ts';

const followup = z.object({
  id: z.string(),
  threadId: z.string(),
  sdrId: z.string(),
  status: z.enum(['pending', 'done', 'cancelled', 'skipped']),
  dueAt: isoTime,
  ruleId: z.string().nullable().describe('the follow-up rule that scheduled it'),
  attempt: z.number().int(),
  createdAt: isoTime,
  thread: z
    .object({ contactEmail: z.string(), contactName: z.string().describe('empty when unknown'), subject: z.string() })
    .describe('who and what the follow-up is about: its thread\'s contact and subject'),
}).meta({ id: 'FollowupTask' });

const params = z.object({ followupId: z.string().min(1).describe('a follow-up task id') });
const closeErrors = { 404: 'followup_not_found', 409: 'followup_not_pending' };

function scope(auth: AuthContext): ThreadScope {
  return { workspaceId: auth.workspaceId, sdrId: auth.sdrId! };
}

export const followupRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/sdr/followups/due',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'listDueFollowups',
    summary: "Pending follow-up tasks of the key's SDR, due first",
    query: z.strictObject({
      limit: queryInt(1, 200, 50),
      includeUpcoming: z.enum(['true', 'false']).default('false').describe('true also returns not-yet-due follow-ups'),
    }),
    response: z.object({ data: z.array(followup) }),
    async handler({ auth, services, query }) {
      return { data: await services.followups.listDue(scope(auth), { limit: query.limit, includeUpcoming: query.includeUpcoming === 'true' }) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/followups/:followupId/complete',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'completeFollowup',
    summary: 'Mark a pending follow-up done',
    params,
    response: z.object({ data: followup }),
    errors: closeErrors,
    async handler({ auth, services, params: p }) {
      return { data: await services.followups.complete(scope(auth), p.followupId) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/followups/:followupId/skip',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'skipFollowup',
    summary: 'Skip a pending follow-up',
    params,
    response: z.object({ data: followup }),
    errors: closeErrors,
    async handler({ auth, services, params: p }) {
      return { data: await services.followups.skip(scope(auth), p.followupId) };
    },
  }),
];
