import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { LeadInput, StandardField } from './leads.ts';
import type { LeadColumns } from '../sending/repository.ts';

const COLUMNS: Record<StandardField, string> = { firstName: 'first_name', lastName: 'last_name', company: 'company', jobTitle: 'job_title' };

/**
 * Upserts leads by (workspace, email_key) in two set-based statements: insert the new ones,
 * then patch the existing ones with only the fields present in the request (custom fields are
 * merged key by key). Returns the lead id of every input, and how many were created.
 */
export async function upsertLeads(em: EntityManager, workspaceId: string, leads: LeadInput[], now: Date) {
  const keys = leads.map((l) => l.emailKey);
  const customs = leads.map((l) => JSON.stringify(l.custom));

  // leads_workspace_email_key: the conflict target.
  const inserted = await sql<{ id: string; email_key: string }>(
    em,
    `insert into leads (id, workspace_id, email, email_key, first_name, last_name, company, job_title, custom, created_at, updated_at)
     select t.id, ?, t.email, t.email_key, t.first_name, t.last_name, t.company, t.job_title, t.custom::jsonb, ?, ?
       from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])
         as t(id, email, email_key, first_name, last_name, company, job_title, custom)
     on conflict (workspace_id, email_key) do nothing
     returning id, email_key`,
    [
      workspaceId,
      now,
      now,
      leads.map(() => newId('lead')),
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
  return { leadIds: keys.map((k) => idByKey.get(k)!), created: inserted.length, updated: updated.length };
}

const fieldArray = (leads: LeadInput[], f: StandardField) => leads.map((l) => (l.fields[f] === undefined ? null : l.fields[f]));
const presentArray = (leads: LeadInput[], f: StandardField) => leads.map((l) => l.fields[f] !== undefined);

/** Overwrites only the fields present in the request; custom fields are merged key by key. */
async function patchLeads(em: EntityManager, workspaceId: string, leads: LeadInput[], now: Date) {
  const sets = (Object.keys(COLUMNS) as StandardField[])
    .map((f) => `${COLUMNS[f]} = case when p.has_${COLUMNS[f]} then p.${COLUMNS[f]} else l.${COLUMNS[f]} end`)
    .join(',\n         ');
  // leads_workspace_email_key for the join.
  return sql<{ id: string; email_key: string }>(
    em,
    `update leads l set
         email = p.email,
         ${sets},
         custom = l.custom || p.custom::jsonb,
         updated_at = ?
       from unnest(?::text[], ?::text[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[])
         as p(email_key, email, custom, has_first_name, first_name, has_last_name, last_name, has_company, company, has_job_title, job_title)
      where l.workspace_id = ? and l.email_key = p.email_key
      returning l.id, l.email_key`,
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
 * Enrolls leads into a campaign; a lead already enrolled keeps its enrollment untouched. A
 * suppressed address is enrolled with status `suppressed` (never sent to).
 */
export async function enrollLeads(em: EntityManager, workspaceId: string, campaignId: string, leads: Array<{ id: string; emailKey: string; email: string }>, now: Date) {
  // enrollments_campaign_lead_key: the conflict target; suppressions primary key for the join.
  return sql<{ id: string; lead_id: string; status: string }>(
    em,
    `insert into enrollments (id, workspace_id, campaign_id, lead_id, status, created_at, updated_at)
     select t.id, ?, ?, t.lead_id, case when s.email_key is null then 'active' else 'suppressed' end, ?, ?
       from unnest(?::text[], ?::text[], ?::text[]) as t(id, lead_id, email_key)
       left join suppressions s on s.workspace_id = ? and s.email_key = t.email_key
     on conflict (campaign_id, lead_id) do nothing
     returning id, lead_id, status`,
    [workspaceId, campaignId, now, now, leads.map(() => newId('enr')), leads.map((l) => l.id), leads.map((l) => l.emailKey), workspaceId],
  );
}

/**
 * Queues step 0 for every active enrollment of the campaign that has none yet.
 * Idempotent: the (enrollment, step) unique index makes a repeat a no-op. Returns how many
 * messages were queued.
 */
export async function queueFirstSteps(em: EntityManager, campaignId: string, now: Date): Promise<number> {
  // enrollments_campaign_seq_idx for the campaign's enrollments; outbound_enrollment_step_key
  // is the conflict target that skips the ones already queued (no anti-join: its plan is at
  // the mercy of table statistics, and a fresh campaign has none).
  const rows = await sql<{ n: string }>(
    em,
    `with q as (
       insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
       select 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.workspace_id, e.campaign_id, e.id, e.lead_id, 0, 'queued', ?, l.email, ?, ?
         from enrollments e join leads l on l.id = e.lead_id
        where e.campaign_id = ? and e.status = 'active'
       on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing
       returning 1
     )
     select count(*) as n from q`,
    [now, now, now, campaignId],
  );
  return Number(rows[0].n);
}

/** Queues step 0 for enrollments just created in a running campaign (no join needed). */
export async function queueFirstStepsFor(
  em: EntityManager,
  workspaceId: string,
  campaignId: string,
  enrollments: Array<{ id: string; leadId: string; email: string }>,
  now: Date,
): Promise<number> {
  if (!enrollments.length) return 0;
  const rows = await sql<{ n: string }>(
    em,
    `with q as (
       insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
       select 'msg_' || replace(gen_random_uuid()::text, '-', ''), ?, ?, t.enrollment_id, t.lead_id, 0, 'queued', ?, t.email, ?, ?
         from unnest(?::text[], ?::text[], ?::text[]) as t(enrollment_id, lead_id, email)
       on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing
       returning 1
     )
     select count(*) as n from q`,
    [workspaceId, campaignId, now, now, now, enrollments.map((e) => e.id), enrollments.map((e) => e.leadId), enrollments.map((e) => e.email)],
  );
  return Number(rows[0].n);
}

/** Adds to the campaign's counters (one row, locked for the rest of the transaction). */
export async function bumpCounters(em: EntityManager, campaignId: string, delta: Partial<Record<CounterName, number>>): Promise<void> {
  const entries = Object.entries(delta).filter(([, v]) => v);
  if (!entries.length) return;
  await sql(em, `update campaign_counters set ${entries.map(([k]) => `${k} = ${k} + ?`).join(', ')} where campaign_id = ?`, [
    ...entries.map(([, v]) => v),
    campaignId,
  ]);
}

export type CounterName = 'enrolled' | 'queued' | 'scheduled' | 'sent' | 'delivered' | 'bounced' | 'replied' | 'opened' | 'unsubscribed' | 'complained';

export interface Counters {
  enrolled: number;
  queued: number;
  scheduled: number;
  sent: number;
  delivered: number;
  bounced: number;
  replied: number;
  opened: number;
  unsubscribed: number;
  complained: number;
  sender_pool_id: string | null;
  /** Accounts of the campaign's pool that may send now (senders/health.ts). */
  senders_available: number;
}

export async function readCounters(em: EntityManager, workspaceId: string, campaignId: string, now: Date): Promise<Counters | null> {
  // Primary-key reads on campaigns and campaign_counters: constant time at any campaign size.
  const rows = await sql<Counters>(
    em,
    `select k.enrolled, k.queued, k.scheduled, k.sent, k.delivered, k.bounced, k.replied, k.opened, k.unsubscribed, k.complained,
            c.sender_pool_id,
            (select count(*)::int from pool_members pm join sender_accounts a on a.id = pm.sender_account_id
              where pm.pool_id = c.sender_pool_id and a.status = 'active' and a.health <> 'auth_failed'
                and (a.health_retry_at is null or a.health_retry_at <= ?)) as senders_available
       from campaigns c join campaign_counters k on k.campaign_id = c.id
      where c.id = ? and c.workspace_id = ?`,
    [now, campaignId, workspaceId],
  );
  return rows[0] ?? null;
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

export interface EnrollmentRow extends LeadColumns {
  enrollment_id: string;
  status: string;
  current_step: number | null;
  last_event: string | null;
  last_event_at: Date | string | null;
  failure_reason: string | null;
  created_at: Date | string;
  lead_id: string;
  next_send_at: Date | string | null;
}

export async function listEnrollments(em: EntityManager, campaignId: string, opts: { status?: string; q?: string; limit: number; offset: number }) {
  // enrollments_campaign_seq_idx for the page and the count; outbound_enrollment_step_key for each enrollment's pending message.
  // A search (q) filters the campaign's enrollments by their lead (leads primary key), no index of its own.
  const conditions: string[] = [];
  const params: unknown[] = [campaignId];
  if (opts.status) {
    conditions.push('and e.status = ?');
    params.push(opts.status);
  }
  if (opts.q) {
    const like = `%${opts.q.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c)}%`;
    conditions.push(`and exists (select 1 from leads s where s.id = e.lead_id and (s.email_key like ? escape '\\' or lower(coalesce(s.first_name, '')) like ? escape '\\'
                      or lower(coalesce(s.last_name, '')) like ? escape '\\' or lower(coalesce(s.company, '')) like ? escape '\\'))`);
    params.push(like, like, like, like);
  }
  const filter = conditions.join(' ');
  const rows = await sql<EnrollmentRow>(
    em,
    `select e.id as enrollment_id, e.status, e.last_event, e.last_event_at, e.created_at,
            l.id as lead_id, l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom,
            (select max(m.step_index) from outbound_messages m where m.enrollment_id = e.id and m.kind = 'campaign') as current_step,
            (select min(m.due_at) from outbound_messages m
              where m.enrollment_id = e.id and m.state in ('queued', 'scheduled', 'sending')) as next_send_at,
            case when e.last_event = 'failed' then
              (select m.last_error from outbound_messages m
                where m.enrollment_id = e.id and m.kind = 'campaign' and m.state = 'failed' order by m.step_index desc limit 1)
            end as failure_reason
       from enrollments e join leads l on l.id = e.lead_id
      where e.campaign_id = ? ${filter}
      order by e.seq
      limit ? offset ?`,
    [...params, opts.limit, opts.offset],
  );
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from enrollments e where e.campaign_id = ? ${filter}`, params);
  return { rows, total: Number(n) };
}
