import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { isEmail } from '../../shared/email.ts';
import { isoTime } from '../../http/doc-schemas.ts';

const tag = 'AI drafts';
const draftParams = z.object({ draftId: z.string().describe('a draft id') });

const usage = z.object({ promptTokens: z.number(), completionTokens: z.number() });
const draft = z.object({
  id: z.string(),
  threadId: z.string(),
  state: z.enum(['generated', 'edited', 'superseded', 'sent', 'discarded']),
  subject: z.string(),
  bodyText: z.string(),
  bodyHtml: z.string(),
  instructions: z.string().nullable(),
  model: z.string().nullable().describe('the LLM model that wrote it; null for the offline composer'),
  usage: usage.nullable(),
  latencyMs: z.number().nullable(),
  sentMessageId: z.string().nullable(),
  supersededBy: z.string().nullable().describe('superseded: the draft that took its place (the new version of a regenerate, or the sibling variant that was sent); null when a manual reply superseded it, and for a draft that is not superseded'),
  createdAt: isoTime,
  updatedAt: isoTime,
}).meta({ id: 'Draft' });
const scores = z
  .object({ overall: z.number(), readability: z.number(), personalization: z.number(), linkQuality: z.number() })
  .meta({ id: 'DraftScores', description: 'each 0..1' });
const insight = z.object({
  draftId: z.string(),
  approach: z.enum(['direct_answer', 'question_led', 'proof_led', 'offline_template']),
  confidence: z.number(),
  rationale: z.string(),
  scores: scores.nullable(),
}).meta({ id: 'DraftInsight' });
const appliedRule = z.object({ ruleId: z.string(), name: z.string(), effect: z.string() }).meta({ id: 'AppliedRule' });
export const guardrailsSchema = z.object({
  blocked: z.boolean(),
  issues: z.array(z.object({ code: z.string(), severity: z.enum(['block', 'warn']), message: z.string(), field: z.string() })),
  scores,
}).meta({ id: 'Guardrails' });

const notFound = { 404: 'draft_not_found' } as const;
const draftState = { 409: { state: z.enum(['superseded', 'sent', 'discarded']).describe('the state that refused the change') } };

export const draftRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/sdr/drafts/generate',
    access: 'sdr',
    tag,
    operationId: 'generateDrafts',
    summary: 'Draft replies for a prospect thread (planner, writer, judge); one per approach',
    body: z.strictObject({
      threadId: z.string().min(1),
      instructions: z.string().trim().min(1).max(2000).optional(),
      variantCount: z.number().int().min(1).max(3).default(1),
    }),
    response: z.object({ data: z.object({ drafts: z.array(draft), insights: z.array(insight), appliedRules: z.array(appliedRule) }) }),
    errors: { 404: 'thread_not_found' },
    handler: ({ body, auth, services }) => services.drafts.generate({ workspaceId: auth.workspaceId, sdrId: auth.sdrId! }, body),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sdr/drafts/:draftId',
    access: 'sdr',
    tag,
    operationId: 'getDraft',
    summary: 'One draft with its insight',
    params: draftParams,
    response: z.object({ data: z.object({ draft, insight: insight.nullable() }) }),
    errors: notFound,
    handler: ({ params, auth, services }) => services.drafts.get({ workspaceId: auth.workspaceId, sdrId: auth.sdrId! }, params.draftId),
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/sdr/drafts/:draftId',
    access: 'sdr',
    tag,
    operationId: 'updateDraft',
    summary: 'Edit a draft (bodyHtml is rendered from bodyText unless given); the draft becomes edited',
    params: draftParams,
    body: z
      .strictObject({
        bodyText: z.string().max(100_000).optional(),
        bodyHtml: z.string().max(256 * 1024).optional(),
        subject: z.string().trim().min(1, 'must not be empty').max(998).optional(),
      })
      .refine((b) => b.bodyText !== undefined || b.bodyHtml !== undefined || b.subject !== undefined, 'give at least one of bodyText, bodyHtml, subject'),
    response: z.object({ data: z.object({ draft }) }),
    errors: { ...notFound, 409: 'draft_not_editable' },
    errorFields: draftState,
    handler: ({ params, body, auth, services }) => services.drafts.patch({ workspaceId: auth.workspaceId, sdrId: auth.sdrId! }, params.draftId, body),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/drafts/:draftId/regenerate',
    access: 'sdr',
    tag,
    operationId: 'regenerateDraft',
    summary: 'Write the draft again with the same approach (and new instructions); the old one becomes superseded',
    params: draftParams,
    // Its one field is optional, so is the body: a regenerate without one keeps the old instructions.
    body: z
      .strictObject({ instructions: z.string().trim().min(1).max(2000).optional().describe('new instructions; absent: the old draft\'s') })
      .optional()
      .default({}),
    response: z.object({ data: z.object({ draft, insight }) }),
    errors: { ...notFound, 409: 'draft_not_editable' },
    errorFields: draftState,
    handler: ({ params, body, auth, services }) => services.drafts.regenerate({ workspaceId: auth.workspaceId, sdrId: auth.sdrId! }, params.draftId, body.instructions),
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/sdr/drafts/:draftId',
    access: 'sdr',
    tag,
    operationId: 'discardDraft',
    summary: 'Discard a draft',
    params: draftParams,
    status: 204,
    errors: { ...notFound, 409: 'draft_not_editable' },
    errorFields: draftState,
    handler: ({ params, auth, services }) => services.drafts.discard({ workspaceId: auth.workspaceId, sdrId: auth.sdrId! }, params.draftId),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sdr/drafts/:draftId/send',
    access: 'sdr',
    tag,
    operationId: 'sendDraft',
    summary: "Run the guardrails on the final body and send it through the SDR's mailbox in the thread",
    params: draftParams,
    body: z.strictObject({
      finalBodyText: z.string().max(100_000).optional(),
      finalBodyHtml: z.string().max(256 * 1024).optional(),
      // Trimmed as isEmail checks it, so the thread records the addresses the mail went to.
      additionalCc: z.array(z.string().trim().refine(isEmail, 'must be a valid email address')).max(20).optional(),
    })
      // Every field is optional, so is the body: a send with none sends the draft as it is.
      .optional()
      .default({}),
    response: z.object({ data: z.object({ messageId: z.string(), guardrails: guardrailsSchema }) }),
    errors: { ...notFound, 409: 'draft_not_sendable | draft_changed | mail_not_connected | recipient_suppressed', 422: 'guardrails_blocked', 502: 'send_failed' },
    errorFields: {
      409: {
        state: z.enum(['generated', 'edited', 'superseded', 'sent', 'discarded']).optional().describe('the draft\'s state: one that cannot be sent, or (draft_changed) the state of the draft as changed meanwhile'),
        suppressed: z.array(z.string()).optional().describe('recipient_suppressed: the recipients on the suppression list'),
      },
      422: { guardrails: guardrailsSchema.describe('why the send was blocked') },
    },
    handler: ({ params, body, auth, services }) => services.drafts.send({ workspaceId: auth.workspaceId, sdrId: auth.sdrId! }, params.draftId, body),
  }),
];
