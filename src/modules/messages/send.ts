import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { PreparedStatements } from '../../db/statements.ts';

// Reads at the moment of sending: what a claimed message needs to be rendered, the guard
// before the end of its data, and its lease renewal.

/** The columns that place an outbound message in its campaign, enrollment and sequence. */
export interface OutboundRef {
  id: string;
  workspace_id: string;
  campaign_id: string;
  enrollment_id: string;
  lead_id: string;
  step_index: number;
  to_email: string;
}

/** A lead's personalization columns as hand-written SQL returns them (the one declaration of them). */
export interface LeadColumns {
  email: string;
  first_name: string | null;
  last_name: string | null;
  company: string | null;
  job_title: string | null;
  custom: Record<string, unknown>;
}

/** A claimed message with all it needs to be rendered and sent (loadForSending). */
export interface SendingRow extends OutboundRef, LeadColumns {
  sender_account_id: string;
  track_opens: boolean;
  step_subject: string | null;
  step_body: string | null;
  from_email: string;
  from_name: string;
  smtp_url_enc: string;
  previous: Array<{ mid: string; subject: string }>;
}

/** A message's earlier steps, sent, as `[{mid, subject}]` in step order (LOAD_SQL says how it is read). */
const PREVIOUS_SQL = `coalesce((select json_agg(json_build_object('mid', p.message_id_header, 'subject', p.subject) order by p.step_index)
                      from (select * from outbound_messages p
                             where p.enrollment_id = m.enrollment_id and p.kind = 'campaign' and p.step_index < m.step_index
                            offset 0) p
                     where p.message_id_header is not null and p.sent_at is not null), '[]'::json)`;

/**
 * Everything needed to render and send the claimed messages, in one statement (primary-key
 * lookups: `stmts` plans with index paths only, see PreparedStatements).
 *
 * A message's earlier steps (for In-Reply-To and References) are looked up by enrollment and
 * step (outbound_enrollment_step_key) and only then tested for a Message-ID and a sent_at
 * (`offset 0` keeps those tests out of the lookup). With the tests inside it, the generic plan
 * could read instead a whole partial index whose predicate they imply (outbound_message_id_key,
 * every message ever sent, or an index `where sent_at is not null`) whenever statistics taken
 * while few messages had been sent made it look small: in bench:send with a day's earlier volume
 * that was 80 ms per claim of 50, 1.6 of PostgreSQL's 2.0 ms per message (docs/benchmarks.md,
 * issue 20, session 19). test/sending/plans.test.ts checks the plan.
 */
export const LOAD_SQL = `select m.id, m.workspace_id, m.campaign_id, m.enrollment_id, m.lead_id, m.step_index, m.to_email, m.sender_account_id,
          c.track_opens, s.subject as step_subject, s.body_html as step_body,
          l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom,
          a.email as from_email, a.name as from_name, a.smtp_url_enc,
          ${PREVIOUS_SQL} as previous
     from outbound_messages m
     join campaigns c on c.id = m.campaign_id
     join leads l on l.id = m.lead_id
     join sender_accounts a on a.id = m.sender_account_id
     left join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index
    where m.id = any(?::text[])`;

/** What a message's subject and threading headers are made of (sending/compose.ts headersOf). */
export type HeadersRow = Pick<SendingRow, 'id' | 'step_subject' | 'previous' | keyof LeadColumns>;

/** LOAD_SQL's part for one message's headers, whatever its state and account (none, queued). */
export async function loadForHeaders(em: EntityManager, id: string): Promise<HeadersRow | undefined> {
  const [row] = await sql<HeadersRow>(
    em,
    `select m.id, s.subject as step_subject, l.email, l.first_name, l.last_name, l.company, l.job_title, l.custom,
            ${PREVIOUS_SQL} as previous
       from outbound_messages m
       join leads l on l.id = m.lead_id
       left join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index
      where m.id = ?`,
    [id],
  );
  return row;
}

/** LOAD_SQL for the claimed messages' ids. */
export async function loadForSending(stmts: PreparedStatements, ids: string[]): Promise<SendingRow[]> {
  return stmts.run<SendingRow>('sending.load', LOAD_SQL, [ids]);
}

/**
 * The guard at the moment of sending, as a condition on `outbound_messages m` with one
 * placeholder (the worker's id): the message is still ours, its campaign is running, its
 * enrollment active, its address not suppressed. Asked while the message's envelope and data
 * cross the wire and answered before the end of its data (sending/dispatcher.ts), by the
 * outcome writer's next statement (messages/transitions.ts markSent); read-only.
 *
 * The owner is compared with `is not distinct from` (the same answer for a worker id, which is
 * never null), which no index can serve: the message is found by its primary key. With `=` the
 * generic plan scanned outbound_claimed_by_idx, every message this worker claimed and the dead
 * entries of those it sent since the last vacuum, 0.1 -> 0.7 ms per guard (issue 20). The
 * statements that find a claimed message by id and owner (messages/transitions.ts) do the same.
 * The campaign's and enrollment's status are compared from a lookup by id for the same reason:
 * `exists (... where e.id = ... and e.status = 'active')` may be planned as a scan of the partial
 * index of active enrollments (messages/transitions.ts markSent says more).
 */
export const GUARD_PASSES = `m.state = 'sending' and m.claimed_by is not distinct from ?
        and (select c.status from campaigns c where c.id = m.campaign_id) = 'running'
        and (select e.status from enrollments e where e.id = m.enrollment_id) = 'active'
        and (select a.status from sender_accounts a where a.id = m.sender_account_id) = 'active'
        and not exists (select 1 from suppressions s where s.workspace_id = m.workspace_id and s.email_key = lower(m.to_email))`;

/** Extends the lease of the messages this worker still holds (claimed, not yet recorded). */
export async function renewLeases(stmts: PreparedStatements, ids: string[], workerId: string, leaseUntil: Date): Promise<number> {
  // outbound_messages primary key
  const rows = await stmts.run(
    'sending.renew',
    `update outbound_messages set lease_until = ? where id = any(?::text[]) and state = 'sending' and claimed_by is not distinct from ? returning id`,
    [leaseUntil, ids, workerId],
  );
  return rows.length;
}

export interface GuardState {
  state: string;
  claimed_by: string | null;
  campaign_status: string;
  enrollment_status: string;
  suppressed: boolean;
}

export async function guardState(em: EntityManager, id: string): Promise<GuardState | undefined> {
  const [row] = await sql<GuardState>(
    em,
    `select m.state, m.claimed_by, c.status as campaign_status, e.status as enrollment_status,
            exists (select 1 from suppressions s where s.workspace_id = m.workspace_id and s.email_key = lower(m.to_email)) as suppressed
       from outbound_messages m join campaigns c on c.id = m.campaign_id join enrollments e on e.id = m.enrollment_id
      where m.id = ?`,
    [id],
  );
  return row;
}
