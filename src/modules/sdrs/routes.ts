import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import type { AuthContext } from '../../http/auth.ts';
import { THREAD_STATUSES } from './threads-state.ts';
import type { ThreadScope } from './threads.ts';

const sdrProfile = z.object({
  id: z.string(),
  name: z.string(),
  email: z.string(),
  mailConnected: z.boolean(),
  mailEmail: z.string().nullable(),
});

const mailStatus = z.object({
  connected: z.boolean(),
  email: z.string().nullable(),
  healthState: z.enum(['active', 'needs_reauth', 'rate_limited', 'disconnected']),
  lastSyncedAt: z.string().nullable(),
  lastSyncError: z.string().nullable(),
});

const thread = z.object({
  id: z.string(),
  contactEmail: z.string(),
  contactName: z.string(),
  subject: z.string(),
  status: z.enum(THREAD_STATUSES),
  category: z.enum(['A', 'B', 'C']),
  priorityScore: z.number(),
  lastMessageAt: z.string(),
  createdAt: z.string(),
  snoozedUntil: z.string().nullable(),
});

const threadDetail = thread.extend({
  messages: z.array(z.object({ id: z.string(), direction: z.enum(['inbound', 'outbound']), fromEmail: z.string(), subject: z.string(), bodyText: z.string(), at: z.string() }).loose()),
  handoff: z.object({ id: z.string(), replyId: z.string(), snapshot: z.unknown(), createdAt: z.string() }).loose().nullable(),
  drafts: z.array(z.object({ id: z.string(), state: z.string(), subject: z.string(), bodyText: z.string(), bodyHtml: z.string() }).loose()),
});

const inboxQuery = z.strictObject({
  status: z
    .union([z.enum(THREAD_STATUSES), z.array(z.enum(THREAD_STATUSES))])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .optional()
    .describe('repeatable'),
  category: z.enum(['A', 'B', 'C']).optional(),
  search: z.string().max(200).optional().describe('case-insensitive substring of contact email, name and subject'),
  snoozed: z.enum(['true', 'false']).optional().describe('true: snoozed now; false: not snoozed; omitted: both'),
  limit: z.coerce.number().int().min(1).max(100).default(50),
  offset: z.coerce.number().int().min(0).default(0),
  orderBy: z.enum(['priority', 'lastMessage', 'created']).default('priority'),
});

const threadParams = z.object({ id: z.string().min(1) });
const threadErrors = { 400: 'invalid_request', 401: 'authentication_failed', 403: 'forbidden', 404: 'thread_not_found' };

function scope(auth: AuthContext): ThreadScope {
  return { workspaceId: auth.workspaceId, sdrId: auth.sdrId! };
}

export const sdrRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/sdrs',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'List the active SDRs of the workspace',
    response: z.object({ data: z.array(sdrProfile) }),
    errors: { 401: 'authentication_failed', 403: 'forbidden', 404: 'workspace_not_found' },
    async handler({ auth, services }) {
      return { data: await services.sdrs.listActive(auth.workspaceId) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sdr/mail/status',
    access: 'sdr',
    tag: 'SDR desk',
    summary: "Mail connection status of the key's SDR",
    response: z.object({ data: mailStatus }),
    errors: { 401: 'authentication_failed', 403: 'forbidden', 404: 'workspace_not_found' },
    async handler({ auth, services }) {
      return { data: await services.sdrs.mailStatus(auth.sdrId!) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sdr/inbox',
    access: 'sdr',
    tag: 'SDR desk',
    summary: "Prospect threads of the key's SDR (default order: priorityScore descending)",
    query: inboxQuery,
    response: z.object({ data: z.object({ threads: z.array(thread), total: z.number().int(), hasMore: z.boolean() }) }),
    errors: { 400: 'invalid_request', 401: 'authentication_failed', 403: 'forbidden', 404: 'workspace_not_found' },
    async handler({ auth, services, query: q }) {
      return {
        data: await services.sdrThreads.inbox(scope(auth), {
          status: q.status,
          category: q.category,
          search: q.search,
          snoozed: q.snoozed === undefined ? undefined : q.snoozed === 'true',
          limit: q.limit,
          offset: q.offset,
          orderBy: q.orderBy,
        }),
      };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sdr/threads/:id',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'One thread with its messages (oldest first), handoff snapshot and drafts',
    params: threadParams,
    response: z.object({ data: threadDetail }),
    errors: threadErrors,
    async handler({ auth, services, params }) {
      return { data: await services.sdrThreads.get(scope(auth), params.id) };
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/sdr/threads/:id',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'Change the thread status (validated by the state machine; 400 invalid_transition lists allowedTransitions)',
    params: threadParams,
    body: z.strictObject({ status: z.enum(THREAD_STATUSES) }),
    response: z.object({ data: thread }),
    errors: { ...threadErrors, 400: 'invalid_transition' },
    async handler({ auth, services, params, body }) {
      return { data: await services.sdrThreads.setStatus(scope(auth), params.id, body.status) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/threads/:id/snooze',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'Snooze the thread until a future time',
    params: threadParams,
    body: z.strictObject({ until: z.iso.datetime({ offset: true }).describe('ISO 8601, in the future') }),
    response: z.object({ data: thread }),
    errors: threadErrors,
    async handler({ auth, services, params, body }) {
      return { data: await services.sdrThreads.snooze(scope(auth), params.id, new Date(body.until)) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/threads/:id/unsnooze',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'End the snooze of the thread',
    params: threadParams,
    response: z.object({ data: thread }),
    errors: threadErrors,
    async handler({ auth, services, params }) {
      return { data: await services.sdrThreads.unsnooze(scope(auth), params.id) };
    },
  }),
];
