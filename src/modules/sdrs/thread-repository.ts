import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';

// Prospect threads: prospect_threads, thread_messages and handoffs (prospect_thread_counts is
// kept by triggers, migration 0003). The SDR desk's writes to them go through here; the
// inbox's listing and search statements stay in threads.ts and followups.ts for now
// (docs/architecture.md says which).

/** Statuses a prospect's answer or an SDR's send moves (closed ones stay as they are). */
export const OPEN = ['new', 'awaiting_reply', 'needs_followup', 'replied'];

export interface ThreadForSend {
  id: string;
  workspace_id: string;
  campaign_id: string | null;
  lead_id: string | null;
  contact_email: string;
  subject: string;
  status: string;
}

/** The SDR's own thread in the workspace, or undefined. */
export async function threadOfSdr(em: EntityManager, sdrId: string, workspaceId: string, threadId: string): Promise<ThreadForSend | undefined> {
  const [thread] = await sql<ThreadForSend>(
    em,
    `select id, workspace_id, campaign_id, lead_id, contact_email, subject, status from prospect_threads where id = ? and sdr_id = ? and workspace_id = ?`,
    [threadId, sdrId, workspaceId],
  );
  return thread;
}

/** The thread's Message-IDs, oldest first (a reply's References). */
export async function threadReferences(em: EntityManager, threadId: string): Promise<string[]> {
  const history = await sql<{ message_id_header: string | null }>(
    em,
    `select message_id_header from thread_messages where thread_id = ? and message_id_header is not null order by at, created_at`,
    [threadId],
  );
  return history.map((h) => h.message_id_header!);
}

/** A send already recorded in the thread under this Message-ID (an idempotent repeat), with the thread's status. */
export async function recordedSend(em: EntityManager, threadId: string, messageIdHeader: string): Promise<{ status: string } | undefined> {
  const [done] = await sql<{ status: string }>(
    em,
    `select t.status from thread_messages m join prospect_threads t on t.id = m.thread_id
      where m.thread_id = ? and m.direction = 'outbound' and m.message_id_header = ?`,
    [threadId, messageIdHeader],
  );
  return done;
}

/** An SDR's send in the thread; the thread then awaits a reply (when open). Returns its status. */
export async function addSentMessage(
  em: EntityManager,
  threadId: string,
  m: { outboundMessageId: string | null; messageIdHeader: string; from: string; to: string[]; cc: string[]; subject: string; bodyText: string; bodyHtml: string },
  now: Date,
): Promise<{ status: string }> {
  await sql(
    em,
    `insert into thread_messages (id, thread_id, direction, outbound_message_id, message_id_header, from_email, to_emails, cc_emails, subject, body_text, body_html, at, created_at)
     values (?, ?, 'outbound', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [newId('tmsg'), threadId, m.outboundMessageId, m.messageIdHeader, m.from, m.to, m.cc, m.subject, m.bodyText, m.bodyHtml, now, now],
  );
  const [t] = await sql<{ status: string }>(
    em,
    `update prospect_threads set status = case when status = any(?::text[]) then 'awaiting_reply' else status end, last_message_at = ?, updated_at = ?
      where id = ? returning status`,
    [OPEN, now, now, threadId],
  );
  return t;
}

/** The SDR's thread an answer belongs to: the one whose messages it references, else the latest with that contact. */
export async function threadOfAnswer(em: EntityManager, sdrId: string, chain: string[], from: string | null): Promise<string | undefined> {
  let [thread] = chain.length
    ? await sql<{ id: string }>(
        em,
        `select t.id from thread_messages m join prospect_threads t on t.id = m.thread_id
          where t.sdr_id = ? and m.message_id_header = any(?::text[]) order by m.at desc limit 1`,
        [sdrId, chain],
      )
    : [];
  if (!thread && from)
    [thread] = await sql<{ id: string }>(em, `select id from prospect_threads where sdr_id = ? and lower(contact_email) = ? order by last_message_at desc limit 1`, [sdrId, from]);
  return thread?.id;
}

/** A prospect's answer joins the thread; a person's answer (not an out-of-office) makes an open thread `replied`. */
export async function addAnswer(
  em: EntityManager,
  threadId: string,
  m: { inboundMessageId: string; messageIdHeader: string | null; from: string; subject: string | null; bodyText: string; receivedAt: Date; outOfOffice: boolean },
  now: Date,
): Promise<void> {
  await sql(
    em,
    `insert into thread_messages (id, thread_id, direction, inbound_message_id, message_id_header, from_email, subject, body_text, at, created_at)
     values (?, ?, 'inbound', ?, ?, ?, ?, ?, ?, ?)`,
    [newId('tmsg'), threadId, m.inboundMessageId, m.messageIdHeader, m.from, m.subject, m.bodyText, m.receivedAt, now],
  );
  await sql(
    em,
    `update prospect_threads set status = case when ? and status = any(?::text[]) then 'replied' else status end, last_message_at = ?, updated_at = ? where id = ?`,
    [!m.outOfOffice, OPEN, m.receivedAt, now, threadId],
  );
}

/** The SDR's thread opened for this reply, locked, if it was handed to them before. */
export async function lockThreadOfReply(em: EntityManager, replyId: string, sdrId: string): Promise<string | undefined> {
  const [existing] = await sql<{ id: string }>(em, `select id from prospect_threads where reply_id = ? and sdr_id = ? for update`, [replyId, sdrId]);
  return existing?.id;
}

export async function recategorize(em: EntityManager, threadId: string, category: string, score: number, now: Date): Promise<void> {
  await sql(em, `update prospect_threads set category = ?, priority_score = ?, updated_at = ? where id = ?`, [category, score, now, threadId]);
}

/** A new thread in the SDR's inbox for a handed-off reply, with the reply as its first message. */
export async function openThread(
  em: EntityManager,
  t: {
    id: string;
    workspaceId: string;
    sdrId: string;
    replyId: string;
    leadId: string;
    campaignId: string;
    contactEmail: string;
    contactName: string;
    subject: string;
    category: string;
    score: number;
    receivedAt: Date;
    mailThreadId: string | null;
  },
  first: { from: string; to: string[]; bodyText: string; bodyHtml: string | null },
  now: Date,
): Promise<void> {
  await sql(
    em,
    `insert into prospect_threads (id, workspace_id, sdr_id, reply_id, lead_id, campaign_id, contact_email, contact_name, subject, status,
                                   category, priority_score, last_message_at, mail_thread_id, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, 'new', ?, ?, ?, ?, ?, ?)`,
    [t.id, t.workspaceId, t.sdrId, t.replyId, t.leadId, t.campaignId, t.contactEmail, t.contactName, t.subject, t.category, t.score, t.receivedAt, t.mailThreadId, now, now],
  );
  await sql(
    em,
    `insert into thread_messages (id, thread_id, direction, message_id_header, from_email, to_emails, subject, body_text, body_html, at, created_at)
     values (?, ?, 'inbound', ?, ?, ?, ?, ?, ?, ?, ?)`,
    [newId('tmsg'), t.id, t.mailThreadId, first.from, first.to, t.subject, first.bodyText, first.bodyHtml, t.receivedAt, now],
  );
}

export interface NewHandoff {
  id: string;
  workspaceId: string;
  replyId: string;
  threadId: string;
  sdrId: string;
  forwardedMessageId: string;
  to: string;
  cc: string[];
  subject: string;
  note: string | null;
  category: string;
  seniority: string | null;
  employeeCount: string | null;
  snapshot: unknown;
}

export async function recordHandoff(em: EntityManager, h: NewHandoff, now: Date): Promise<void> {
  await sql(
    em,
    `insert into handoffs (id, workspace_id, reply_id, thread_id, sdr_id, forwarded_message_id, to_email, cc_emails, subject, note, category,
                           seniority, employee_count, snapshot, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?)`,
    [h.id, h.workspaceId, h.replyId, h.threadId, h.sdrId, h.forwardedMessageId, h.to, h.cc, h.subject, h.note, h.category, h.seniority, h.employeeCount, JSON.stringify(h.snapshot), now],
  );
}
