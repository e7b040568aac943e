import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { ThreadScope } from '../sdrs/thread-repository.ts';
import type { FollowupRuleRow, HandoffRow, HandoffSnapshot, ProspectThreadRow, SdrMailboxRow, SdrRow, ThreadMessageRow } from '../sdrs/rows.ts';
import type { InboundMessageRow } from '../inbound/repository.ts';

// The reads a draft's context is planned from (planner.ts): the thread, the SDR and their
// mailbox, the handoff, the thread's messages with their stored originals, the follow-up rules.
// Reads only: the tables are the SDR desk's (sdrs/thread-repository.ts, sdrs/repository.ts,
// sdrs/followup-repository.ts, inbound/repository.ts), read here in one place for the planner.

export type { HandoffSnapshot };

/** A message of the thread with the stored original of an inbound one (null: none). */
export type MessageRow = Pick<ThreadMessageRow, 'direction' | 'from_email' | 'to_emails' | 'cc_emails' | 'subject' | 'body_text' | 'body_html' | 'at'> & {
  raw: InboundMessageRow['raw'] | null;
};

export async function contextThread(em: EntityManager, scope: ThreadScope, threadId: string) {
  const [t] = await sql<Pick<ProspectThreadRow, 'id' | 'subject' | 'contact_email' | 'contact_name' | 'category' | 'status' | 'lead_id' | 'campaign_id'>>(
    em,
    `select id, subject, contact_email, contact_name, category, status, lead_id, campaign_id
       from prospect_threads where id = ? and workspace_id = ? and sdr_id = ?`,
    [threadId, scope.workspaceId, scope.sdrId],
  );
  return t;
}

export async function contextSdr(em: EntityManager, sdrId: string) {
  const [sdr] = await sql<Pick<SdrRow, 'id' | 'name' | 'email' | 'tone' | 'signature' | 'calendar_url' | 'language'>>(
    em,
    `select id, name, email, tone, signature, calendar_url, language from sdrs where id = ?`,
    [sdrId],
  );
  return sdr;
}

export async function contextMailbox(em: EntityManager, sdrId: string) {
  const [box] = await sql<Pick<SdrMailboxRow, 'email'>>(em, `select email from sdr_mailboxes where sdr_id = ?`, [sdrId]);
  return box;
}

export async function contextHandoff(em: EntityManager, threadId: string) {
  const [handoff] = await sql<Pick<HandoffRow, 'note' | 'cc_emails' | 'to_email' | 'snapshot'>>(
    em,
    `select note, cc_emails, to_email, snapshot from handoffs where thread_id = ? order by created_at desc, id desc limit 1`,
    [threadId],
  );
  return handoff;
}

export async function contextMessages(em: EntityManager, threadId: string) {
  const stored = await sql<MessageRow>(
    em,
    `select m.direction, m.from_email, m.to_emails, m.cc_emails, m.subject, m.body_text, m.body_html, i.raw, m.at
       from thread_messages m left join inbound_messages i on i.id = m.inbound_message_id
      where m.thread_id = ? order by m.at asc, m.created_at asc, m.id asc`,
    [threadId],
  );
  return stored;
}

/** The workspace's follow-up rules with how often each already acted on the thread. */
export async function rulesWithUse(em: EntityManager, workspaceId: string, threadId: string) {
  const rules = await sql<Pick<FollowupRuleRow, 'id' | 'name' | 'after_ms' | 'business_days' | 'categories' | 'max_attempts'> & { used: number }>(
    em,
    `select r.id, r.name, r.after_ms, r.business_days, r.categories, r.max_attempts,
            (select count(*)::int from followup_tasks f where f.rule_id = r.id and f.thread_id = ?) as used
       from followup_rules r where r.workspace_id = ? order by r.created_at, r.id`,
    [threadId, workspaceId],
  );
  return rules;
}
