import type { EntityManager } from '@mikro-orm/postgresql';
import type { Deps } from './deps.ts';

import { WorkspaceService } from './modules/workspaces/service.ts';
import { SenderService } from './modules/senders/service.ts';
import { SuppressionService, type SuppressionReactions } from './modules/suppression/service.ts';
import { SdrService } from './modules/sdrs/service.ts';
import { CampaignService } from './modules/campaigns/service.ts';
import { TrackingService } from './modules/tracking/service.ts';
import { InboundService } from './modules/inbound/service.ts';
import { ReplyClassificationService, type ReplyReactions } from './modules/inbound/reclassify.ts';
import { AssignmentService } from './modules/sdrs/assign.ts';
import { DeskMailService, type DeskReactions } from './modules/sdrs/desk-mail.ts';
import { WebhookService } from './modules/webhooks/service.ts';
import { ThreadService, threadsOnReclassified } from './modules/sdrs/threads.ts';
import { FollowupService } from './modules/sdrs/followups.ts';
import { KbService } from './modules/drafts/kb.ts';
import { DraftService, draftsOnManualReply, draftsOnReassign } from './modules/drafts/service.ts';
import { ReassignService, type ReassignReactions } from './modules/sdrs/reassign.ts';
import { DashboardService } from './modules/dashboard/service.ts';
import { DashboardSessionService } from './modules/dashboard/sessions.ts';
import { DashboardSenderService } from './modules/dashboard/senders.ts';
import { SdrProfileService } from './modules/dashboard/sdr-profiles.ts';
import { CampaignPreviewService } from './modules/dashboard/preview.ts';
import type { DashboardOwners } from './modules/dashboard/owners.ts';

/** The services of one unit of work (an HTTP request, a CLI command, a job run). */
export function createServices(deps: Deps, em: EntityManager) {
  // Cross-module reactions are wired here, so modules depend one way: inbound mail in an SDR's
  // mailbox joins the SDR's threads through InboundService's ProspectAnswers (and a reply's
  // corrected classification through ReplyReactions), drafts send
  // through the SDR desk, the desk's manual replies supersede drafts through DeskReactions,
  // and the dashboard's flows reach other modules through DashboardOwners.
  const deskReactions: DeskReactions = { manualReply: (tx, threadId) => draftsOnManualReply(tx, deps.clock, threadId) };
  const deskMail = new DeskMailService(deps, em, deskReactions);
  // Threads moved to another SDR: their open drafts are locked first (a send's lock order), then
  // discarded, and every draft of the threads becomes the new SDR's.
  const reassignReactions: ReassignReactions = {
    lock: (tx, threadIds) => draftsOnReassign.lock(tx, threadIds),
    moved: (tx, threadIds, toSdrId) => draftsOnReassign.moved(tx, deps.clock, threadIds, toSdrId),
  };
  // Addresses taken off the suppression list: the campaigns enroll their leads again.
  const suppressionReactions: SuppressionReactions = { removed: (tx, workspaceId, keys) => new CampaignService(deps, tx).enrollUnsuppressed(workspaceId, keys) };
  // A reply an operator classified again: its threads on the SDR desk follow (their opening
  // message automatic or not, their priority).
  const replyReactions: ReplyReactions = { reclassified: (tx, replyId, classification) => threadsOnReclassified(tx, deps.clock, replyId, classification) };
  const kb = new KbService(deps, em);
  // The dashboard's flows call the services of the modules that own what they change, built on
  // the EntityManager the flow gives (the request's, or a transaction it opened).
  const owners: DashboardOwners = {
    workspaces: (tx) => new WorkspaceService(deps, tx),
    suppression: (tx) => new SuppressionService(deps, tx, suppressionReactions),
    sdrs: (tx) => new SdrService(deps, tx),
    senders: (tx) => new SenderService(deps, tx),
    campaigns: (tx) => new CampaignService(deps, tx),
  };
  return {
    workspaces: new WorkspaceService(deps, em),
    senders: new SenderService(deps, em),
    suppression: new SuppressionService(deps, em, suppressionReactions),
    sdrs: new SdrService(deps, em),
    campaigns: new CampaignService(deps, em),
    tracking: new TrackingService(deps, em),
    inbound: new InboundService(deps, em, deskMail),
    replies: new ReplyClassificationService(deps, em, replyReactions),
    assignments: new AssignmentService(deps, em),
    deskMail,
    webhooks: new WebhookService(deps, em),
    sdrThreads: new ThreadService(deps, em),
    reassignments: new ReassignService(deps, em, reassignReactions),
    followups: new FollowupService(deps, em),
    kb,
    drafts: new DraftService(deps, em, deskMail, kb),
    dashboard: new DashboardService(deps, em, owners),
    dashboardSessions: new DashboardSessionService(deps, em),
    dashboardSenders: new DashboardSenderService(deps, em, owners),
    sdrProfiles: new SdrProfileService(deps, em, owners),
    campaignPreview: new CampaignPreviewService(deps, em, owners),
  };
}

export type Services = ReturnType<typeof createServices>;
