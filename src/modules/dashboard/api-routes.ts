import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route.ts';
import { emailText, isoTime } from '../../http/doc-schemas.ts';
import { isoDateTimeInput } from '../../shared/time.ts';
import { pageQuery, campaignParams } from '../campaigns/schemas.ts';
import { senderApiRoutes } from './v1-senders.ts';
import { sdrProfileRoutes } from './v1-sdr-profiles.ts';
import { campaignPreviewRoutes } from './v1-preview.ts';

// The /v1 routes the dashboard needs (docs/dashboard.md): ordinary API routes, with schemas, in
// the OpenAPI document, reachable with an API key or a dashboard session.

const SUPPRESSION_REASONS = ['manual', 'hard_bounce', 'unsubscribe', 'reply_unsubscribe', 'complaint'] as const;

const apiKeyView = z
  .object({
    id: z.string(),
    name: z.string().nullable(),
    role: z.enum(['admin', 'sdr']),
    sdrId: z.string().nullable(),
    keyPrefix: z.string().describe('the first characters of the key, to recognise it; never the secret'),
    createdAt: isoTime,
    lastUsedAt: isoTime.nullable().describe('updated at most once a minute'),
    revokedAt: isoTime.nullable(),
  })
  .meta({ id: 'ApiKey' });

const suppressionView = z
  .object({
    email: emailText,
    reason: z.enum(SUPPRESSION_REASONS),
    source: z.string().nullable().describe('where it came from: `api`, `cli`, a message or reply id'),
    createdAt: isoTime,
  })
  .meta({ id: 'Suppression' });

const timelinePoint = z
  .object({
    t: isoTime.describe('the start of the UTC hour or day'),
    sent: z.number().int().describe('SMTP transactions finished in the bucket'),
    delivered: z.number().int().describe('of those, accepted and not bounced since'),
    opened: z.number().int().describe('first opens'),
    bounced: z.number().int().describe("messages that bounced in the bucket (hard and soft), as the stats' `bounced` counts them"),
    replied: z
      .number()
      .int()
      .describe(
        "leads whose first reply counted by the stats' `replied` (classified interested, not_interested or unsubscribe; not a feedback-loop complaint, not a bounce report) came in the bucket, each lead once: summed over the campaign's life, the stats' `replied`",
      ),
  })
  .meta({ id: 'TimelinePoint' });

export const dashboardApiRoutes: AnyRoute[] = [
  defineRoute({
    method: 'get',
    path: '/v1/api-keys',
    access: 'admin',
    tag: 'Workspace',
    operationId: 'listApiKeys',
    summary: "The workspace's API keys, newest first (never their secrets)",
    query: pageQuery,
    response: z.object({ data: z.array(apiKeyView), total: z.number().int(), hasMore: z.boolean() }),
    handler: ({ query, auth, services }) => services.dashboard.listKeys(auth.workspaceId, query.limit, query.offset),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/suppression-list',
    access: 'admin',
    tag: 'Suppression',
    operationId: 'listSuppressions',
    summary: 'The suppression list, newest first; search by part of an address',
    query: pageQuery.extend({
      q: z.string().trim().max(320).optional().describe('case-insensitive substring of the address'),
      reason: z.enum(SUPPRESSION_REASONS).optional(),
    }),
    response: z.object({ data: z.array(suppressionView), total: z.number().int(), hasMore: z.boolean() }),
    handler: ({ query, auth, services }) => services.dashboard.listSuppressions(auth.workspaceId, query),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/campaigns/:campaignId/timeline',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'getCampaignTimeline',
    summary: 'Sends, deliveries, opens, bounces and replied leads of a campaign per UTC hour or day',
    description:
      'One entry per bucket from `from` to `to` (each rounded down to its bucket), zero-filled, oldest first. Defaults: `to` now, `from` 47 hours (`hour`) or 29 days (`day`) before it. At most 1,000 buckets.',
    params: campaignParams,
    query: z.strictObject({
      bucket: z.enum(['hour', 'day']).default('hour'),
      from: isoDateTimeInput().optional().describe('ISO 8601'),
      to: isoDateTimeInput().optional().describe('ISO 8601; default now'),
    }),
    response: z.object({ bucket: z.enum(['hour', 'day']), from: isoTime, to: isoTime, data: z.array(timelinePoint) }),
    errors: { 404: 'campaign_not_found' },
    handler: ({ params, query, auth, services }) => services.dashboard.timeline(auth.workspaceId, params.campaignId, query),
  }),
  ...senderApiRoutes,
  ...sdrProfileRoutes,
  ...campaignPreviewRoutes,
];
