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

const ENROLLMENT_STATUSES = ['active', 'completed', 'replied', 'bounced', 'unsubscribed', 'suppressed'] as const;

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
  status: z.enum(ENROLLMENT_STATUSES),
  currentStep: z.number().int().nullable(),
  nextSendAt: isoTime.nullable(),
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
    summary: 'The enrollments of a campaign with their leads, last event and next send time; filter by status or reply, search',
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
      q: z.string().trim().max(320).optional().describe("case-insensitive substring of the lead's email, first or last name or company"),
    }),
    response: z.object({ data: z.array(enrollmentView), total: z.number().int(), hasMore: z.boolean() }),
    errors: notFound,
    handler: ({ params, query, auth, services }) =>
      services.campaigns.leads(auth.workspaceId, params.campaignId, { ...query, replied: query.replied === undefined ? undefined : query.replied === 'true' }),
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
