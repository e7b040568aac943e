import { z } from 'zod';
import { queryInt } from '../../shared/query.ts';
import { defineRoute } from '../../http/route.ts';
import { emailText, isoTime } from '../../http/doc-schemas.ts';
import { isoDateTimeInput } from '../../shared/time.ts';
import { OPERATOR_CLASSIFICATIONS, REPLY_CLASSIFICATIONS } from './classification.ts';
import { replyView } from './view.ts';

export const CLASSIFICATIONS = REPLY_CLASSIFICATIONS;

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
    classifierClassification: z
      .enum(CLASSIFICATIONS)
      .describe("what the classifier decided; differs from `classification` when an operator changed it (PATCH /v1/replies/{replyId})"),
    decidedBy: z.string().describe("the classifier's rule that decided (e.g. `lexicon:...`, `model:...`, `dsn:...`, `arf:...` for a feedback-loop complaint), as `mailgate classify` prints it"),
    reclassifiedAt: isoTime.nullable().describe("when an operator last changed the classification; null: it is the classifier's"),
    reclassifiedBy: z
      .string()
      .nullable()
      .describe('who last changed it: `key:<api key id>`, `dashboard:<api key id>` (a signed-in dashboard session), `cli` (`mailgate reply update`); null: nobody'),
  })
  .meta({ id: 'Reply' });

const effects = z
  .object({
    changed: z.boolean().describe('false: the reply was classified so already, and nothing was written'),
    from: z.enum(CLASSIFICATIONS).describe('the classification before this request'),
    replied: z.number().int().min(-1).max(1).describe("how the campaign's `replied` moved (the lead counts once, whatever their replies)"),
    sequenceStopped: z.boolean().describe("the lead's sequence in the campaign was running and this change ended it: its waiting steps were cancelled"),
    leadStatus: z.string().nullable().describe("the lead's enrollment status in the campaign after the change (as GET /v1/campaigns/{campaignId}/leads shows it)"),
    suppressed: z.boolean().describe('this change put the address on the suppression list (a change into `unsubscribe`)'),
    addressSuppressed: z
      .boolean()
      .describe('the address is on the suppression list after the change; a change out of `unsubscribe` leaves it there: taking it off is a separate step'),
    notes: z.array(z.string()).describe('what the operator should know, in sentences'),
  })
  .meta({ id: 'ReplyReclassificationEffects' });

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
      return rows.map((r) => replyView(r, holders));
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/replies/:replyId',
    access: 'admin',
    tag: 'Replies',
    operationId: 'reclassifyReply',
    summary: "Correct a reply's classification; its effects follow as if the classifier had decided so",
    description: [
      "The classifier's decision is kept (`classifierClassification`, `decidedBy`); `reclassifiedAt` and `reclassifiedBy` say who changed it. In one transaction with the change: the campaign's `replied` (and the leads' `?replied=` filter) follow;",
      "a change into `interested` or `not_interested` ends the lead's sequence in the campaign (`replied`, waiting steps cancelled) as a reply does; into `unsubscribe` it also suppresses the address and ends it `unsubscribed`.",
      'A change out of `unsubscribe` leaves the address on the suppression list (take it off separately); a change into `out_of_office` does not start a stopped sequence again.',
      "The same classification again changes nothing (200, `effects.changed: false`). A bounce or a feedback-loop complaint cannot be changed, nor can a reply become a bounce: 409 `reply_not_reclassifiable`.",
      'No webhook event is sent: `reply.received` went out when the reply was received, and receivers dedupe it by `replyId`.',
    ].join(' '),
    params: z.object({ replyId: z.string().min(1).max(200).describe('a reply id (`rpl_...`)') }),
    body: z.strictObject({
      classification: z.string().describe(`one of ${OPERATOR_CLASSIFICATIONS.join(', ')} (\`bounce\` is refused with 409; any other value is 422)`),
    }),
    response: reply.extend({ effects }).meta({ id: 'ReclassifiedReply' }),
    errors: { 404: 'reply_not_found', 409: 'reply_not_reclassifiable', 422: 'validation_failed' },
    async handler({ params, body, auth, services }) {
      const by = auth.via === 'session' ? `dashboard:${auth.keyId}` : `key:${auth.keyId}`;
      const { reply: r, effects: fx } = await services.replies.reclassify(auth.workspaceId, params.replyId, body.classification, by);
      const holders = r.forwarded_at ? await services.sdrs.holdersOfReplies(auth.workspaceId, [r.id]) : [];
      return { ...replyView(r, holders), effects: fx };
    },
  }),
];
