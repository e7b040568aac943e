import { z } from 'zod';
import { queryInt } from '../../shared/query.ts';
import { defineRoute } from '../../http/route.ts';
import { emailText, isoTime } from '../../http/doc-schemas.ts';
import { isoDateTimeInput, isoOrNull } from '../../shared/time.ts';

export const CLASSIFICATIONS = ['interested', 'not_interested', 'out_of_office', 'bounce', 'unsubscribe'] as const;

const reply = z
  .object({
    id: z.string(),
    email: emailText.describe('the lead who replied'),
    campaignId: z.string(),
    classification: z.enum(CLASSIFICATIONS),
    receivedAt: isoTime,
    threadSnippet: z.string().describe('a short excerpt of the reply body'),
    forwardedAt: isoTime.nullable().describe('when it was last forwarded to an SDR (POST /v1/replies/{replyId}/assign); null: never'),
    assignedTo: z
      .array(z.object({ sdrId: z.string(), name: z.string() }))
      .describe('the SDRs it was forwarded to, first first (an extension: the dashboard shows who has it)'),
  })
  .meta({ id: 'Reply' });

const query = z.strictObject({
  campaignId: z.string().min(1).optional(),
  classification: z
    .union([z.enum(CLASSIFICATIONS), z.array(z.enum(CLASSIFICATIONS))])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .optional()
    .describe('repeatable'),
  since: isoDateTimeInput().optional().describe('ISO 8601: only replies received at or after it'),
  page: queryInt(1, undefined, 1),
  pageSize: queryInt(1, 500, 50),
});

export const replyRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/replies',
    access: 'admin',
    tag: 'Replies',
    operationId: 'listReplies',
    summary: 'Inbound replies and bounces, newest first (total in X-Total-Count)',
    description: 'A bare array (the spec\'s reference shape); `page` and `pageSize` choose the page and `X-Total-Count` gives the number of matching replies over all pages.',
    query,
    response: z.array(reply),
    errors: { 404: 'campaign_not_found' },
    responseHeaders: {
      'X-Total-Count': { description: 'replies matching the filters, over all pages', required: true, schema: { type: 'integer', minimum: 0 } },
    },
    async handler({ query: q, auth, services, ctx }) {
      const { rows, total } = await services.inbound.list(auth.workspaceId, {
        campaignId: q.campaignId,
        classification: q.classification,
        since: q.since ? new Date(q.since) : undefined,
        page: q.page,
        pageSize: q.pageSize,
      });
      ctx.set('X-Total-Count', String(total));
      const holders = await services.sdrs.holdersOfReplies(auth.workspaceId, rows.filter((r) => r.forwarded_at).map((r) => r.id));
      return rows.map((r) => ({
        id: r.id,
        email: r.email,
        campaignId: r.campaign_id,
        classification: r.classification,
        receivedAt: isoOrNull(r.received_at)!,
        threadSnippet: r.thread_snippet,
        forwardedAt: isoOrNull(r.forwarded_at),
        assignedTo: holders.filter((h) => h.reply_id === r.id).map((h) => ({ sdrId: h.sdr_id, name: h.name })),
      }));
    },
  }),
];
