import type { Command } from 'commander';
import { isEmail } from '../shared/email.ts';
import { jsonOption, usageError, type CliContext } from './context.ts';

/** A lead named by its id (`lead_...`, as the leads list shows it) or by its address. */
function leadArg(value: string): { id: string } | { email: string } {
  if (/^lead_[a-z2-7]+$/.test(value)) return { id: value };
  if (isEmail(value)) return { email: value };
  throw usageError(`the lead: ${JSON.stringify(value)} is neither a lead id (lead_...) nor an email address`);
}

export function registerCampaignCommands(program: Command, ctx: CliContext) {
  const campaign = program.command('campaign').description('campaigns');
  jsonOption(
    campaign
      .command('remove-lead')
      .description('take a lead off a campaign: it gets nothing more from it (DELETE /v1/campaigns/:campaignId/leads/:leadId)')
      .argument('<campaignId>', 'campaign id (cmp_...)')
      .argument('<lead>', "the lead's id (lead_...) or email address", leadArg),
  ).action(async (campaignId: string, lead: { id: string } | { email: string }, opts: { json?: boolean }) => {
    const row = await ctx.withServices(async (services) => {
      const workspaceId = await services.campaigns.workspaceOf(campaignId);
      const leadId = await services.campaigns.enrolledLead(workspaceId, campaignId, lead);
      await services.campaigns.removeLead(workspaceId, campaignId, leadId);
      return services.campaigns.enrollment(workspaceId, campaignId, leadId);
    });
    // An enrollment that had ended otherwise (completed, replied, bounced, unsubscribed) is left
    // as it is, as the API leaves it: the row says which.
    ctx.print(
      opts,
      row,
      row.status === 'removed'
        ? `removed ${row.email} (${row.id}) from campaign ${campaignId}: it gets nothing more from it`
        : `${row.email} (${row.id}) had already left campaign ${campaignId} (${row.status}): left as it is`,
    );
  });
}
