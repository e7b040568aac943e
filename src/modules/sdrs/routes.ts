import { z } from 'zod';
import { queryInt } from '../../shared/query.ts';
import { defineRoute } from '../../http/route.ts';
import type { AuthContext } from '../../http/auth.ts';
import { THREAD_STATUSES } from './threads-state.ts';
import type { ThreadScope } from './threads.ts';
import { emailText, isoTime } from '../../http/doc-schemas.ts';
import { isoDateTimeInput } from '../../shared/time.ts';
import { CLASSIFICATIONS } from '../inbound/routes.ts';

const sdrProfile = z
  .object({
    id: z.string(),
    name: z.string(),
    email: emailText,
    mailConnected: z.boolean(),
    mailEmail: emailText.nullable(),
  })
  .meta({ id: 'SdrProfile' });

const mailStatus = z
  .object({
    connected: z.boolean(),
    email: emailText.nullable(),
    healthState: z.enum(['active', 'needs_reauth', 'rate_limited', 'disconnected']),
    lastSyncedAt: isoTime.nullable(),
    lastSyncError: z.string().nullable(),
  })
  .meta({ id: 'MailStatus' });

const threadFields = {
  id: z.string(),
  contactEmail: emailText,
  contactName: z.string(),
  subject: z.string(),
  status: z.enum(THREAD_STATUSES),
  category: z.enum(['A', 'B', 'C']),
  priorityScore: z.number(),
  lastMessageAt: isoTime,
  createdAt: isoTime,
  snoozedUntil: isoTime.nullable(),
};
const thread = z.object(threadFields).meta({ id: 'ProspectThread' });

const threadMessage = z
  .object({
    id: z.string(),
    direction: z.enum(['inbound', 'outbound']),
    messageIdHeader: z.string().nullable().describe('the Message-ID header, with its angle brackets'),
    fromEmail: emailText,
    toEmails: z.array(z.string()),
    ccEmails: z.array(z.string()),
    subject: z.string(),
    bodyText: z.string(),
    bodyHtml: z.string().nullable(),
    at: isoTime,
  })
  .meta({ id: 'ThreadMessage' });

// What the SDR is handed: every campaign step the lead received (as rendered for them) and the
// reply, frozen at assignment (sdrs/assign.ts snapshot()).
const snapshotOutbound = z.object({
  direction: z.literal('outbound'),
  stepIndex: z.number().int(),
  messageId: z.string(),
  messageIdHeader: z.string().nullable(),
  subject: z.string(),
  bodyText: z.string(),
  at: isoTime.nullable(),
});
const snapshotInbound = z.object({
  direction: z.literal('inbound'),
  replyId: z.string(),
  classification: z.enum(CLASSIFICATIONS),
  subject: z.string(),
  bodyText: z.string(),
  at: isoTime.nullable(),
});
const handoffSnapshot = z
  .object({
    campaign: z.object({ id: z.string(), name: z.string().nullable() }),
    lead: z.object({
      email: emailText,
      firstName: z.string().nullable(),
      lastName: z.string().nullable(),
      company: z.string().nullable(),
      jobTitle: z.string().nullable(),
      customFields: z.record(z.string(), z.unknown()).describe('the custom fields as submitted (any JSON values)'),
    }),
    messages: z.array(z.discriminatedUnion('direction', [snapshotOutbound, snapshotInbound])).describe('oldest first; the reply last'),
  })
  .meta({ id: 'HandoffSnapshot' });

const handoff = z
  .object({
    id: z.string(),
    replyId: z.string(),
    toEmail: emailText.describe('where the reply was forwarded'),
    ccEmails: z.array(z.string()),
    subject: z.string(),
    note: z.string().nullable(),
    category: z.enum(['A', 'B', 'C']),
    seniority: z.string().nullable(),
    employeeCount: z.string().nullable(),
    snapshot: handoffSnapshot,
    createdAt: isoTime,
  })
  .meta({ id: 'Handoff' });

const threadDraft = z
  .object({
    id: z.string(),
    state: z.enum(['generated', 'edited', 'superseded', 'sent', 'discarded']),
    subject: z.string(),
    bodyText: z.string(),
    bodyHtml: z.string(),
    supersededBy: z.string().nullable().describe('superseded: the draft that took its place (the new version of a regenerate, or the sibling variant that was sent); null when a manual reply superseded it, and for a draft that is not superseded'),
    createdAt: isoTime,
    updatedAt: isoTime,
  })
  .meta({ id: 'ThreadDraft', description: 'a draft of the thread in brief (GET /v1/sdr/drafts/{draftId} has all of it)' });

const threadDetail = z
  .object({
    ...threadFields,
    messages: z.array(threadMessage).describe('oldest first'),
    handoff: handoff.nullable().describe('the latest handoff of the thread'),
    drafts: z.array(threadDraft).describe('oldest first'),
  })
  .meta({ id: 'ProspectThreadDetail' });

const inboxQuery = z.strictObject({
  status: z
    .union([z.enum(THREAD_STATUSES), z.array(z.enum(THREAD_STATUSES))])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .optional()
    .describe('repeatable'),
  category: z.enum(['A', 'B', 'C']).optional(),
  search: z.string().trim().max(200).optional().describe('case-insensitive substring of contact email, name and subject (spaces around it are ignored)'),
  snoozed: z.enum(['true', 'false']).optional().describe('true: snoozed now; false: not snoozed; omitted: both'),
  limit: queryInt(1, 100, 50),
  offset: queryInt(0, undefined, 0),
  orderBy: z.enum(['priority', 'lastMessage', 'created']).default('priority'),
});

const threadParams = z.object({ threadId: z.string().min(1).describe('a prospect thread id') });
const threadErrors = { 404: 'thread_not_found' };

function scope(auth: AuthContext): ThreadScope {
  return { workspaceId: auth.workspaceId, sdrId: auth.sdrId! };
}

export const sdrRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/sdrs',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'listSdrs',
    summary: 'List the active SDRs of the workspace',
    response: z.object({ data: z.array(sdrProfile) }),
    async handler({ auth, services }) {
      return { data: await services.sdrs.listActive(auth.workspaceId) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sdr/mail/status',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'getMailStatus',
    summary: "Mail connection status of the key's SDR",
    response: z.object({ data: mailStatus }),
    async handler({ auth, services }) {
      return { data: await services.sdrs.mailStatus(auth.sdrId!) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sdr/inbox',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'listInbox',
    summary: "Prospect threads of the key's SDR (default order: priorityScore descending)",
    query: inboxQuery,
    response: z.object({ data: z.object({ threads: z.array(thread), total: z.number().int(), hasMore: z.boolean() }) }),
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
    path: '/v1/sdr/threads/:threadId',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'getThread',
    summary: 'One thread with its messages (oldest first), handoff snapshot and drafts',
    params: threadParams,
    response: z.object({ data: threadDetail }),
    errors: threadErrors,
    async handler({ auth, services, params }) {
      return { data: await services.sdrThreads.get(scope(auth), params.threadId) };
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/sdr/threads/:threadId',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'updateThreadStatus',
    summary: 'Change the thread status (validated by the state machine; 400 invalid_transition lists allowedTransitions)',
    params: threadParams,
    body: z.strictObject({ status: z.enum(THREAD_STATUSES) }),
    response: z.object({ data: thread }),
    errors: { ...threadErrors, 400: 'invalid_transition' },
    errorFields: { 400: { allowedTransitions: z.array(z.enum(THREAD_STATUSES)).describe('with 400 invalid_transition: the statuses the thread may move to') } },
    async handler({ auth, services, params, body }) {
      return { data: await services.sdrThreads.setStatus(scope(auth), params.threadId, body.status) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/threads/:threadId/snooze',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'snoozeThread',
    summary: 'Snooze the thread until a future time',
    params: threadParams,
    body: z.strictObject({ until: isoDateTimeInput().describe('ISO 8601, in the future') }),
    response: z.object({ data: thread }),
    errors: threadErrors,
    async handler({ auth, services, params, body }) {
      return { data: await services.sdrThreads.snooze(scope(auth), params.threadId, new Date(body.until)) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/threads/:threadId/unsnooze',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'unsnoozeThread',
    summary: 'End the snooze of the thread',
    params: threadParams,
    response: z.object({ data: thread }),
    errors: threadErrors,
    async handler({ auth, services, params }) {
      return { data: await services.sdrThreads.unsnooze(scope(auth), params.threadId) };
    },
  }),
];
