import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import { publicUrl } from '../../config/index.ts';
import { parseLeads } from '../campaigns/leads.ts';
import { leadOfWorkspace } from '../campaigns/repository.ts';
import { firstEnrolledLead } from '../messages/queue.ts';
import type { LeadColumns } from '../messages/send.ts';
import type { DashboardOwners } from './owners.ts';
import { renderHtml, renderSubject, renderText, replySubject, type LeadValues } from '../sending/render.ts';

export interface PreviewInput {
  stepIndex?: number;
  subject?: string;
  bodyHtml?: string;
  leadId?: string;
  lead?: unknown;
}

type LeadSource = 'lead' | 'inline' | 'first_enrolled' | 'sample';

/** The lead a preview shows when the campaign has none enrolled. */
export const SAMPLE_LEAD: LeadValues = {
  email: 'alex.morgan@example.com',
  firstName: 'Alex',
  lastName: 'Morgan',
  company: 'Example Inc',
  jobTitle: 'Head of Sales',
  custom: {},
};

const leadValues = (r: LeadColumns): LeadValues => ({ email: r.email, firstName: r.first_name, lastName: r.last_name, company: r.company, jobTitle: r.job_title, custom: r.custom ?? {} });

/**
 * A campaign step rendered for one lead with the sending path's renderer (sending/render.ts):
 * the same tokens, escaping and "Re: <previous subject>" for an empty follow-up subject. The
 * unsubscribe link points at `<public URL>/u/preview`, which unsubscribes nobody.
 */
export class CampaignPreviewService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    private readonly owners: DashboardOwners,
  ) {}

  async preview(workspaceId: string, campaignId: string, input: PreviewInput) {
    const campaign = await this.owners.campaigns(this.em).get(workspaceId, campaignId);
    const steps = campaign.sequenceSteps;
    if (input.stepIndex !== undefined && input.stepIndex >= steps.length)
      throw ApiError.invalid(`body stepIndex: the campaign has ${steps.length} step(s)`, { errors: [{ field: 'stepIndex', message: `the campaign has ${steps.length} step(s)` }] });
    const index = input.stepIndex ?? (input.subject !== undefined && input.bodyHtml !== undefined ? null : steps.length ? 0 : null);
    const subjectTemplate = input.subject ?? (index !== null ? steps[index].subject : undefined);
    const bodyTemplate = input.bodyHtml ?? (index !== null ? steps[index].bodyHtml : undefined);
    if (subjectTemplate === undefined || bodyTemplate === undefined)
      throw ApiError.invalid('body: give stepIndex (a saved step) or subject and bodyHtml', { errors: [{ field: input.subject === undefined ? 'subject' : 'bodyHtml', message: 'is required without stepIndex' }] });

    const { lead, source, leadId } = await this.leadFor(workspaceId, campaignId, input);
    const extra = { unsubscribeUrl: `${publicUrl(this.deps.config)}/u/preview` };
    // An empty subject continues the thread: "Re: " and the previous step's subject as sent.
    let previous = '';
    for (let i = 0; index !== null && i < index; i++) previous = renderSubject(steps[i].subject, lead, extra) || (previous ? replySubject(previous) : '');
    const subject = renderSubject(subjectTemplate, lead, extra) || (previous ? replySubject(previous) : '');
    return {
      subject,
      html: renderHtml(bodyTemplate, lead, extra),
      text: renderText(bodyTemplate, lead, extra),
      stepIndex: index,
      lead: { source, leadId, email: lead.email },
    };
  }

  private async leadFor(workspaceId: string, campaignId: string, input: PreviewInput): Promise<{ lead: LeadValues; source: LeadSource; leadId: string | null }> {
    if (input.leadId !== undefined) {
      const row = await leadOfWorkspace(this.em, workspaceId, input.leadId);
      if (!row) throw ApiError.notFound('lead', `lead ${input.leadId} not found`);
      return { lead: leadValues(row), source: 'lead', leadId: row.id };
    }
    if (input.lead !== undefined) {
      const { leads, errors } = parseLeads([input.lead]);
      if (errors.length) {
        const listed = errors.map(({ index: _i, ...e }) => ({ ...e, field: `lead${e.field ? `.${e.field}` : ''}` }));
        throw new ApiError(422, 'validation_failed', `body lead: ${listed[0].message}`, { errors: listed });
      }
      const l = leads[0];
      const f = l.fields;
      return { lead: { email: l.email, firstName: f.firstName ?? null, lastName: f.lastName ?? null, company: f.company ?? null, jobTitle: f.jobTitle ?? null, custom: l.custom }, source: 'inline', leadId: null };
    }
    const first = await firstEnrolledLead(this.em, campaignId);
    if (first) return { lead: leadValues(first), source: 'first_enrolled', leadId: first.id };
    return { lead: SAMPLE_LEAD, source: 'sample', leadId: null };
  }
}
