import { applyChanges } from '../../shared/changes.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import { sql } from '../../db/sql.ts';
import { orderedIds } from '../../adapters/ids.ts';
import type { LeadInput, StandardField } from './leads.ts';
import { CampaignSchema, CampaignStepSchema, type Campaign, type CampaignStep, type Schedule } from './entities.ts';
import type { LeadColumns } from '../messages/send.ts';

// The owner of `campaigns`, `campaign_steps` and `leads`: ordinary CRUD through the ORM
// entities (a campaign read for update is changed and flushed by the named transitions below),
// set-based statements (the lead upsert, the finish) as hand-written SQL.

export async function insertCampaign(em: EntityManager, campaign: Campaign): Promise<void> {
  await em.insert(CampaignSchema, campaign);
}

/** The workspace of a campaign named by its id alone (the CLI), or undefined. */
export async function workspaceOfCampaign(em: EntityManager, campaignId: string): Promise<string | undefined> {
  const [c] = await sql<{ workspace_id: string }>(em, 'select workspace_id from campaigns where id = ?', [campaignId]);
  return c?.workspace_id;
}

/** The lead enrolled in the campaign with this address (compared as normalizeEmail keys them), or undefined. */
export async function enrolledLeadByEmail(em: EntityManager, campaignId: string, emailKey: string): Promise<string | undefined> {
  // leads_workspace_email_key through the campaign's workspace, then enrollments_campaign_lead_key
  const [l] = await sql<{ id: string }>(
    em,
    `select l.id from campaigns c join leads l on l.workspace_id = c.workspace_id and l.email_key = ?
       join enrollments e on e.campaign_id = c.id and e.lead_id = l.id
      where c.id = ?`,
    [emailKey, campaignId],
  );
  return l?.id;
}

/** A campaign of the workspace, or null; `forUpdate` locks its row (FOR UPDATE) for a transition. */
export async function findCampaign(em: EntityManager, workspaceId: string, id: string, forUpdate = false): Promise<Campaign | null> {
  return em.findOne(CampaignSchema, { id, workspaceId }, forUpdate ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
}

/** A page of the workspace's campaigns, newest first, with the total. */
export async function pageCampaigns(em: EntityManager, workspaceId: string, limit: number, offset: number): Promise<[Campaign[], number]> {
  return em.findAndCount(CampaignSchema, { workspaceId }, { orderBy: { createdAt: 'desc', id: 'desc' }, limit, offset });
}

export type CampaignChanges = Partial<Pick<Campaign, 'name' | 'schedule' | 'trackOpens' | 'senderPoolId'>>;

/** Changes the settings of a campaign read for update (findCampaign). */
export async function updateCampaign(em: EntityManager, campaign: Campaign, changes: CampaignChanges, now: Date): Promise<void> {
  applyChanges(campaign, changes);
  campaign.updatedAt = now;
  await em.flush();
}

/** draft|paused -> running, on a campaign read for update. */
export async function markRunning(em: EntityManager, campaign: Campaign, now: Date): Promise<void> {
  campaign.status = 'running';
  campaign.startedAt ??= now;
  campaign.pausedAt = null;
  campaign.updatedAt = now;
  await em.flush();
}

/** running -> paused, on a campaign read for update. */
export async function markPaused(em: EntityManager, campaign: Campaign, now: Date): Promise<void> {
  campaign.status = 'paused';
  campaign.pausedAt = now;
  campaign.updatedAt = now;
  await em.flush();
}

/** The steps of one or more campaigns, by step index. */
export async function stepsOf(em: EntityManager, campaignIds: string | string[]): Promise<CampaignStep[]> {
  return em.find(CampaignStepSchema, { campaignId: Array.isArray(campaignIds) ? { $in: campaignIds } : campaignIds }, { orderBy: { stepIndex: 'asc' } });
}

export async function insertSteps(em: EntityManager, steps: CampaignStep[]): Promise<void> {
  if (steps.length) await em.insertMany(CampaignStepSchema, steps);
}

export async function deleteSteps(em: EntityManager, campaignId: string): Promise<void> {
  await em.nativeDelete(CampaignStepSchema, { campaignId });
}

const COLUMNS: Record<StandardField, string> = { firstName: 'first_name', lastName: 'last_name', company: 'company', jobTitle: 'job_title' };

/**
 * Upserts leads by (workspace, email_key) in two set-based statements: insert the new ones,
 * then patch the existing ones with only the fields present in the request (custom fields are
 * merged key by key). Returns the lead id of every input, and how many were created.
 */
export async function upsertLeads(em: EntityManager, workspaceId: string, leads: LeadInput[], now: Date) {
  const keys = leads.map((l) => l.emailKey);
  // A custom field set to null is no field (as null clears a standard one): a new lead is
  // stored without it, and an existing lead's is removed (patchLeads).
  const stored = leads.map((l) => withoutNulls(l.custom));
  const customs = stored.map((c) => JSON.stringify(c));

  // leads_workspace_email_key: the conflict target. Rows go in by email key (and are patched in
  // the same order below), so requests enrolling the same leads in any order wait for each
  // other instead of deadlocking; each row keeps the id of its place in the request.
  const inserted = await sql<{ id: string; email_key: string }>(
    em,
    `insert into leads (id, workspace_id, email, email_key, first_name, last_name, company, job_title, custom, created_at, updated_at)
     select t.id, ?, t.email, t.email_key, t.first_name, t.last_name, t.company, t.job_title, t.custom::jsonb, ?, ?
       from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])
         as t(id, email, email_key, first_name, last_name, company, job_title, custom)
      order by t.email_key
     on conflict (workspace_id, email_key) do nothing
     returning id, email_key`,
    [
      workspaceId,
      now,
      now,
      orderedIds('lead', leads.length),
      leads.map((l) => l.email),
      keys,
      fieldArray(leads, 'firstName'),
      fieldArray(leads, 'lastName'),
      fieldArray(leads, 'company'),
      fieldArray(leads, 'jobTitle'),
      customs,
    ],
  );
  // Patch only the leads that already existed (the insert skipped them).
  const insertedKeys = new Set(inserted.map((r) => r.email_key));
  const existing = leads.filter((l) => !insertedKeys.has(l.emailKey));
  const updated = existing.length ? await patchLeads(em, workspaceId, existing, now) : [];
  const idByKey = new Map<string, string>();
  for (const r of [...inserted, ...updated]) idByKey.set(r.email_key, r.id);
  // Custom fields merge key by key (with those stored, and between items of one lead): the count
  // each lead ends with, for the caller to hold to the per-lead limit. A new lead holds what the
  // request gave it (counted here, not by PostgreSQL for each of ten thousand rows); a patched
  // one what the merge left, which its update returns.
  const customCount = new Map<string, number>();
  leads.forEach((l, i) => customCount.set(l.emailKey, Object.keys(stored[i]).length));
  for (const r of updated) customCount.set(r.email_key, r.custom_count);
  return { leadIds: keys.map((k) => idByKey.get(k)!), customCounts: keys.map((k) => customCount.get(k)!), created: inserted.length, updated: updated.length };
}

function withoutNulls(custom: Record<string, unknown>): Record<string, unknown> {
  for (const v of Object.values(custom)) if (v === null) return Object.fromEntries(Object.entries(custom).filter(([, x]) => x !== null));
  return custom;
}

const fieldArray = (leads: LeadInput[], f: StandardField) => leads.map((l) => (l.fields[f] === undefined ? null : l.fields[f]));
const presentArray = (leads: LeadInput[], f: StandardField) => leads.map((l) => l.fields[f] !== undefined);

/** Overwrites only the fields present in the request; custom fields are merged key by key (null removes one). */
async function patchLeads(em: EntityManager, workspaceId: string, leads: LeadInput[], now: Date) {
  const sets = (Object.keys(COLUMNS) as StandardField[])
    .map((f) => `${COLUMNS[f]} = case when p.has_${COLUMNS[f]} then p.${COLUMNS[f]} else l.${COLUMNS[f]} end`)
    .join(',\n         ');
  // The rows locked in email key order first (the insert's order): the update's own order
  // follows its join plan, which two requests need not share.
  await sql(em, `select 1 from leads where workspace_id = ? and email_key = any(?::text[]) order by email_key for update`, [
    workspaceId,
    leads.map((l) => l.emailKey),
  ]);
  // leads_workspace_email_key for the join.
  return sql<{ id: string; email_key: string; custom_count: number }>(
    em,
    `update leads l set
         email = p.email,
         ${sets},
         custom = (l.custom || p.custom::jsonb) - array(select e.key from jsonb_each(p.custom::jsonb) as e where e.value = 'null'::jsonb),
         updated_at = ?
       from unnest(?::text[], ?::text[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[])
         as p(email_key, email, custom, has_first_name, first_name, has_last_name, last_name, has_company, company, has_job_title, job_title)
      where l.workspace_id = ? and l.email_key = p.email_key
      returning l.id, l.email_key, (select count(*) from jsonb_object_keys(l.custom))::int as custom_count`,
    [
      now,
      leads.map((l) => l.emailKey),
      leads.map((l) => l.email),
      leads.map((l) => JSON.stringify(l.custom)),
      presentArray(leads, 'firstName'),
      fieldArray(leads, 'firstName'),
      presentArray(leads, 'lastName'),
      fieldArray(leads, 'lastName'),
      presentArray(leads, 'company'),
      fieldArray(leads, 'company'),
      presentArray(leads, 'jobTitle'),
      fieldArray(leads, 'jobTitle'),
      workspaceId,
    ],
  );
}

/**
 * Running campaigns whose every enrollment has ended are finished; a finished campaign that gets
 * an active enrollment again (leads enrolled while it runs) or stops running is not. Both
 * directions in one statement, so each finish is reported exactly once across workers: only
 * the statement that sets `finished_at` returns the campaign. The active test reads
 * `enrollments_active_campaign_idx` (0015), so it stops at the first active enrollment.
 */
export async function noteFinished(em: EntityManager, now: Date): Promise<Array<{ id: string; workspace_id: string; enrolled: number }>> {
  return sql(
    em,
    `with reopened as (
       update campaigns c set finished_at = null
        where c.finished_at is not null
          and (c.status <> 'running' or exists (select 1 from enrollments e where e.campaign_id = c.id and e.status = 'active'))
     )
     update campaigns c set finished_at = ?
       from campaign_counters k
      where k.campaign_id = c.id and c.status = 'running' and c.finished_at is null
        and not exists (select 1 from enrollments e where e.campaign_id = c.id and e.status = 'active')
     returning c.id, c.workspace_id, k.enrolled`,
    [now],
  );
}


export interface RunningCampaign {
  id: string;
  workspace_id: string;
  sender_pool_id: string | null;
  schedule: Schedule | null;
}

export async function runningCampaigns(em: EntityManager): Promise<RunningCampaign[]> {
  // campaigns_running_idx
  return sql<RunningCampaign>(em, `select id, workspace_id, sender_pool_id, schedule from campaigns where status = 'running' order by id`);
}

/** A campaign's sending schedule (null: any time). */
export async function campaignSchedule(em: EntityManager, campaignId: string): Promise<Schedule | null> {
  const [c] = await sql<{ schedule: Schedule | null }>(em, `select schedule from campaigns where id = ?`, [campaignId]);
  return c?.schedule ?? null;
}

/**
 * The campaign's status under a share lock: it orders an enrollment against a concurrent start
 * or pause (either the start sees these enrollments, or the enrollment sees the campaign running).
 */
export async function lockCampaignStatus(em: EntityManager, workspaceId: string, campaignId: string): Promise<{ status: string } | undefined> {
  const [campaign] = await sql<{ status: string }>(em, 'select status from campaigns where id = ? and workspace_id = ? for share', [campaignId, workspaceId]);
  return campaign;
}

/** Whether the campaign has leads (removed ones do not count) and steps to start with. */
export async function startable(em: EntityManager, campaignId: string): Promise<{ leads: boolean; steps: boolean }> {
  const [row] = await sql<{ leads: boolean; steps: boolean }>(
    em,
    `select exists (select 1 from enrollments where campaign_id = ? and status <> 'removed') as leads,
            exists (select 1 from campaign_steps where campaign_id = ?) as steps`,
    [campaignId, campaignId],
  );
  return row;
}

/** A lead's personalization columns. */
export async function leadById(em: EntityManager, id: string): Promise<LeadColumns | undefined> {
  const [lead] = await sql<LeadColumns>(em, `select email, first_name, last_name, company, job_title, custom from leads where id = ?`, [id]);
  return lead;
}

export async function campaignName(em: EntityManager, id: string): Promise<string | null> {
  const [campaign] = await sql<{ name: string }>(em, `select name from campaigns where id = ?`, [id]);
  return campaign?.name ?? null;
}

/** Whether the workspace has this campaign. */
export async function campaignExists(em: EntityManager, workspaceId: string, campaignId: string): Promise<boolean> {
  return (await sql(em, 'select 1 from campaigns where workspace_id = ? and id = ?', [workspaceId, campaignId])).length > 0;
}

/** A lead of the workspace with its personalization columns. */
export async function leadOfWorkspace(em: EntityManager, workspaceId: string, id: string): Promise<({ id: string } & LeadColumns) | undefined> {
  const [lead] = await sql<{ id: string } & LeadColumns>(
    em,
    `select l.id, l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom from leads l where l.workspace_id = ? and l.id = ?`,
    [workspaceId, id],
  );
  return lead;
}
