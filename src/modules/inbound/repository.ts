import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { advisoryXactLock } from '../../db/admin.ts';
import type { InboundAnalysis } from './analyze.ts';

// The owner of `inbound_messages` and `replies`. Their rows as hand-written SQL returns them, one
// type per table; readers type what they select as a Pick of these.

type Timestamp = Date | string;

export interface InboundMessageRow {
  id: string;
  workspace_id: string;
  watch_id: string | null;
  uid_validity: string | null;
  uid: string | null;
  message_id_header: string | null;
  in_reply_to: string | null;
  references_header: string | null;
  from_email: string | null;
  subject: string | null;
  received_at: Timestamp;
  raw: Buffer;
  outbound_message_id: string | null;
  kind: 'reply' | 'bounce' | 'thread_reply' | 'unmatched' | 'complaint' | 'unclassified';
  created_at: Timestamp;
}

export interface ReplyRow {
  id: string;
  workspace_id: string;
  campaign_id: string;
  lead_id: string;
  enrollment_id: string | null;
  outbound_message_id: string | null;
  inbound_message_id: string | null;
  email: string;
  classification: string;
  decided_by: string;
  confidence: number;
  thread_snippet: string;
  bounce_type: 'hard' | 'soft' | null;
  bounce_reason: string | null;
  received_at: Timestamp;
  forwarded_at: Timestamp | null;
  created_at: Timestamp;
  /** What the classifier said, once an operator changed `classification` (0031); null: never changed. */
  classifier_classification: string | null;
  reclassified_at: Timestamp | null;
  /** Who changed it last: `key:<key id>`, `dashboard:<key id>` (a signed-in session), `cli`. */
  reclassified_by: string | null;
}

/**
 * This mailbox's message was stored already (read again after a UIDVALIDITY change): the same
 * Message-ID from the same sender, or, for mail without one, the same sender, arrival time and
 * bytes. Another sender's mail reusing a Message-ID is not a copy.
 */
export async function alreadyIngested(em: EntityManager, watchId: string, m: { messageId: string | null; from: string | null; receivedAt: Date; raw: Buffer }): Promise<boolean> {
  const rows = m.messageId
    ? await sql(em, `select 1 from inbound_messages where watch_id = ? and message_id_header = ? and from_email is not distinct from ? limit 1`, [watchId, m.messageId, m.from])
    : await sql(
        em,
        `select 1 from inbound_messages
          where watch_id = ? and message_id_header is null and received_at = ? and from_email is not distinct from ? and raw = ? limit 1`,
        [watchId, m.receivedAt, m.from, m.raw],
      );
  return rows.length > 0;
}

/**
 * The same mail, matched to the same message of ours, stored already through another mailbox
 * watch: two sender accounts reading one mailbox (aliases of one user, a shared inbox) each
 * read every message there, both at once when both are in IDLE. The check holds a transaction
 * lock on the pair (mail, message of ours), so the second of two such transactions waits for
 * the first and then sees its row. inbound_message_id_idx.
 */
export async function ingestedElsewhere(em: EntityManager, watchId: string, outboundMessageId: string, m: { messageId: string; from: string | null }): Promise<boolean> {
  await advisoryXactLock(em, `inbound ${outboundMessageId} ${m.messageId}`);
  const rows = await sql(
    em,
    `select 1 from inbound_messages where message_id_header = ? and outbound_message_id = ? and from_email is not distinct from ? and watch_id is distinct from ? limit 1`,
    [m.messageId, outboundMessageId, m.from, watchId],
  );
  return rows.length > 0;
}

/** One stored inbound message (the raw mail, so a classification can be re-run). */
export async function storeInbound(
  em: EntityManager,
  m: {
    id: string;
    workspaceId: string;
    watchId: string;
    uidValidity: bigint;
    uid: number;
    analysis: InboundAnalysis;
    receivedAt: Date;
    raw: Buffer;
    outboundMessageId: string | null;
    kind: string;
    now: Date;
  },
): Promise<void> {
  const a = m.analysis;
  await sql(
    em,
    `insert into inbound_messages (id, workspace_id, watch_id, uid_validity, uid, message_id_header, in_reply_to, references_header,
                                   from_email, subject, received_at, raw, outbound_message_id, kind, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [m.id, m.workspaceId, m.watchId, String(m.uidValidity), m.uid, a.messageId, a.inReplyTo, a.references.join(' ') || null, a.from, a.subject, m.receivedAt, m.raw, m.outboundMessageId, m.kind, m.now],
  );
}

/**
 * An SDR's watch now reads another mailbox (a reconnect to another server or user): the UIDs
 * stored with the old mailbox's mail name nothing in the new one, and are forgotten. Kept, an
 * answer in the new mailbox at a UID the old one had used, under the same UIDVALIDITY (two
 * Dovecot mailboxes made in the same second share one), broke inbound_watch_uid_key: refused
 * by PostgreSQL, it was skipped and never joined its thread. Message-IDs still tell a copy.
 */
export async function forgetMailboxUids(em: EntityManager, sdrId: string): Promise<void> {
  // inbound_watch_uid_key (watch_id first); mailbox_watches_sdr_key
  await sql(em, `update inbound_messages set uid_validity = null, uid = null where watch_id = (select id from mailbox_watches where sdr_id = ? and mailbox = 'INBOX')`, [sdrId]);
}

/** An SDR mailbox's message that joined no thread is not kept. */
export async function dropInbound(em: EntityManager, id: string): Promise<void> {
  await sql(em, `delete from inbound_messages where id = ?`, [id]);
}

/** A person's answer as `replied` counts it (contract §4). */
export const HUMAN_CLASSIFICATIONS: readonly string[] = ['interested', 'not_interested', 'unsubscribe'];

/**
 * A boolean SQL expression: the lead has a reply in the campaign that counts in `replied`
 * (contract §4), classified interested, not_interested or unsubscribe and not a feedback-loop
 * complaint (listed as `unsubscribe`, decided by `arf:`; it is no reply). One definition for the
 * counter's check (hasCountedReply) and the leads list's `replied` filter (messages/queue.ts),
 * so the campaign's `replied` and the leads it links to agree. Reads replies_lead_idx.
 */
export function countedReplySql(campaignId: string, leadId: string): string {
  return `exists (select 1 from replies r where r.campaign_id = ${campaignId} and r.lead_id = ${leadId} and ${countedReplyRowSql('r')})`;
}

/**
 * A boolean SQL expression on one row of `replies` (alias `r`): a reply `replied` counts, a
 * person's answer classified interested, not_interested or unsubscribe, not a feedback-loop
 * complaint. countedReplySql's condition, and the time chart's (messages/activity.ts), so the
 * chart's `replied` counts what the counter does.
 */
export function countedReplyRowSql(r: string): string {
  return `${r}.classification in (${HUMAN_CLASSIFICATIONS.map((c) => `'${c}'`).join(', ')}) and ${r}.decided_by not like 'arf:%'`;
}

/**
 * Whether the lead already answered this campaign in a way `replied` counts (a person's answer,
 * not a report's); `exceptReplyId`: leaving that reply out (a correction of its class weighs it
 * by its class before and after: countsInReplied).
 */
export async function hasCountedReply(em: EntityManager, campaignId: string, leadId: string, exceptReplyId?: string): Promise<boolean> {
  if (exceptReplyId === undefined) {
    const [row] = await sql<{ counted: boolean }>(em, `select ${countedReplySql('?', '?')} as counted`, [campaignId, leadId]);
    return row.counted;
  }
  // replies_lead_idx
  const [row] = await sql<{ counted: boolean }>(
    em,
    `select exists (select 1 from replies r where r.campaign_id = ? and r.lead_id = ? and r.id <> ? and ${countedReplyRowSql('r')}) as counted`,
    [campaignId, leadId, exceptReplyId],
  );
  return row.counted;
}

/** Whether a reply of this class, decided by this rule, counts in `replied` (countedReplyRowSql, for one row in hand). */
export function countsInReplied(classification: string, decidedBy: string): boolean {
  return HUMAN_CLASSIFICATIONS.includes(classification) && !decidedBy.startsWith('arf:');
}

export interface NewReply {
  id: string;
  workspaceId: string;
  campaignId: string;
  leadId: string;
  enrollmentId: string;
  outboundMessageId: string;
  inboundMessageId: string;
  email: string;
  classification: string;
  decidedBy: string;
  confidence: number | null;
  snippet: string;
  bounceType: string | null;
  bounceReason: string | null;
  receivedAt: Date;
  now: Date;
}

export async function insertReply(em: EntityManager, r: NewReply): Promise<void> {
  await sql(
    em,
    `insert into replies (id, workspace_id, campaign_id, lead_id, enrollment_id, outbound_message_id, inbound_message_id, email,
                          classification, decided_by, confidence, thread_snippet, bounce_type, bounce_reason, received_at, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [r.id, r.workspaceId, r.campaignId, r.leadId, r.enrollmentId, r.outboundMessageId, r.inboundMessageId, r.email, r.classification, r.decidedBy, r.confidence, r.snippet, r.bounceType, r.bounceReason, r.receivedAt, r.now],
  );
}

/** A reply as GET /v1/replies shows it (and PATCH /v1/replies/:replyId answers). */
export type ReplyListRow = Pick<
  ReplyRow,
  | 'id'
  | 'email'
  | 'campaign_id'
  | 'classification'
  | 'decided_by'
  | 'received_at'
  | 'thread_snippet'
  | 'forwarded_at'
  | 'classifier_classification'
  | 'reclassified_at'
  | 'reclassified_by'
>;

const REPLY_LIST_COLUMNS = `r.id, r.email, r.campaign_id, r.classification, r.decided_by, r.received_at, r.thread_snippet, r.forwarded_at,
            r.classifier_classification, r.reclassified_at, r.reclassified_by`;

export type ReplyQuery = { campaignId?: string; classification?: string[]; since?: Date; page: number; pageSize: number };

export async function listReplies(em: EntityManager, workspaceId: string, q: ReplyQuery) {
  const where = ['r.workspace_id = ?'];
  const params: unknown[] = [workspaceId];
  if (q.campaignId) {
    where.push('r.campaign_id = ?');
    params.push(q.campaignId);
  }
  if (q.classification?.length) {
    where.push('r.classification = any(?::text[])');
    params.push(q.classification);
  }
  if (q.since) {
    where.push('r.received_at >= ?');
    params.push(q.since);
  }
  // replies_workspace_received_idx / replies_campaign_received_idx
  const rows = await sql<ReplyListRow>(
    em,
    `select ${REPLY_LIST_COLUMNS} from replies r
      where ${where.join(' and ')} order by r.received_at desc, r.id desc limit ? offset ?`,
    [...params, q.pageSize, (q.page - 1) * q.pageSize],
  );
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from replies r where ${where.join(' and ')}`, params);
  return { rows, total: Number(n) };
}

/** A reply with what handing it off needs: its stored mail (null: none) and the account that received it. */
export type ReplyForHandoff = Pick<
  ReplyRow,
  'id' | 'workspace_id' | 'campaign_id' | 'lead_id' | 'email' | 'classification' | 'decided_by' | 'thread_snippet' | 'received_at' | 'forwarded_at'
> & {
  raw: InboundMessageRow['raw'] | null;
  message_id_header: InboundMessageRow['message_id_header'];
  inbound_subject: InboundMessageRow['subject'];
  sender_account_id: string | null;
};

export async function replyForHandoff(em: EntityManager, workspaceId: string, replyId: string): Promise<ReplyForHandoff | undefined> {
  const [reply] = await sql<ReplyForHandoff>(
    em,
    `select r.id, r.workspace_id, r.campaign_id, r.lead_id, r.email, r.classification, r.decided_by, r.thread_snippet, r.received_at, r.forwarded_at,
            i.raw, i.message_id_header, i.subject as inbound_subject,
            coalesce(w.sender_account_id, o.sender_account_id) as sender_account_id
       from replies r
       left join inbound_messages i on i.id = r.inbound_message_id
       left join mailbox_watches w on w.id = i.watch_id
       left join outbound_messages o on o.id = r.outbound_message_id
      where r.id = ? and r.workspace_id = ?`,
    [replyId, workspaceId],
  );
  return reply;
}

export async function markForwarded(em: EntityManager, replyId: string, now: Date): Promise<void> {
  await sql(em, `update replies set forwarded_at = ? where id = ?`, [now, replyId]);
}


/** A reply to correct, locked (see reclassify.ts for why not `for update`); undefined: none of the workspace's. */
export type ReplyToReclassify = ReplyListRow & Pick<ReplyRow, 'lead_id' | 'enrollment_id' | 'workspace_id'>;

export async function lockReplyForReclassification(em: EntityManager, workspaceId: string, replyId: string): Promise<ReplyToReclassify | undefined> {
  // replies primary key; the workspace in the condition: another workspace's reply is none.
  const [row] = await sql<ReplyToReclassify>(
    em,
    `select ${REPLY_LIST_COLUMNS}, r.lead_id, r.enrollment_id, r.workspace_id from replies r where r.id = ? and r.workspace_id = ? for no key update`,
    [replyId, workspaceId],
  );
  return row;
}

/**
 * An operator's classification of a reply (0031): the classifier's own decision is kept in
 * `classifier_classification` the first time (decided_by and confidence stay the classifier's).
 */
export async function setClassification(em: EntityManager, workspaceId: string, replyId: string, classification: string, by: string, now: Date): Promise<ReplyListRow> {
  const [row] = await sql<ReplyListRow>(
    em,
    `update replies r set classifier_classification = coalesce(r.classifier_classification, r.classification),
                          classification = ?, reclassified_at = ?, reclassified_by = ?
      where r.id = ? and r.workspace_id = ? returning ${REPLY_LIST_COLUMNS}`,
    [classification, now, by, replyId, workspaceId],
  );
  return row;
}

/** The workspace a reply belongs to (the CLI names a reply by its id alone), or undefined. */
export async function workspaceOfReply(em: EntityManager, replyId: string): Promise<string | undefined> {
  const [row] = await sql<Pick<ReplyRow, 'workspace_id'>>(em, `select workspace_id from replies where id = ?`, [replyId]);
  return row?.workspace_id;
}
