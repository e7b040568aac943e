import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route.ts';
import { emailText, isoTime } from '../../http/doc-schemas.ts';
import { pageQuery } from '../campaigns/schemas.ts';
import { NAME_MAX, NAME_TOO_LONG } from '../../shared/names.ts';

// SDR management for admins (docs/dashboard.md). Not under /v1/sdrs, which is the SDR keys'
// (contract §3: sdr keys call /v1/sdrs and /v1/sdr/... only; admin keys everything else).

const sdrAdminProfile = z
  .object({
    id: z.string(),
    name: z.string(),
    email: emailText.describe('where assigned replies are forwarded'),
    active: z.boolean().describe('an inactive SDR cannot be assigned to and its keys get 403'),
    tone: z.string().nullable(),
    signature: z.string().nullable(),
    calendarUrl: z.string().nullable(),
    language: z.string().nullable(),
    mailConnected: z.boolean().describe('the mailbox is connected and its health is active'),
    mailEmail: emailText.nullable().describe('the connected mailbox address, if any'),
    healthState: z.enum(['active', 'needs_reauth', 'rate_limited', 'disconnected']),
    lastSyncError: z.string().nullable().describe("the mail server's answer behind a health other than active"),
    lastSyncedAt: isoTime.nullable(),
    openThreads: z.number().int().describe('threads of the SDR that are open (new, awaiting_reply, needs_followup, replied): what a reassignment without threadIds moves'),
    createdAt: isoTime,
  })
  .meta({ id: 'SdrAdminProfile' });

const profileFields = {
  tone: z.string().max(500, 'at most 500 characters').optional().describe('writing tone for drafts, e.g. "warm, concise"; empty clears it'),
  signature: z.string().max(10_000, 'at most 10000 characters').optional().describe('plain-text signature; empty clears it'),
  calendarUrl: z.string().max(2000).optional().describe('https booking link; empty clears it'),
  language: z.string().max(35).optional().describe('language tag such as en or pt-BR; empty clears it'),
};

const sdrParams = z.object({ sdrId: z.string().min(1).max(200).describe('an SDR id (`sdr_...`)') });

const reassignment = z
  .object({
    fromSdrId: z.string(),
    toSdrId: z.string(),
    threadIds: z.array(z.string()).describe('the threads moved, by id; empty when the SDR had none to move'),
    discardedDraftIds: z.array(z.string()).describe("the moved threads' open drafts, discarded (written in the old SDR's voice)"),
    followupIds: z.array(z.string()).describe('the pending follow-up tasks that moved with the threads, due when they were'),
  })
  .meta({ id: 'ThreadReassignment' });

export const sdrProfileRoutes: AnyRoute[] = [
  defineRoute({
    method: 'get',
    path: '/v1/sdr-profiles',
    access: 'admin',
    tag: 'SDR admin',
    operationId: 'listSdrProfiles',
    summary: 'Every SDR of the workspace with profile, active flag and mail connection',
    query: pageQuery.extend({ active: z.enum(['true', 'false']).optional().describe('only active (true) or inactive (false) SDRs') }),
    response: z.object({ data: z.array(sdrAdminProfile), total: z.number().int(), hasMore: z.boolean() }),
    handler: ({ query, auth, services }) =>
      services.sdrProfiles.list(auth.workspaceId, { active: query.active === undefined ? undefined : query.active === 'true', limit: query.limit, offset: query.offset }),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr-profiles',
    access: 'admin',
    tag: 'SDR admin',
    operationId: 'createSdrProfile',
    summary: 'Add an SDR (active), with its profile',
    body: z.strictObject({
      name: z.string().trim().min(1, 'must not be empty').max(NAME_MAX, NAME_TOO_LONG),
      email: z.string().trim().min(1, 'must not be empty').max(320, 'at most 320 characters'),
      ...profileFields,
    }),
    response: sdrAdminProfile,
    errors: { 409: 'already_exists' },
    handler: ({ body, auth, services }) => services.sdrProfiles.create(auth.workspaceId, body),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sdr-profiles/:sdrId',
    access: 'admin',
    tag: 'SDR admin',
    operationId: 'getSdrProfile',
    summary: 'One SDR with profile, active flag and mail connection',
    params: sdrParams,
    response: sdrAdminProfile,
    errors: { 404: 'sdr_not_found' },
    handler: ({ params, auth, services }) => services.sdrProfiles.get(auth.workspaceId, params.sdrId),
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/sdr-profiles/:sdrId',
    access: 'admin',
    tag: 'SDR admin',
    operationId: 'updateSdrProfile',
    summary: "Change an SDR's name, profile or active flag (fields not given stay)",
    params: sdrParams,
    body: z.strictObject({
      name: z.string().trim().min(1, 'must not be empty').max(NAME_MAX, NAME_TOO_LONG).optional(),
      active: z.boolean().optional(),
      ...profileFields,
    }),
    response: sdrAdminProfile,
    errors: { 404: 'sdr_not_found' },
    handler: ({ params, body, auth, services }) => services.sdrProfiles.update(auth.workspaceId, params.sdrId, body),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr-profiles/:sdrId/reassign-threads',
    access: 'admin',
    tag: 'SDR admin',
    operationId: 'reassignSdrThreads',
    summary: "Move an SDR's prospect threads to another active SDR (all open threads, or the ones listed)",
    description:
      'The threads keep their messages, status, snooze, category and handoff; their pending follow-ups move with them, due when they were; their open drafts are discarded. ' +
      "The new SDR answers from their own mailbox, in the prospect's mail thread; an answer that reaches the old SDR's mailbox still joins the thread. " +
      'A send of the old SDR in progress on a thread finishes first; one after the move is refused. One transaction: a refusal moves nothing (docs/sdr-desk.md).',
    params: sdrParams,
    body: z.strictObject({
      toSdrId: z.string().trim().min(1, 'must not be empty').max(200).describe('the SDR who takes the threads over: active, of this workspace, with a mailbox that can send'),
      threadIds: z
        .array(z.string().trim().min(1, 'must not be empty').max(200))
        .min(1, 'must name at least one thread (omit it to move every open thread)')
        .max(500, 'at most 500 threads per request')
        .optional()
        .describe('threads of the SDR to move (any status); omitted: every open thread (new, awaiting_reply, needs_followup, replied)'),
    }),
    response: z.object({ data: reassignment }),
    errors: { 404: 'sdr_not_found', 409: 'sdr_inactive | mail_not_connected | reply_already_assigned', 422: 'validation_failed' },
    errorFields: {
      409: { threadIds: z.array(z.string()).optional().describe('reply_already_assigned: the listed threads whose reply the new SDR already has a thread of') },
    },
    handler: ({ params, body, auth, services }) => services.reassignments.reassign(auth.workspaceId, params.sdrId, body),
  }),
];
