import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { ApiError } from '../../shared/errors.ts';
import { isoOrNull } from '../../shared/time.ts';
import { normalizeEmail } from '../../shared/email.ts';
import { newId } from '../../adapters/ids.ts';
import type { Deps } from '../../deps.ts';
import { firstPool, poolOfWorkspace } from '../senders/repository.ts';
import { recordEvent } from '../events/outbox.ts';
import { campaignStarted } from '../events/catalogue.ts';
import type { Campaign, CampaignStep, Schedule } from './entities.ts';
import { LIMITS, type createCampaignBody, type patchCampaignBody } from './schemas.ts';
import { parseLeads } from './leads.ts';
import {
  upsertLeads,
  lockCampaignStatus,
  startable,
  insertCampaign,
  findCampaign,
  pageCampaigns,
  updateCampaign,
  markRunning,
  markPaused,
  stepsOf,
  insertSteps,
  deleteSteps,
  noteFinished,
  workspaceOfCampaign,
  enrolledLeadByEmail,
  type CampaignChanges,
} from './repository.ts';
import { enroll, listEnrollments, notifyQueued, queueFirstSteps, queueFirstStepsFor, reactivateUnsuppressed, suppressedEnrollmentsOf, type EnrollmentRow } from '../messages/queue.ts';
import { bumpCounters, createCounters, readCounters, type Counters } from '../messages/counters.ts';
import { inWindow, sendableAt } from '../sending/schedule.ts';
import { completeBeyondLastStep, endEnrollments, enrollmentInCampaign, lockWaitingMessages, rescheduleFollowUps } from '../messages/enrollments.ts';
import { transaction } from '../../db/transaction.ts';

const DEFAULT_DELAY_HOURS = 48;

const iso = isoOrNull;

export function campaignView(c: Campaign, steps: CampaignStep[]) {
  return {
    id: c.id,
    name: c.name,
    status: c.status,
    sequenceSteps: steps.map((s) => ({ stepIndex: s.stepIndex, subject: s.subject, bodyHtml: s.bodyHtml, delayHours: s.delayHours })),
    sequenceStepCount: steps.length,
    senderPoolId: c.senderPoolId,
    schedule: c.schedule,
    trackOpens: c.trackOpens,
    createdAt: c.createdAt.toISOString(),
    startedAt: iso(c.startedAt),
    pausedAt: iso(c.pausedAt),
  };
}

/**
 * A listing's rows, with `nextSendAt` the time its message can go (sendableAt): the waiting
 * message's due time, or the opening of the campaign's window when it falls outside it. Rows of
 * one step queued together share a due time: each is worked out once.
 */
function enrollmentViews(rows: EnrollmentRow[], schedule: Schedule | null, now: Date) {
  const slots = new Map<number, string>();
  const nextSendAt = (due: Date | string | null) => {
    if (due === null) return null;
    const t = new Date(due).getTime();
    let at = slots.get(t);
    if (at === undefined) slots.set(t, (at = sendableAt(schedule, new Date(t), now).toISOString()));
    return at;
  };
  return rows.map((r) => enrollmentView(r, nextSendAt(r.next_send_at)));
}

function enrollmentView(r: EnrollmentRow, nextSendAt: string | null) {
  return {
    id: r.lead_id,
    enrollmentId: r.enrollment_id,
    email: r.email,
    firstName: r.first_name,
    lastName: r.last_name,
    company: r.company,
    jobTitle: r.job_title,
    customFields: r.custom,
    status: r.status,
    currentStep: r.current_step,
    nextSendAt,
    lastEvent: r.last_event,
    lastEventAt: iso(r.last_event_at),
    failureReason: r.failure_reason,
    enrolledAt: iso(r.created_at)!,
  };
}

type StepInput = NonNullable<z.output<typeof createCampaignBody>['sequenceSteps']>[number];

export class CampaignService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async create(workspaceId: string, input: z.output<typeof createCampaignBody>) {
    const now = this.deps.clock.now();
    return transaction(this.em, async (em) => {
      const poolId = input.senderPoolId !== undefined ? (await this.requirePool(em, workspaceId, input.senderPoolId)).id : await this.defaultPoolId(em, workspaceId);
      const campaign: Campaign = {
        id: newId('cmp'),
        workspaceId,
        name: input.name,
        status: 'draft',
        senderPoolId: poolId,
        schedule: input.schedule ?? null,
        trackOpens: input.trackOpens ?? true,
        createdAt: now,
        updatedAt: now,
        startedAt: null,
        pausedAt: null,
      };
      await insertCampaign(em, campaign);
      await createCounters(em, campaign.id);
      const steps = await this.writeSteps(em, campaign.id, input.sequenceSteps ?? []);
      return campaignView(campaign, steps);
    });
  }

  async list(workspaceId: string, limit: number, offset: number) {
    const [campaigns, total] = await pageCampaigns(this.em, workspaceId, limit, offset);
    const steps = await stepsOf(this.em, campaigns.map((c) => c.id));
    const data = campaigns.map((c) =>
      campaignView(
        c,
        steps.filter((s) => s.campaignId === c.id),
      ),
    );
    return { data, total, hasMore: offset + data.length < total };
  }

  async get(workspaceId: string, id: string) {
    const campaign = await this.require(this.em, workspaceId, id);
    return campaignView(campaign, await this.steps(this.em, id));
  }

  async update(workspaceId: string, id: string, input: z.output<typeof patchCampaignBody>) {
    return transaction(this.em, async (em) => {
      const campaign = await this.require(em, workspaceId, id, true);
      if (input.sequenceSteps !== undefined && campaign.status === 'running')
        throw new ApiError(409, 'campaign_running', 'sequence steps can only change while the campaign is not running: pause it first');
      // No steps would complete every lead waiting for a step (completeBeyondLastStep), for
      // good: a campaign that has started keeps at least one (a paused one sends nothing).
      if (input.sequenceSteps?.length === 0 && campaign.startedAt != null) {
        const message = 'a campaign that has started keeps at least one step: with none, every lead waiting for a step would end its sequence (pausing it is what stops the sending)';
        throw ApiError.invalid(`body sequenceSteps: ${message}`, { errors: [{ field: 'sequenceSteps', message }] });
      }
      const changes: CampaignChanges = { name: input.name, schedule: input.schedule, trackOpens: input.trackOpens };
      if (input.senderPoolId !== undefined) changes.senderPoolId = input.senderPoolId === null ? null : (await this.requirePool(em, workspaceId, input.senderPoolId)).id;
      await updateCampaign(em, campaign, changes, this.deps.clock.now());
      let steps: CampaignStep[];
      if (input.sequenceSteps !== undefined) {
        // Every waiting message before any counter moves (see lockWaitingMessages).
        await lockWaitingMessages(em, id);
        const before = await this.steps(em, id);
        await deleteSteps(em, id);
        steps = await this.writeSteps(em, id, input.sequenceSteps);
        // Fewer steps: a lead waiting for a removed one has finished the sequence.
        await completeBeyondLastStep(em, id, steps.length, this.deps.clock.now());
        // Another wait: the follow-ups waiting for a step are due its new delay after the
        // previous step was sent.
        const delays = steps.map((s, i) => ({ before: before[i]?.delayHours ?? s.delayHours, after: s.delayHours }));
        await rescheduleFollowUps(em, id, delays, this.deps.clock.now());
      } else {
        steps = await this.steps(em, id);
      }
      return campaignView(campaign, steps);
    });
  }

  /**
   * Bulk enrollment: validate everything first (422 naming every failing index, nothing
   * written), then one short transaction of set-based statements.
   */
  async enroll(workspaceId: string, campaignId: string, items: unknown[]) {
    const { leads, errors } = parseLeads(items);
    await this.require(this.em, workspaceId, campaignId);
    if (errors.length) throw new ApiError(422, 'validation_failed', `${new Set(errors.map((e) => e.index)).size} lead(s) failed validation`, { errors });
    const now = this.deps.clock.now();
    return transaction(this.em, async (em) => {
      // A share lock on the campaign orders this enrollment against a concurrent start or
      // pause: either the start sees these enrollments, or this sees the campaign running.
      const campaign = await lockCampaignStatus(em, workspaceId, campaignId);
      if (!campaign) throw ApiError.notFound('campaign');
      const { leadIds, customCounts, created, updated } = await upsertLeads(em, workspaceId, leads, now);
      // Custom fields merged with those stored (or between items naming the same lead): the same
      // per-lead limit, or a lead grew past it request by request (the transaction rolls back:
      // nothing written). Named by the request item the lead comes from.
      const over = customCounts.flatMap((n, i) =>
        n > LIMITS.customFields ? [{ index: leads[i].index, field: 'customFields', message: `at most ${LIMITS.customFields} custom fields per lead: merged with those of ${leads[i].email} already given, it would have ${n}` }] : [],
      );
      if (over.length) throw new ApiError(422, 'validation_failed', `${over.length} lead(s) failed validation`, { errors: over });
      const enrollments = await enroll(
        em,
        workspaceId,
        campaignId,
        leads.map((l, i) => ({ id: leadIds[i], emailKey: l.emailKey, email: l.email })),
        now,
      );
      // A lead enrolled while its address was suppressed, and taken off the list since, is
      // enrolled again by this request: it was never sent to (docs/decisions.md).
      const reactivated = await reactivateUnsuppressed(em, campaignId, now, leadIds);
      let queued = 0;
      if (campaign.status === 'running') {
        const emailByLead = new Map(leads.map((l, i) => [leadIds[i], l.email]));
        const active = enrollments.filter((e) => e.status === 'active').map((e) => ({ id: e.id, leadId: e.lead_id, email: emailByLead.get(e.lead_id)! }));
        for (const e of reactivated) active.push({ id: e.id, leadId: e.lead_id, email: e.email });
        queued = await queueFirstStepsFor(em, workspaceId, campaignId, active, now);
        if (queued) await notifyQueued(em);
      }
      await bumpCounters(em, campaignId, { enrolled: enrollments.length, queued });
      return { enrolled: created, updated, total: created + updated };
    });
  }

  /**
   * Addresses just taken off the suppression list (`emailKeys`, normalized), in the caller's
   * transaction after their delete: each running campaign with one of their leads enrolled as
   * `suppressed` and never sent to enrolls the lead again and queues its step 0 now, as a
   * re-enrollment would (draft and paused campaigns do it at their start or resume). Campaigns
   * are taken in id order, each under the share lock an enrollment takes, so a pause either
   * commits first (and its resume queues the lead) or waits for this. Returns how many
   * messages were queued.
   */
  async enrollUnsuppressed(workspaceId: string, emailKeys: string[]): Promise<number> {
    if (!emailKeys.length) return 0;
    const em = this.em;
    const now = this.deps.clock.now();
    const byCampaign = new Map<string, string[]>();
    for (const r of await suppressedEnrollmentsOf(em, workspaceId, emailKeys)) {
      const leads = byCampaign.get(r.campaign_id);
      if (leads) leads.push(r.lead_id);
      else byCampaign.set(r.campaign_id, [r.lead_id]);
    }
    let queued = 0;
    for (const [campaignId, leadIds] of byCampaign) {
      const campaign = await lockCampaignStatus(em, workspaceId, campaignId);
      if (campaign?.status !== 'running') continue;
      const again = await reactivateUnsuppressed(em, campaignId, now, leadIds);
      const n = await queueFirstStepsFor(em, workspaceId, campaignId, again.map((e) => ({ id: e.id, leadId: e.lead_id, email: e.email })), now);
      await bumpCounters(em, campaignId, { queued: n });
      queued += n;
    }
    if (queued) await notifyQueued(em);
    return queued;
  }

  /** draft|paused -> running (a no-op when running); queues step 0 where nothing is queued. */
  async start(workspaceId: string, id: string) {
    let change: { resumed: boolean; queued: number; backlog: boolean } | undefined;
    const started = await transaction(this.em, async (em) => {
      change = undefined;
      const campaign = await this.require(em, workspaceId, id, true);
      if (campaign.status === 'running') return { id, status: campaign.status, startedAt: iso(campaign.startedAt) };
      const { leads, steps } = await startable(em, id);
      if (!leads) throw new ApiError(400, 'no_leads_enrolled', 'the campaign has no enrolled leads');
      if (!steps) throw new ApiError(400, 'no_sequence_steps', 'the campaign has no sequence steps');
      const now = this.deps.clock.now();
      const resumed = campaign.status === 'paused';
      const neverStarted = campaign.startedAt == null;
      // Made before the workspace had a pool: the default (its oldest pool) now, or every
      // message would wait for a pool nobody set. With none still, the start waits as the
      // contract says of a pool without senders.
      campaign.senderPoolId ??= await this.defaultPoolId(em, workspaceId);
      await markRunning(em, campaign, now);
      const startedAt = campaign.startedAt!;
      // Leads enrolled while suppressed whose address is off the list now get step 0 too.
      await reactivateUnsuppressed(em, id, now);
      // The first FIRST_STEPS_AT_ONCE now, the rest by the workers from the campaign's backlog
      // (counted as queued from this commit: messages/queue.ts).
      const { queued, backlog } = await queueFirstSteps(em, id, now, { neverStarted });
      await bumpCounters(em, id, { queued });
      // The workers hear of it when this commits (sending/wakeup.ts), not at their next round.
      await notifyQueued(em);
      await recordEvent(em, workspaceId, campaignStarted({ id, name: campaign.name, startedAt }, resumed), now);
      change = { resumed, queued, backlog };
      return { id, status: campaign.status, startedAt: startedAt.toISOString() };
    });
    if (change) {
      const { resumed, queued, backlog } = change;
      this.deps.log.info({ workspaceId, campaignId: id, queued, ...(backlog ? { firstStepsBacklog: true } : {}) }, resumed ? 'campaign resumed' : 'campaign started');
    }
    return started;
  }

  /**
   * The lifecycle's last log line: running campaigns whose every enrollment has ended are
   * finished (and finished ones that got an active enrollment again are not), each logged once
   * across workers (noteFinished). Returns how many finished now. The `campaigns.finish` job.
   */
  async noteFinished(): Promise<number> {
    const finished = await noteFinished(this.em, this.deps.clock.now());
    for (const c of finished) this.deps.log.info({ workspaceId: c.workspace_id, campaignId: c.id, enrolled: c.enrolled }, 'campaign finished');
    return finished.length;
  }

  /** running -> paused; a no-op otherwise. Queued messages stay queued. */
  async pause(workspaceId: string, id: string) {
    let paused = false;
    const result = await transaction(this.em, async (em) => {
      paused = false;
      const campaign = await this.require(em, workspaceId, id, true);
      if (campaign.status === 'running') {
        await markPaused(em, campaign, this.deps.clock.now());
        paused = true;
      }
      return { id, status: campaign.status, pausedAt: iso(campaign.pausedAt) };
    });
    if (paused) this.deps.log.info({ workspaceId, campaignId: id }, 'campaign paused');
    return result;
  }

  async stats(workspaceId: string, id: string) {
    const c = await readCounters(this.em, workspaceId, id, this.deps.clock.now());
    if (!c) throw ApiError.notFound('campaign');
    const rate = (n: number) => (c.delivered > 0 ? Math.min(1, n / c.delivered) : 0);
    return {
      campaignId: id,
      totalEnrolled: c.enrolled,
      sent: c.sent,
      delivered: c.delivered,
      bounced: c.bounced,
      replied: c.replied,
      queued: c.queued,
      scheduled: c.scheduled,
      opened: c.opened,
      unsubscribed: c.unsubscribed,
      complained: c.complained,
      openRate: rate(c.opened),
      replyRate: rate(c.replied),
      // When nothing can be sent now, messages wait queued (none is lost or bounced) and this
      // says why (docs/decisions.md, "Why a campaign sends nothing").
      sendersAvailable: c.senders_available,
      blockedReason: blockedReason(c, this.deps.clock.now()),
    };
  }

  async leads(workspaceId: string, id: string, opts: { status?: string[]; replied?: boolean; bounced?: boolean; q?: string; limit: number; offset: number }) {
    const campaign = await this.require(this.em, workspaceId, id);
    const { rows, total } = await listEnrollments(this.em, id, opts);
    return { data: enrollmentViews(rows, campaign.schedule, this.deps.clock.now()), total, hasMore: opts.offset + rows.length < total };
  }

  /**
   * Takes a lead off the campaign (not off the workspace's other campaigns, nor onto the
   * suppression list): an active enrollment (or one suppressed at enrollment) ends `removed`,
   * its queued and scheduled messages are cancelled and the counters follow, in one
   * transaction. A message already being sent finishes and schedules nothing further. An
   * enrollment that has ended already stays as it is: the answer is the same (204).
   */
  async removeLead(workspaceId: string, campaignId: string, leadId: string): Promise<void> {
    const now = this.deps.clock.now();
    const removed = await transaction(this.em, async (em) => {
      // The share lock an enrollment takes: a start or resume in progress has queued the lead's
      // step 0 before this reads it (cancelled here), or queues nothing for it after.
      if (!(await lockCampaignStatus(em, workspaceId, campaignId))) throw ApiError.notFound('campaign', `campaign ${campaignId} not found`);
      const enrollmentId = await enrollmentInCampaign(em, campaignId, leadId);
      if (!enrollmentId) throw ApiError.notFound('lead', `lead ${leadId} is not enrolled in campaign ${campaignId}`);
      return (await endEnrollments(em, [enrollmentId], 'removed', 'removed', now)).length > 0;
    });
    if (removed) this.deps.log.info({ workspaceId, campaignId, leadId }, 'lead removed from the campaign');
  }

  /** The workspace of a campaign named by its id alone (the CLI); 404 `campaign_not_found`. */
  async workspaceOf(campaignId: string): Promise<string> {
    const workspaceId = await workspaceOfCampaign(this.em, campaignId);
    if (!workspaceId) throw ApiError.notFound('campaign', `campaign ${campaignId} not found`);
    return workspaceId;
  }

  /**
   * The id of the lead a command names, by its id or by its address (as enrollment compares
   * addresses: trimmed, case-insensitive), among the campaign's enrolled leads. 404
   * `campaign_not_found`, or `lead_not_found` as removeLead answers for a lead not enrolled.
   */
  async enrolledLead(workspaceId: string, campaignId: string, lead: { id: string } | { email: string }): Promise<string> {
    await this.require(this.em, workspaceId, campaignId);
    if ('id' in lead) {
      if (await enrollmentInCampaign(this.em, campaignId, lead.id)) return lead.id;
      throw ApiError.notFound('lead', `lead ${lead.id} is not enrolled in campaign ${campaignId}`);
    }
    const id = await enrolledLeadByEmail(this.em, campaignId, normalizeEmail(lead.email));
    if (!id) throw ApiError.notFound('lead', `no lead with the address ${lead.email.trim()} is enrolled in campaign ${campaignId}`);
    return id;
  }

  /** One enrolled lead as GET /v1/campaigns/:id/leads shows it; 404 as enrolledLead. */
  async enrollment(workspaceId: string, campaignId: string, leadId: string) {
    const campaign = await this.require(this.em, workspaceId, campaignId);
    const { rows } = await listEnrollments(this.em, campaignId, { leadId, limit: 1, offset: 0 });
    if (!rows.length) throw ApiError.notFound('lead', `lead ${leadId} is not enrolled in campaign ${campaignId}`);
    return enrollmentViews(rows, campaign.schedule, this.deps.clock.now())[0];
  }

  private async require(em: EntityManager, workspaceId: string, id: string, forUpdate = false): Promise<Campaign> {
    const campaign = await findCampaign(em, workspaceId, id, forUpdate);
    if (!campaign) throw ApiError.notFound('campaign', `campaign ${id} not found`);
    return campaign;
  }

  private async steps(em: EntityManager, campaignId: string) {
    return stepsOf(em, campaignId);
  }

  private async writeSteps(em: EntityManager, campaignId: string, input: StepInput[]): Promise<CampaignStep[]> {
    const steps = input.map((s, i) => ({ campaignId, stepIndex: i, subject: s.subject, bodyHtml: s.bodyHtml, delayHours: i === 0 ? 0 : (s.delayHours ?? DEFAULT_DELAY_HOURS) }));
    await insertSteps(em, steps);
    return steps;
  }

  private async requirePool(em: EntityManager, workspaceId: string, poolId: string) {
    const pool = await poolOfWorkspace(em, workspaceId, poolId);
    if (!pool) throw ApiError.invalid(`senderPoolId: sender pool ${poolId} not found in this workspace`);
    return pool;
  }

  private async defaultPoolId(em: EntityManager, workspaceId: string): Promise<string | null> {
    return (await firstPool(em, workspaceId))?.id ?? null;
  }
}

/**
 * Why a campaign's due messages cannot be sent now; null when one could be. What the operator
 * must fix comes first (no pool, no account that may send); then a closed window, which holds
 * every message whatever the pool has left (a round claims nothing for a campaign outside its
 * window); then the limits that free themselves as the 24 hours move on.
 */
function blockedReason(c: Counters, now: Date) {
  if (!c.sender_pool_id) return 'no_sender_pool' as const;
  if (c.senders_available === 0) return 'no_sender_available' as const;
  if (!inWindow(c.schedule, now)) return 'outside_schedule' as const;
  if ((c.pool_remaining ?? 0) <= 0) return 'pool_capacity_reached' as const;
  if (c.senders_with_room === 0) return 'sender_limits_reached' as const;
  return null;
}
