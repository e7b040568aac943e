import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { LeadInput, StandardField } from './leads.ts';

const COLUMNS: Record<StandardField, string> = { firstName: 'first_name', lastName: 'last_name', company: 'company', jobTitle: 'job_title' };

/**
 * Upserts leads by (workspace, email_key) in two set-based statements: insert the new ones,
 * then patch the existing ones with only the fields present in the request (custom fields are
 * merged key by key). Returns the lead id of every input, and how many were created.
 */
export async function upsertLeads(em: EntityManager, workspaceId: string, leads: LeadInput[], now: Date) {
  const keys = leads.map((l) => l.emailKey);
  const fieldArray = (f: StandardField) => leads.map((l) => (l.fields[f] === undefined ? null : l.fields[f]));
  const presentArray = (f: StandardField) => leads.map((l) => l.fields[f] !== undefined);
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
      fieldArray('firstName'),
      fieldArray('lastName'),
      fieldArray('company'),
      fieldArray('jobTitle'),
      customs,
    ],
  );
  const insertedKeys = inserted.map((r) => r.email_key);
  const sets = (Object.keys(COLUMNS) as StandardField[])
    .map((f) => `${COLUMNS[f]} = case when p.has_${COLUMNS[f]} then p.${COLUMNS[f]} else l.${COLUMNS[f]} end`)
    .join(',\n         ');
  const updated = await sql<{ id: string; email_key: string }>(
    em,
    `update leads l set
         email = p.email,
         ${sets},
         custom = l.custom || p.custom::jsonb,
         updated_at = ?
       from unnest(?::text[], ?::text[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[], ?::boolean[], ?::text[])
         as p(email_key, email, custom, has_first_name, first_name, has_last_name, last_name, has_company, company, has_job_title, job_title)
      where l.workspace_id = ? and l.email_key = p.email_key and not (p.email_key = any(?::text[]))
      returning l.id, l.email_key`,
    [
      now,
      keys,
      leads.map((l) => l.email),
      customs,
      presentArray('firstName'),
      fieldArray('firstName'),
      presentArray('lastName'),
      fieldArray('lastName'),
      presentArray('company'),
      fieldArray('company'),
      presentArray('jobTitle'),
      fieldArray('jobTitle'),
      workspaceId,
      insertedKeys,
    ],
  );
  const idByKey = new Map<string, string>();
  for (const r of [...inserted, ...updated]) idByKey.set(r.email_key, r.id);
  return { leadIds: keys.map((k) => idByKey.get(k)!), created: inserted.length, updated: updated.length };
}

/**
 * Enrolls leads into a campaign; a lead already enrolled keeps its enrollment untouched. A
 * suppressed address is enrolled with status `suppressed` (never sent to).
 */
export async function enrollLeads(em: EntityManager, workspaceId: string, campaignId: string, leadIds: string[], now: Date) {
  // enrollments_campaign_lead_key: the conflict target; suppressions primary key for the join.
  return sql<{ id: string; status: string }>(
    em,
    `insert into enrollments (id, workspace_id, campaign_id, lead_id, status, created_at, updated_at)
     select t.id, ?, ?, t.lead_id, case when s.email_key is null then 'active' else 'suppressed' end, ?, ?
       from unnest(?::text[], ?::text[]) with ordinality as t(id, lead_id, n)
       join leads l on l.id = t.lead_id
       left join suppressions s on s.workspace_id = l.workspace_id and s.email_key = l.email_key
      order by t.n
     on conflict (campaign_id, lead_id) do nothing
     returning id, status`,
    [workspaceId, campaignId, now, now, leadIds.map(() => newId('enr')), leadIds],
  );
}

/**
 * Queues step 0 for every active enrollment of the campaign that has nothing queued yet (or
 * only for `enrollmentIds`). Idempotent: the (enrollment, step) unique index makes a repeat a
 * no-op. Returns how many messages were queued.
 */
export async function queueFirstSteps(em: EntityManager, campaignId: string, now: Date, enrollmentIds?: string[]): Promise<number> {
  const rows = await sql<{ n: string }>(
    em,
    `with q as (
       insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
       select 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.workspace_id, e.campaign_id, e.id, e.lead_id, 0, 'queued', ?, l.email, ?, ?
         from enrollments e join leads l on l.id = e.lead_id
        where e.campaign_id = ? and e.status = 'active' and e.current_step is null
          ${enrollmentIds ? 'and e.id = any(?::text[])' : ''}
       on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing
       returning enrollment_id
     ), u as (
       update enrollments set current_step = 0, next_step_at = ?, updated_at = ? where id in (select enrollment_id from q)
     )
     select count(*) as n from q`,
    enrollmentIds ? [now, now, now, campaignId, enrollmentIds, now, now] : [now, now, now, campaignId, now, now],
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

export type CounterName = 'enrolled' | 'queued' | 'scheduled' | 'sent' | 'delivered' | 'bounced' | 'replied' | 'opened' | 'unsubscribed';

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
}

export async function readCounters(em: EntityManager, workspaceId: string, campaignId: string): Promise<Counters | null> {
  // Primary-key reads on campaigns and campaign_counters: constant time at any campaign size.
  const rows = await sql<Counters>(
    em,
    `select k.enrolled, k.queued, k.scheduled, k.sent, k.delivered, k.bounced, k.replied, k.opened, k.unsubscribed
       from campaigns c join campaign_counters k on k.campaign_id = c.id
      where c.id = ? and c.workspace_id = ?`,
    [campaignId, workspaceId],
  );
  return rows[0] ?? null;
}

export interface EnrollmentRow {
  enrollment_id: string;
  status: string;
  current_step: number | null;
  last_event: string | null;
  last_event_at: Date | string | null;
  created_at: Date | string;
  lead_id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  company: string | null;
  job_title: string | null;
  custom: Record<string, unknown>;
  next_send_at: Date | string | null;
}

export async function listEnrollments(em: EntityManager, campaignId: string, opts: { status?: string; limit: number; offset: number }) {
  // enrollments_campaign_seq_idx / enrollments_campaign_status_idx for the page and the
  // count; outbound_enrollment_step_key for each enrollment's pending message.
  const filter = opts.status ? 'and e.status = ?' : '';
  const params = opts.status ? [campaignId, opts.status] : [campaignId];
  const rows = await sql<EnrollmentRow>(
    em,
    `select e.id as enrollment_id, e.status, e.current_step, e.last_event, e.last_event_at, e.created_at,
            l.id as lead_id, l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom,
            (select min(m.due_at) from outbound_messages m
              where m.enrollment_id = e.id and m.state in ('queued', 'scheduled', 'sending')) as next_send_at
       from enrollments e join leads l on l.id = e.lead_id
      where e.campaign_id = ? ${filter}
      order by e.seq
      limit ? offset ?`,
    [...params, opts.limit, opts.offset],
  );
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from enrollments e where e.campaign_id = ? ${filter}`, params);
  return { rows, total: Number(n) };
}
