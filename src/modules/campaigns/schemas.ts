import { z } from 'zod';
import { queryInt } from '../../shared/query.ts';
import { checkedByService, isoTime } from '../../http/doc-schemas.ts';
import { NAME_MAX } from '../../shared/names.ts';
import { renderSubject } from '../sending/render.ts';

export const LIMITS = {
  nameLength: NAME_MAX,
  steps: 20,
  subjectLength: 998,
  bodyHtmlBytes: 256 * 1024,
  leadsPerRequest: 10_000,
  customFields: 50,
} as const;

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const hhmm = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (00:00 to 23:59)');

export const scheduleSchema = z
  .strictObject({
    timezone: z.string().refine(isTimeZone, 'must be an IANA time zone name such as Europe/Berlin'),
    days: z
      .array(z.enum(WEEKDAYS))
      .min(1, 'must list at least one day')
      .refine((d) => new Set(d).size === d.length, 'must not repeat a day'),
    start: hhmm,
    end: hhmm,
  })
  .refine((s) => s.start !== s.end, { message: 'start and end must differ', path: ['end'] })
  .describe('send only inside this weekly window (end before start spans midnight)');

export const stepInput = z.strictObject({
  subject: z.string().max(LIMITS.subjectLength, `at most ${LIMITS.subjectLength} characters`).describe('tokens allowed; empty = "Re: <previous subject>"'),
  bodyHtml: z
    .string()
    .min(1, 'must not be empty')
    .refine((s) => Buffer.byteLength(s) <= LIMITS.bodyHtmlBytes, `at most ${LIMITS.bodyHtmlBytes / 1024} KB`)
    .describe('tokens allowed; a body without any HTML markup (tag or character reference) is plain text: its line breaks are kept'),
  delayHours: z.number().min(0).max(24 * 365).optional().describe('hours after the previous step was sent (default 48; ignored on step 0)'),
});

/** A lead with an address and no other field: what a subject must not render empty for. */
const BARE_LEAD = { email: 'lead@example.com', firstName: null, lastName: null, company: null, jobTitle: null, custom: {} };

const stepsInput = z
  .array(stepInput)
  .max(LIMITS.steps, `at most ${LIMITS.steps} steps`)
  .superRefine((steps, ctx) => {
    if (!steps.length) return;
    if (steps[0].subject.trim() === '') ctx.addIssue({ code: 'custom', message: 'the first step needs a subject', path: [0, 'subject'] });
    // Rendered for a lead with nothing but its address: empty only when the subject is tokens
    // alone without fallbacks, which a lead lacking those fields would get as an empty Subject.
    else if (renderSubject(steps[0].subject, BARE_LEAD) === '')
      ctx.addIssue({ code: 'custom', message: 'the first step\'s subject is empty for a lead without these fields: add text or a fallback, e.g. {{firstName|there}}', path: [0, 'subject'] });
  });

export const createCampaignBody = z.strictObject({
  name: z.string().trim().min(1, 'must not be empty').max(LIMITS.nameLength, `at most ${LIMITS.nameLength} characters`),
  sequenceSteps: stepsInput.optional(),
  senderPoolId: z.string().optional().describe("default: the workspace's oldest pool (one without a pool takes it when it starts)"),
  schedule: scheduleSchema.nullable().optional(),
  trackOpens: z.boolean().optional(),
});

export const patchCampaignBody = z.strictObject({
  name: createCampaignBody.shape.name.optional(),
  sequenceSteps: stepsInput.optional(),
  senderPoolId: z.string().nullable().optional(),
  schedule: scheduleSchema.nullable().optional(),
  trackOpens: z.boolean().optional(),
});

export const stepView = z
  .object({ stepIndex: z.number().int().describe('zero-based position'), subject: z.string(), bodyHtml: z.string(), delayHours: z.number() })
  .meta({ id: 'SequenceStep' });

export const campaignView = z.object({
  id: z.string(),
  name: z.string(),
  status: z.enum(['draft', 'running', 'paused']),
  sequenceSteps: z.array(stepView),
  sequenceStepCount: z.number().int(),
  senderPoolId: z.string().nullable(),
  schedule: z
    .object({ timezone: z.string(), days: z.array(z.enum(WEEKDAYS)), start: z.string(), end: z.string() })
    .meta({ id: 'Schedule', description: 'the weekly sending window; null sends at any time' })
    .nullable(),
  trackOpens: z.boolean(),
  createdAt: isoTime,
  startedAt: isoTime.nullable(),
  pausedAt: isoTime.nullable(),
}).meta({ id: 'Campaign' });

export const campaignParams = z.object({ campaignId: z.string().describe('a campaign id (`cmp_...`)') });

export const pageQuery = z.strictObject({
  limit: queryInt(1, 200, 50),
  offset: queryInt(0, undefined, 0),
});

// Lead objects are open: anything beyond the known fields is a custom field. They are checked
// one by one in leads.ts, so that a bad lead is a 422 naming its index.
const leadInput = checkedByService({
  id: 'LeadInput',
  type: 'object',
  required: ['email'],
  properties: {
    email: { type: 'string', format: 'email', description: 'the upsert key within the workspace (trimmed, case-insensitive)' },
    firstName: { type: ['string', 'null'], maxLength: 1000, description: '`{{firstName}}`; null clears it' },
    lastName: { type: ['string', 'null'], maxLength: 1000 },
    company: { type: ['string', 'null'], maxLength: 1000 },
    jobTitle: { type: ['string', 'null'], maxLength: 1000 },
  },
  propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$' },
  maxProperties: 5 + LIMITS.customFields,
  additionalProperties: { description: `a custom field (at most ${LIMITS.customFields}; any JSON value of at most 10,000 characters written as JSON; null removes it), usable as a {{token}}; the names unsubscribeUrl and the fields above are reserved, in any case (FirstName is a 422 naming firstName)` },
  description: 'A lead to upsert by email: only the fields present are overwritten.',
});

export const bulkEnrollBody = z.strictObject({
  leads: z
    .array(leadInput)
    .min(1, 'must contain at least one lead')
    .max(LIMITS.leadsPerRequest, `at most ${LIMITS.leadsPerRequest} leads per request`),
});

export const statsView = z
  .object({
  campaignId: z.string(),
  totalEnrolled: z.number().int(),
  sent: z.number().int(),
  delivered: z.number().int(),
  bounced: z.number().int(),
  replied: z.number().int(),
  queued: z.number().int(),
  scheduled: z.number().int().describe('follow-up steps waiting for their time'),
  opened: z.number().int(),
  unsubscribed: z.number().int(),
  complained: z.number().int().describe('feedback-loop spam complaints (RFC 5965) about this campaign\'s messages'),
  openRate: z.number().describe('unique opens / delivered (0..1)'),
  replyRate: z.number().describe('replied leads / delivered (0..1)'),
  sendersAvailable: z.number().int().describe("accounts of the campaign's pool that may send now (active, not auth_failed, not in a back-off)"),
  blockedReason: z
    .enum(['no_sender_pool', 'no_sender_available', 'pool_capacity_reached', 'sender_limits_reached', 'outside_schedule'])
    .nullable()
    .describe(
      "why nothing can be sent now (queued messages wait; none is lost): no pool; no account of the pool may send (paused, failing, in a back-off); the pool sent its dailyCapacity in the last 24 hours; every account that may send reached its dailyLimit; the campaign's schedule window is closed. null when a message could be sent now",
    ),
  })
  .meta({ id: 'CampaignStats' });
