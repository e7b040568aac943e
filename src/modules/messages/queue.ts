import type { EntityManager } from '@mikro-orm/postgresql';
import { onIndexPaths, sql } from '../../db/sql.ts';
import { likeSubstring } from '../../shared/text.ts';
import { orderedIds } from '../../adapters/ids.ts';
import { bouncedMessageSql, bumpCounters } from './counters.ts';
import type { LeadColumns } from './send.ts';
import { countedReplySql } from '../inbound/repository.ts';

// Putting messages into the queue: enrolling leads, queueing first steps (and telling the
// workers), promoting due follow-ups. outbound_messages and enrollments are owned by this
// module (docs/architecture.md).

/** The PostgreSQL channel a campaign start (or leads queued into a running campaign) notifies. */
export const SEND_CHANNEL = 'mailgate_send';

/**
 * Tells the workers that messages were queued for sending. Call it in the transaction that
 * queues them: PostgreSQL delivers the notification when (and only if) it commits
 * (sending/wakeup.ts listens).
 */
export async function notifyQueued(em: EntityManager): Promise<void> {
  await sql(em, `select pg_notify('${SEND_CHANNEL}', '')`);
}

/**
 * Ids for the messages one statement queues, in the order it writes them: the statement's
 * clock in microseconds, the row's number, 32 random bits. The primary key and
 * outbound_claim_order_idx (campaign_id, due_at, id) then grow at their right edge instead of
 * taking 100,000 inserts at random places (a campaign start: docs/benchmarks.md, issue 20); the
 * claim sends a campaign's first steps in enrollment order. `order`: the window's order, the
 * order of the statement's rows (empty: as they come).
 */
function orderedMessageId(order = ''): string {
  return `'msg_' || lpad(to_hex((select (extract(epoch from clock_timestamp()) * 1000000)::bigint)), 14, '0')
       || lpad(to_hex(row_number() over (${order})), 8, '0') || lpad(to_hex((random() * 4294967295)::bigint), 8, '0')`;
}

/**
 * Enrolls leads into a campaign; a lead already enrolled keeps its enrollment untouched. A
 * suppressed address is enrolled with status `suppressed` (never sent to). In the order given
 * (`seq`, the listing's and so the first steps' order; and the order returned): the join to
 * the suppressions may come out in any order (a hash on the leads emits the unmatched ones
 * last), so the rows are sorted back by their position before the insert numbers them.
 */
export async function enroll(em: EntityManager, workspaceId: string, campaignId: string, leads: Array<{ id: string; emailKey: string; email: string }>, now: Date) {
  // enrollments_campaign_lead_key: the conflict target; suppressions primary key for the join.
  return sql<{ id: string; lead_id: string; status: string }>(
    em,
    `insert into enrollments (id, workspace_id, campaign_id, lead_id, status, created_at, updated_at)
     select t.id, ?, ?, t.lead_id, case when s.email_key is null then 'active' else 'suppressed' end, ?, ?
       from unnest(?::text[], ?::text[], ?::text[]) with ordinality as t(id, lead_id, email_key, n)
       left join suppressions s on s.workspace_id = ? and s.email_key = t.email_key
      order by t.n
     on conflict (campaign_id, lead_id) do nothing
     returning id, lead_id, status`,
    [workspaceId, campaignId, now, now, orderedIds('enr', leads.length), leads.map((l) => l.id), leads.map((l) => l.emailKey), workspaceId],
  );
}

/**
 * Enrollments of the campaign made `suppressed` because their address was on the suppression
 * list when they were enrolled, that never had a message, and whose address is off the list
 * now (removed in the dashboard or with the CLI): active again, so the next queueing (a start,
 * a resume, the re-enrollment into a running campaign) gives them step 0. Suppression is the
 * list at the time of sending (contract §4); an enrollment ended by it at its guard has a
 * message and stays ended. `leadIds` limits it to those leads (a re-enrollment). Returns the
 * enrollments it made active, with their lead's address.
 */
export async function reactivateUnsuppressed(em: EntityManager, campaignId: string, now: Date, leadIds?: string[]) {
  // enrollments_suppressed_campaign_idx (0026) for the campaign's suppressed enrollments; the
  // suppressions primary key and outbound_enrollment_step_key for the two checks. On index
  // paths: with a suppression list and a campaign imported moments ago, the plan made from the
  // empty tables' statistics read the whole list once per suppressed enrollment (16 s for 5,000
  // against 5,000, in a start or an enrollment request; test/sending/first-step-backlog.test.ts).
  return onIndexPaths(em, () => sql<{ id: string; lead_id: string; email: string }>(
    em,
    `update enrollments e set status = 'active', updated_at = ?
       from leads l
      where e.campaign_id = ? and e.status = 'suppressed' ${leadIds ? 'and e.lead_id = any(?::text[])' : ''}
        and l.id = e.lead_id
        and not exists (select 1 from suppressions s where s.workspace_id = e.workspace_id and s.email_key = l.email_key)
        and not exists (select 1 from outbound_messages m where m.enrollment_id = e.id and m.kind = 'campaign')
      returning e.id, e.lead_id, l.email`,
    leadIds ? [now, campaignId, leadIds] : [now, campaignId],
  ));
}

/**
 * The enrollments made `suppressed` at enrollment of the workspace's leads with these
 * addresses (normalized keys), by campaign: what taking the addresses off the list may enroll
 * again (campaigns/service.ts enrollUnsuppressed). The leads' (workspace_id, email_key) key,
 * then each lead's enrollments.
 */
export async function suppressedEnrollmentsOf(em: EntityManager, workspaceId: string, emailKeys: string[]) {
  return sql<{ campaign_id: string; lead_id: string }>(
    em,
    `select e.campaign_id, e.lead_id from leads l join enrollments e on e.lead_id = l.id
      where l.workspace_id = ? and l.email_key = any(?::text[]) and e.status = 'suppressed'
      order by e.campaign_id, e.lead_id`,
    [workspaceId, emailKeys],
  );
}

/**
 * How many enrollments (in enrollment order) a start or a resume gives step 0 in its own
 * transaction; the rest are written by the workers in chunks of as many (writeBacklogChunk).
 * A campaign of up to this many leads is queued whole by its start, as before.
 */
export const FIRST_STEPS_AT_ONCE = 5_000;

/**
 * Queues step 0 for every active enrollment of the campaign that has none yet, in the caller's
 * transaction, which holds the campaign's row lock (FOR UPDATE: no enrollment is added and no
 * backlog chunk runs meanwhile). Returns how many messages it wrote, and whether the campaign
 * has a backlog.
 *
 * A first start (`neverStarted`) writes the first FIRST_STEPS_AT_ONCE enrollments' now; the
 * rest go to the campaign's backlog (first_step_backlog, migration 0033), counted as queued from
 * this commit (pendingFirstStepsSql) and written by the workers in enrollment order
 * (writeBacklogChunk). Before, a 100,000-lead start wrote every row in the request: 1.2-2.6 s,
 * the issue 20 target being under 1 s (docs/decisions.md, "A large start's first steps"). None
 * of its enrollments has a message yet (step 0 is only ever queued for a running campaign), so
 * the insert needs no conflict arbiter: each row is one plain insert instead of a speculative
 * insert confirmed afterwards (a quarter of a 100,000-lead start, docs/benchmarks.md).
 *
 * A resume writes every missing one outside the campaign's backlog now, with the arbiter (the
 * unique (enrollment, step) index makes a row already there a no-op); a backlog the campaign
 * still has stays the workers' (nothing inside its range got a message while the campaign was
 * paused: pendingFirstStepSql).
 */
export async function queueFirstSteps(em: EntityManager, campaignId: string, now: Date, opts: { neverStarted: boolean }): Promise<{ queued: number; backlog: boolean }> {
  if (!opts.neverStarted) {
    const queued = await insertFirstSteps(em, campaignId, 'outside the backlog', now, now);
    const [b] = await sql(em, 'select 1 from first_step_backlog where campaign_id = ?', [campaignId]);
    return { queued, backlog: Boolean(b) };
  }
  // enrollments_campaign_seq_idx: the enrollment the first chunk ends at, and the last one.
  const [range] = await sql<{ bound: string | null; last: string | null }>(
    em,
    `select (select seq from enrollments where campaign_id = ? order by seq offset ? limit 1) as bound,
            (select max(seq) from enrollments where campaign_id = ?) as last`,
    [campaignId, FIRST_STEPS_AT_ONCE - 1, campaignId],
  );
  if (range.last == null) return { queued: 0, backlog: false };
  const through = range.bound ?? range.last;
  const queued = await insertFirstSteps(em, campaignId, { after: '0', through, arbiter: false }, now, now);
  if (BigInt(through) >= BigInt(range.last)) return { queued, backlog: false };
  await sql(em, `insert into first_step_backlog (campaign_id, after_seq, through_seq, due_at, created_at) values (?, ?, ?, ?, ?)`, [
    campaignId,
    through,
    range.last,
    now,
    now,
  ]);
  return { queued, backlog: true };
}

/**
 * Step 0, due at `due`, for the campaign's active enrollments with `after < seq <= through`
 * (enrollments_campaign_seq_idx), or for all of them outside its backlog's range (a resume), in
 * enrollment order: the ordered ids follow `seq`, so the claim sends them in that order
 * (outbound_claim_order_idx) whichever statement wrote them.
 *
 * The enrollments are read with a share lock: one ending now (an unsubscribe, a complaint, a
 * reply: endEnrollments locks it, ends it and cancels its waiting messages, without the
 * campaign's lock) is waited for and then read as it ended, so no step 0 is written after its
 * cancel looked for one (the chunks of a backlog run for seconds after a start). The lock
 * waits for such a writer, never the other way round: the counters are taken last.
 */
async function insertFirstSteps(
  em: EntityManager,
  campaignId: string,
  which: { after: string; through: string; arbiter: boolean } | 'outside the backlog',
  due: Date,
  now: Date,
): Promise<number> {
  const range = which === 'outside the backlog' ? null : which;
  const rows = await sql<{ n: string }>(
    em,
    `with e as (
       select e.id, e.workspace_id, e.campaign_id, e.lead_id, e.seq from enrollments e
        where e.campaign_id = ? and e.status = 'active'
          ${
            range
              ? 'and e.seq > ?::bigint and e.seq <= ?::bigint'
              : 'and not exists (select 1 from first_step_backlog b where b.campaign_id = e.campaign_id and e.seq > b.after_seq and e.seq <= b.through_seq)'
          }
        for share of e
     ), q as (
       insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
       select ${orderedMessageId('order by e.seq')}, e.workspace_id, e.campaign_id, e.id, e.lead_id, 0, 'queued', ?, l.email, ?, ?
         from e join leads l on l.id = e.lead_id
       ${range?.arbiter === false ? '' : `on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing`}
       returning 1
     )
     select count(*) as n from q`,
    [campaignId, ...(range ? [range.after, range.through] : []), due, now, now],
  );
  return Number(rows[0].n);
}

/**
 * A boolean SQL expression on one enrollment (alias `e`) of a campaign with a backlog (alias
 * `b`, first_step_backlog): its step 0 is the backlog's to write. Active and in the range is
 * enough: no enrollment in the range has a step-0 message (a first start writes none there,
 * a chunk moves the range past what it writes, a resume and queueFirstStepsFor leave the
 * range's to it).
 */
export function pendingFirstStepSql(e: string, b: string): string {
  return `${e}.status = 'active' and ${e}.seq > ${b}.after_seq and ${e}.seq <= ${b}.through_seq`;
}

/**
 * How many first steps of the campaign (an SQL expression naming its id) the backlog has yet to
 * write: queued as far as the campaign's stats and the metrics say, as they are as far as its
 * sending goes (enrollments_campaign_seq_idx over the range; nothing without a backlog).
 */
export function pendingFirstStepsSql(campaignId: string): string {
  return `(select count(*) from first_step_backlog b join enrollments e on e.campaign_id = b.campaign_id
            where b.campaign_id = ${campaignId} and ${pendingFirstStepSql('e', 'b')})`;
}

/** Campaigns with first steps left to write, oldest backlog first (at most `limit`). */
export async function backlogCampaigns(em: EntityManager, limit = 20): Promise<string[]> {
  const rows = await sql<{ campaign_id: string }>(em, 'select campaign_id from first_step_backlog order by created_at, campaign_id limit ?', [limit], { name: 'queue.backlog' });
  return rows.map((r) => r.campaign_id);
}

/**
 * Writes the next FIRST_STEPS_AT_ONCE enrollments' step 0 from the campaign's backlog, moves
 * the backlog past them (or ends it) and counts them as queued, in the caller's transaction:
 * a chunk is written whole or not at all, so a worker that dies mid-chunk leaves it to the next
 * (the dispatcher's rounds: sending/dispatcher.ts). Returns how many it wrote, or null when the
 * campaign has no backlog or its row is held: by another worker's chunk, or by a start, pause,
 * resume, enrollment or unsuppression, whose transactions a chunk must not run beside (they read
 * the backlog's range unlocked: queueFirstSteps, queueFirstStepsFor). Skipped, not waited for:
 * the loop goes on with other campaigns, and the next round comes back to it.
 *
 * Locks, in the order of every other writer: the campaign's row first (FOR NO KEY UPDATE, which
 * those transactions' FOR UPDATE and FOR SHARE exclude but not the key-share checks of rows
 * referencing the campaign), then the backlog's, the enrollments (insertFirstSteps), the
 * counters last.
 */
export async function writeBacklogChunk(em: EntityManager, campaignId: string, now: Date): Promise<number | null> {
  const [held] = await sql(em, 'select 1 from campaigns where id = ? for no key update skip locked', [campaignId]);
  if (!held) return null;
  const [b] = await sql<{ after_seq: string; through_seq: string; due_at: Date }>(
    em,
    'select after_seq, through_seq, due_at from first_step_backlog where campaign_id = ? for update skip locked',
    [campaignId],
  );
  if (!b) return null;
  // enrollments_campaign_seq_idx
  const [end] = await sql<{ seq: string | null }>(
    em,
    `select (select seq from enrollments where campaign_id = ? and seq > ?::bigint and seq <= ?::bigint order by seq offset ? limit 1) as seq`,
    [campaignId, b.after_seq, b.through_seq, FIRST_STEPS_AT_ONCE - 1],
  );
  const through = end.seq ?? b.through_seq;
  const n = await insertFirstSteps(em, campaignId, { after: b.after_seq, through, arbiter: true }, new Date(b.due_at), now);
  if (BigInt(through) >= BigInt(b.through_seq)) await sql(em, 'delete from first_step_backlog where campaign_id = ?', [campaignId]);
  else await sql(em, 'update first_step_backlog set after_seq = ? where campaign_id = ?', [through, campaignId]);
  await bumpCounters(em, campaignId, { queued: n });
  return n;
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
  // An enrollment inside the campaign's backlog (one suppressed at the start and made active
  // again since) is left to it: the backlog counts it queued already, and writes it. The
  // caller's share lock on the campaign keeps a chunk from moving the range meanwhile
  // (writeBacklogChunk). The backlog's primary key; the enrollments' for their seq.
  const rows = await sql<{ n: string }>(
    em,
    `with q as (
       insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
       select ${orderedMessageId()}, ?, ?, t.enrollment_id, t.lead_id, 0, 'queued', ?, t.email, ?, ?
         from unnest(?::text[], ?::text[], ?::text[]) as t(enrollment_id, lead_id, email)
        where not exists (select 1 from first_step_backlog b join enrollments e on e.id = t.enrollment_id
                           where b.campaign_id = ? and e.seq > b.after_seq and e.seq <= b.through_seq)
       on conflict (enrollment_id, step_index) where kind = 'campaign' do nothing
       returning 1
     )
     select count(*) as n from q`,
    [workspaceId, campaignId, now, now, now, enrollments.map((e) => e.id), enrollments.map((e) => e.leadId), enrollments.map((e) => e.email), campaignId],
  );
  return Number(rows[0].n);
}

/**
 * Follow-ups whose time has come move from `scheduled` to `queued`, counters with them, in the
 * caller's transaction. Returns how many moved.
 */
export async function promoteDue(em: EntityManager, now: Date, limit = 5000): Promise<number> {
  // outbound_scheduled_idx
  const promoted = await sql<{ campaign_id: string; n: string }>(
    em,
    `with p as (
       update outbound_messages set state = 'queued', updated_at = ?
        where id in (select id from outbound_messages where state = 'scheduled' and due_at <= ?
                      order by due_at limit ? for update skip locked)
        returning campaign_id)
     select campaign_id, count(*) as n from p group by campaign_id order by campaign_id`,
    [now, now, limit],
  );
  let n = 0;
  for (const p of promoted) {
    await bumpCounters(em, p.campaign_id, { scheduled: -Number(p.n), queued: Number(p.n) });
    n += Number(p.n);
  }
  return n;
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

export async function listEnrollments(em: EntityManager, campaignId: string, opts: { status?: string[]; replied?: boolean; bounced?: boolean; q?: string; leadId?: string; limit: number; offset: number }) {
  // enrollments_campaign_seq_idx for the page and the count; outbound_enrollment_step_key for each enrollment's messages.
  // A search (q) filters the campaign's enrollments by their lead (leads primary key), no index of its own.
  const conditions: string[] = [];
  const params: unknown[] = [campaignId];
  // One lead's row (the CLI's `campaign remove-lead` prints it): enrollments_campaign_lead_key.
  if (opts.leadId !== undefined) {
    conditions.push('and e.lead_id = ?');
    params.push(opts.leadId);
  }
  if (opts.status?.length) {
    conditions.push('and e.status = any(?::text[])');
    params.push(opts.status);
  }
  // The leads the campaign's `replied` counts, whatever their status now (an unsubscribe reply
  // leaves its lead `unsubscribed`): the counter's own definition, inbound's (replies_lead_idx).
  if (opts.replied !== undefined) conditions.push(`and ${opts.replied ? '' : 'not '}${countedReplySql('e.campaign_id', 'e.lead_id')}`);
  // The leads of the messages the campaign's `bounced` counts (messages: a lead two of whose
  // messages bounced is one row), whatever their status now (a bounce after an unsubscribe or a
  // reply leaves that status): outbound_enrollment_step_key.
  if (opts.bounced !== undefined)
    conditions.push(`and ${opts.bounced ? '' : 'not '}exists (select 1 from outbound_messages bm where bm.enrollment_id = e.id and ${bouncedMessageSql('bm')})`);
  if (opts.q) {
    // email_key is lower-cased by normalizeEmail (JavaScript), the names by PostgreSQL's
    // lower(): each compared with the term lower-cased the same way (likeSubstring).
    const like = likeSubstring(opts.q);
    conditions.push(`and exists (select 1 from leads s where s.id = e.lead_id and (s.email_key like ? escape '\\' or lower(coalesce(s.first_name, '')) like lower(?) escape '\\'
                      or lower(coalesce(s.last_name, '')) like lower(?) escape '\\' or lower(coalesce(s.company, '')) like lower(?) escape '\\'))`);
    params.push(likeSubstring(opts.q.toLowerCase()), like, like, like);
  }
  const filter = conditions.join(' ');
  const rows = await sql<EnrollmentRow>(
    em,
    `select e.id as enrollment_id, e.status, e.last_event, e.last_event_at, e.created_at,
            l.id as lead_id, l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom,
            coalesce((select max(m.step_index) from outbound_messages m where m.enrollment_id = e.id and m.kind = 'campaign' and m.state <> 'cancelled'),
                     case when fb.due_at is not null then 0 end) as current_step,
            coalesce((select min(m.due_at) from outbound_messages m
                       where m.enrollment_id = e.id and m.kind = 'campaign' and m.state in ('queued', 'scheduled', 'sending')), fb.due_at) as next_send_at,
            case when e.last_event = 'failed' then
              (select m.last_error from outbound_messages m
                where m.enrollment_id = e.id and m.kind = 'campaign' and m.state = 'failed' order by m.step_index desc limit 1)
            end as failure_reason
       from enrollments e join leads l on l.id = e.lead_id
       -- a step 0 the backlog has yet to write is queued, due when the campaign started
       left join lateral (select b.due_at from first_step_backlog b where b.campaign_id = e.campaign_id and ${pendingFirstStepSql('e', 'b')}) fb on true
      where e.campaign_id = ? ${filter}
      order by e.seq
      limit ? offset ?`,
    [...params, opts.limit, opts.offset],
  );
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from enrollments e where e.campaign_id = ? ${filter}`, params);
  return { rows, total: Number(n) };
}

/** The campaign's first enrolled lead (enrollments_campaign_seq_idx), with its personalization columns. */
export async function firstEnrolledLead(em: EntityManager, campaignId: string): Promise<({ id: string } & LeadColumns) | undefined> {
  const [first] = await sql<{ id: string } & LeadColumns>(
    em,
    `select l.id, l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom from enrollments e join leads l on l.id = e.lead_id where e.campaign_id = ? order by e.seq limit 1`,
    [campaignId],
  );
  return first;
}
