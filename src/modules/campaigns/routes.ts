import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { emailText, isoTime } from '../../http/doc-schemas.ts';
import {
  createCampaignBody,
  patchCampaignBody,
  campaignView,
  campaignParams,
  pageQuery,
  bulkEnrollBody,
  statsView,
} from './schemas.ts';

const ENROLLMENT_STATUSES = ['active', 'completed', 'replied', 'bounced', 'unsubscribed', 'suppressed', 'removed'] as const;

const notFound = { 404: 'campaign_not_found' };

const enrollmentView = z.object({
  id: z.string().describe('lead id'),
  enrollmentId: z.string(),
  email: emailText,
  firstName: z.string().nullable(),
  lastName: z.string().nullable(),
  company: z.string().nullable(),
  jobTitle: z.string().nullable(),
  customFields: z.record(z.string(), z.unknown()).describe('the custom fields as submitted (any JSON values)'),
  status: z.enum(ENROLLMENT_STATUSES).describe('`removed`: taken off the campaign by an operator (DELETE /v1/campaigns/:campaignId/leads/:leadId)'),
  currentStep: z.number().int().nullable(),
  nextSendAt: isoTime
    .nullable()
    .describe("when its waiting message can go: the due time, or the next opening of the campaign's schedule window when the due time is outside it (null: nothing waiting)"),
  lastEvent: z.string().nullable(),
  lastEventAt: isoTime.nullable(),
  failureReason: z.string().nullable().describe('why the lead\'s last message failed (lastEvent `failed`: rendering or composing it threw), else null'),
  enrolledAt: isoTime,
}).meta({ id: 'Enrollment' });

export const campaignRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/campaigns',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'createCampaign',
    summary: 'Create a draft campaign',
    body: createCampaignBody,
    response: campaignView,
    status: 201,
        handler: ({ body, auth, services }) => services.campaigns.create(auth.workspaceId, body),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/campaigns',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'listCampaigns',
    summary: 'List campaigns, newest first',
    query: pageQuery,
    response: z.object({ data: z.array(campaignView), total: z.number().int(), hasMore: z.boolean() }),
        handler: ({ query, auth, services }) => services.campaigns.list(auth.workspaceId, query.limit, query.offset),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/campaigns/:campaignId',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'getCampaign',
    summary: 'Get a campaign',
    params: campaignParams,
    response: campaignView,
    errors: notFound,
    handler: ({ params, auth, services }) => services.campaigns.get(auth.workspaceId, params.campaignId),
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/campaigns/:campaignId',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'updateCampaign',
    summary: 'Update name, steps (only while not running), schedule, pool or open tracking',
    description:
      '`sequenceSteps` replaces every step. A lead waiting for a step that no longer exists has finished its sequence (`completed`); a waiting follow-up whose step changed its `delayHours` is due its new delay after the previous step was sent. A campaign that has started keeps at least one step: an empty `sequenceSteps` is 400 `invalid_request` for it (a draft that never started may be left without steps).',
    params: campaignParams,
    body: patchCampaignBody,
    response: campaignView,
    errors: { ...notFound, 409: 'campaign_running' },
    handler: ({ params, body, auth, services }) => services.campaigns.update(auth.workspaceId, params.campaignId, body),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/campaigns/:campaignId/leads/bulk',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'enrollLeads',
    summary: 'Upsert leads by email and enroll them (at most 10,000 per request)',
    description:
      'Each lead is checked on its own: when any fails, the answer is 422 `validation_failed` with an `errors` entry per failing lead and field (`index`, `field`, `value`, `message`), and nothing is written.',
    params: campaignParams,
    body: bulkEnrollBody,
    // A NUL or lone surrogate in a lead is that lead's 422 entry, like any invalid field.
    bodyTextRule: 'items',
    response: z.object({
      enrolled: z.number().int().describe('leads newly created and enrolled'),
      updated: z.number().int().describe('existing leads updated (and enrolled if they were not)'),
      total: z.number().int(),
    }),
    errors: { ...notFound, 422: 'validation_failed' },
    handler: ({ params, body, auth, services }) => services.campaigns.enroll(auth.workspaceId, params.campaignId, body.leads),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/campaigns/:campaignId/leads',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'listCampaignLeads',
    summary: 'The enrollments of a campaign with their leads, last event and next send time; filter by status, reply or bounce, search',
    params: campaignParams,
    query: pageQuery.extend({
      status: z
        .union([z.enum(ENROLLMENT_STATUSES), z.array(z.enum(ENROLLMENT_STATUSES))])
        .transform((v) => (Array.isArray(v) ? v : [v]))
        .optional()
        .describe('repeatable: enrollments in any of the statuses given'),
      replied: z
        .enum(['true', 'false'])
        .optional()
        .describe(
          "true: only the leads the campaign's `replied` counts (a reply classified interested, not_interested or unsubscribe; not a spam complaint), whatever their status now (an unsubscribe reply leaves a lead `unsubscribed`); false: only the others; omitted: both",
        ),
      bounced: z
        .enum(['true', 'false'])
        .optional()
        .describe(
          "true: only the leads with a message the campaign's `bounced` counts (it counts messages: a lead two of whose messages bounced is listed once), whatever their status now (a bounce reported after an unsubscribe or a reply leaves that status); false: only the others; omitted: both",
        ),
      q: z.string().trim().max(320).optional().describe("case-insensitive substring of the lead's email, first or last name or company"),
    }),
    response: z.object({ data: z.array(enrollmentView), total: z.number().int(), hasMore: z.boolean() }),
    errors: notFound,
    handler: ({ params, query, auth, services }) =>
      services.campaigns.leads(auth.workspaceId, params.campaignId, {
        ...query,
        replied: query.replied === undefined ? undefined : query.replied === 'true',
        bounced: query.bounced === undefined ? undefined : query.bounced === 'true',
      }),
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/campaigns/:campaignId/leads/:leadId',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'removeCampaignLead',
    summary: 'Remove a lead from the campaign: it gets nothing more from it',
    description:
      "The lead's enrollment ends `removed` and its queued and scheduled messages are cancelled, in one transaction (the stats' `queued` and `scheduled` with them); a message already being sent finishes and schedules nothing further. The lead stays in the workspace, in its other campaigns and off the suppression list. Enrolling the address again (bulk enroll) updates the lead but does not bring it back into this campaign. An enrollment that has already ended (completed, replied, bounced, unsubscribed, removed) is left as it is, with the same 204. 404 `lead_not_found` when the lead is not enrolled in this campaign.",
    params: campaignParams.extend({ leadId: z.string().describe('the lead id (`lead_...`): the `id` of a row of GET /v1/campaigns/:campaignId/leads') }),
    status: 204,
    errors: { 404: 'campaign_not_found | lead_not_found' },
    handler: ({ params, auth, services }) => services.campaigns.removeLead(auth.workspaceId, params.campaignId, params.leadId),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/campaigns/:campaignId/start',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'startCampaign',
    summary: 'Start or resume a campaign (a no-op when running)',
    params: campaignParams,
    response: z.object({ id: z.string(), status: z.literal('running'), startedAt: isoTime }),
    errors: { 400: 'no_leads_enrolled | no_sequence_steps', 404: 'campaign_not_found' },
    handler: ({ params, auth, services }) => services.campaigns.start(auth.workspaceId, params.campaignId),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/campaigns/:campaignId/pause',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'pauseCampaign',
    summary: 'Pause a running campaign (a no-op otherwise)',
    params: campaignParams,
    response: z.object({ id: z.string(), status: z.enum(['draft', 'running', 'paused']), pausedAt: isoTime.nullable() }),
    errors: notFound,
    handler: ({ params, auth, services }) => services.campaigns.pause(auth.workspaceId, params.campaignId),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/campaigns/:campaignId/stats',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'getCampaignStats',
    summary: 'Campaign metrics',
    params: campaignParams,
    response: statsView,
    errors: notFound,
    handler: ({ params, auth, services }) => services.campaigns.stats(auth.workspaceId, params.campaignId),
  }),
];
