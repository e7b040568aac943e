import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route.ts';
import { emailText, checkedByService } from '../../http/doc-schemas.ts';
import { campaignParams, LIMITS, stepInput } from '../campaigns/schemas.ts';

// The campaign editor's live preview (docs/dashboard.md).

export const campaignPreviewRoutes: AnyRoute[] = [
  defineRoute({
    method: 'post',
    path: '/v1/campaigns/:campaignId/preview',
    access: 'admin',
    tag: 'Campaigns',
    operationId: 'previewCampaignStep',
    summary: 'Render a step (saved, or unsaved text) for a lead with the sending path\u2019s renderer; nothing is written',
    description:
      'Give `stepIndex` (a saved step; default 0) and/or `subject` + `bodyHtml` (unsaved text, overriding the step\u2019s). The lead: `leadId`, else an inline `lead` (like a bulk-enroll lead), else the campaign\u2019s first enrolled lead, else a built-in sample lead. `{{unsubscribeUrl}}` renders as `<public URL>/u/preview`, which unsubscribes nobody.',
    params: campaignParams,
    body: z
      .strictObject({
        stepIndex: z.number().int().min(0).max(LIMITS.steps - 1).optional(),
        subject: stepInput.shape.subject.optional(),
        bodyHtml: stepInput.shape.bodyHtml.optional(),
        leadId: z.string().min(1).max(200).optional(),
        lead: checkedByService({ $ref: '#/components/schemas/LeadInput' }).optional(),
      })
      .refine((b) => !(b.leadId !== undefined && b.lead !== undefined), { message: 'give leadId or lead, not both', path: ['lead'] })
      // Every field is optional, so is the body: none previews step 0 as `{}` does.
      .optional()
      .default({}),
    response: z
      .object({
        subject: z.string(),
        html: z.string().describe('the rendered HTML body (untrusted lead values escaped); show it in a sandboxed frame'),
        text: z.string().describe('the text/plain part as sent'),
        stepIndex: z.number().int().nullable().describe('the saved step rendered, or null for unsaved text'),
        lead: z.object({ source: z.enum(['lead', 'inline', 'first_enrolled', 'sample']), leadId: z.string().nullable(), email: emailText }),
      })
      .meta({ id: 'StepPreview' }),
    errors: { 404: 'campaign_not_found | lead_not_found', 422: 'validation_failed' },
    handler: ({ params, body, auth, services }) => services.campaignPreview.preview(auth.workspaceId, params.campaignId, body),
  }),
];
