import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import type { ThreadStatus } from './threads-state.ts';
import { likeSubstring } from '../../shared/text.ts';
import type { ThreadCategory } from './priority.ts';
import type { HandoffRow, ProspectThreadRow, ThreadMessageRow } from './rows.ts';
import { MATCH_CLOCK_SLACK_MS } from '../messages/lookups.ts';

// Prospect threads: prospect_threads, thread_messages and handoffs (prospect_thread_counts is
// kept by triggers, migration 0003): the inbox's statement, one thread's reads, status, snooze
// and priority writes, the desk's sends and answers, handoffs. Every write to these tables is
// here.

/** Whose threads: every query is scoped to (workspace, SDR). */
export interface ThreadScope {
  workspaceId: string;
  sdrId: string;
}

export interface InboxQuery {
  status?: ThreadStatus[];
  category?: ThreadCategory;
  search?: string;
  snoozed?: boolean;
  limit: number;
  offset: number;
  orderBy: 'priority' | 'lastMessage' | 'created';
}

/** Statuses a prospect's answer or an SDR's send moves (closed ones stay as they are). */
export const OPEN = ['new', 'awaiting_reply', 'needs_followup', 'replied'];

/** What a send in the thread needs of it. */
export type ThreadForSend = Pick<ProspectThreadRow, 'id' | 'workspace_id' | 'campaign_id' | 'lead_id' | 'contact_email' | 'subject' | 'status'>;

/** The SDR's own thread in the workspace, or undefined. */
export async function threadOfSdr(em: EntityManager, sdrId: string, workspaceId: string, threadId: string): Promise<ThreadForSend | undefined> {
  const [thread] = await sql<ThreadForSend>(
    em,
    `select id, workspace_id, campaign_id, lead_id, contact_email, subject, status from prospect_threads where id = ? and sdr_id = ? and workspace_id = ?`,
    [threadId, sdrId, workspaceId],
  );
  return thread;
}

/**
 * Locks the SDR's own thread in the workspace for a send from the desk, after the thread's open
 * drafts (a send's lock order: drafts, then the thread). False when the thread is not (or no
 * longer) the SDR's: an admin moved it to another SDR, so nothing may go out from this SDR's
 * mailbox in it.
 *
 * `for key share`, held through the SMTP transaction: the one lock it must keep out is a
 * reassignment's (lockThreadsOfSdr, `for update`), which waits for the send; a send that comes
 * after the move's lock waits for its commit and then finds the thread moved. The thread's other
 * writers (an answer the mailbox watcher adds, a status or snooze change, the priority job) take
 * no more than `for no key update`, and go on while the SMTP server answers. With `for update`
 * (until 2026-11-30) each of them waited for the server, holding a pooled connection: the
 * watcher's round stalled on a thread being sent.
 */
export async function lockThreadOfSdr(em: EntityManager, sdrId: string, workspaceId: string, threadId: string): Promise<boolean> {
  const rows = await sql<{ id: string }>(em, `select id from prospect_threads where id = ? and sdr_id = ? and workspace_id = ? for key share`, [threadId, sdrId, workspaceId]);
  return rows.length > 0;
}

/** The SDR's threads among `ids` (any status), or the SDR's open threads when `ids` is null; not locked. */
export async function threadsOfSdr(em: EntityManager, workspaceId: string, sdrId: string, ids: string[] | null): Promise<string[]> {
  const rows = ids
    ? await sql<{ id: string }>(em, `select id from prospect_threads where id = any(?::text[]) and workspace_id = ? and sdr_id = ? order by id`, [ids, workspaceId, sdrId])
    : await sql<{ id: string }>(em, `select id from prospect_threads where workspace_id = ? and sdr_id = ? and status = any(?::text[]) order by id`, [workspaceId, sdrId, OPEN]);
  return rows.map((r) => r.id);
}

/**
 * Locks the threads among `ids` that the SDR still holds (`for update`, in id order), as a send
 * locks its thread: a send in progress finishes first, and one that comes after finds the thread
 * moved. With `openOnly`, only those still open. Returns the locked ones with their reply.
 */
export async function lockThreadsOfSdr(em: EntityManager, workspaceId: string, sdrId: string, ids: string[], openOnly: boolean) {
  return sql<{ id: string; reply_id: string | null }>(
    em,
    `select id, reply_id from prospect_threads where id = any(?::text[]) and workspace_id = ? and sdr_id = ? ${openOnly ? 'and status = any(?::text[])' : ''}
      order by id for update`,
    openOnly ? [ids, workspaceId, sdrId, OPEN] : [ids, workspaceId, sdrId],
  );
}

/** The replies of these threads (those handed off), distinct and sorted: the order their assignment locks are taken in. */
export async function repliesOfThreads(em: EntityManager, threadIds: string[]): Promise<string[]> {
  if (threadIds.length === 0) return [];
  const rows = await sql<{ reply_id: string }>(em, `select distinct reply_id from prospect_threads where id = any(?::text[]) and reply_id is not null order by reply_id`, [threadIds]);
  return rows.map((r) => r.reply_id);
}

/** The SDR's threads of these replies (a thread of the same reply the SDR already holds). */
export async function threadsOfRepliesHeldBy(em: EntityManager, sdrId: string, replyIds: string[]) {
  if (replyIds.length === 0) return [];
  return sql<{ id: string; reply_id: string }>(em, `select id, reply_id from prospect_threads where sdr_id = ? and reply_id = any(?::text[]) order by id`, [sdrId, replyIds]);
}

/**
 * The threads (locked by lockThreadsOfSdr) move to another SDR, and the move is recorded per
 * thread. Status, snooze, category, priority and messages stay; the handoffs keep the SDR the
 * reply was handed to. (Their follow-up tasks: moveTasksOfThreads.)
 */
export async function moveThreads(
  em: EntityManager,
  m: { workspaceId: string; fromSdrId: string; toSdrId: string; threadIds: string[]; discardedByThread: Map<string, number> },
  now: Date,
): Promise<void> {
  await sql(em, `update prospect_threads set sdr_id = ?, updated_at = ? where id = any(?::text[])`, [m.toSdrId, now, m.threadIds]);
  const ids = m.threadIds.map(() => newId('rsg'));
  await sql(
    em,
    `insert into thread_reassignments (id, workspace_id, thread_id, from_sdr_id, to_sdr_id, drafts_discarded, created_at)
     select x.id, ?, x.thread_id, ?, ?, x.discarded, ? from unnest(?::text[], ?::text[], ?::int[]) as x(id, thread_id, discarded)`,
    [m.workspaceId, m.fromSdrId, m.toSdrId, now, ids, m.threadIds, m.threadIds.map((t) => m.discardedByThread.get(t) ?? 0)],
  );
}

/**
 * A reply's References in the thread, oldest first (RFC 5322 3.6.4): the chain the handed-off
 * answer of the prospect carried (their References, else their In-Reply-To: the campaign's
 * messages they answered), then the thread's own Message-IDs. The thread's alone left the
 * campaign's messages out of every send from the desk. Automatic answers (an out-of-office, a
 * ticket system's acknowledgement) are left out: the last ID, the reply's In-Reply-To, is the
 * last message a person wrote, not an auto-reply that came after the prospect's answer.
 */
export async function threadReferences(em: EntityManager, threadId: string): Promise<string[]> {
  // prospect_threads, replies and inbound_messages by primary key.
  const [start] = await sql<{ references_header: string | null; in_reply_to: string | null }>(
    em,
    `select i.references_header, i.in_reply_to from prospect_threads t
       join replies r on r.id = t.reply_id
       join inbound_messages i on i.id = r.inbound_message_id
      where t.id = ?`,
    [threadId],
  );
  const history = await sql<Pick<ThreadMessageRow, 'message_id_header'>>(
    em,
    `select message_id_header from thread_messages where thread_id = ? and message_id_header is not null and not automatic order by at, created_at`,
    [threadId],
  );
  const own = history.map((h) => h.message_id_header!);
  const before = start?.references_header ? start.references_header.split(/\s+/).filter(Boolean) : [];
  if (start?.in_reply_to) before.push(start.in_reply_to);
  // The thread's own IDs keep their places at the end: the last is the reply's In-Reply-To.
  return [...new Set(before.filter((id) => !own.includes(id))), ...own];
}

/** A send of the desk recorded in the thread under this Message-ID (mail that is a copy of it), with the thread's status. */
export async function recordedSend(em: EntityManager, threadId: string, messageIdHeader: string): Promise<{ status: string } | undefined> {
  const [done] = await sql<{ status: string }>(
    em,
    `select t.status from thread_messages m join prospect_threads t on t.id = m.thread_id
      where m.thread_id = ? and m.direction = 'outbound' and m.message_id_header = ?`,
    [threadId, messageIdHeader],
  );
  return done;
}

/**
 * An idempotent send-manual recorded in the SDR's thread (desk-mail.ts), with the thread's
 * status: a Message-ID whose local part is `<stableKey`. The local part alone names the send;
 * the domain is the SDR mailbox's at the time, and the mailbox may have moved to another address.
 */
export async function recordedSendOfKey(em: EntityManager, scope: ThreadScope, threadId: string, stableKey: string): Promise<{ status: string } | undefined> {
  const [done] = await sql<{ status: string }>(
    em,
    `select t.status from thread_messages m join prospect_threads t on t.id = m.thread_id
      where t.id = ? and t.workspace_id = ? and t.sdr_id = ? and m.direction = 'outbound' and split_part(m.message_id_header, '@', 1) = ?`,
    [threadId, scope.workspaceId, scope.sdrId, `<${stableKey}`],
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

/**
 * The SDR's thread an answer belongs to: the one whose messages it references, else the latest
 * with that contact opened before the mail arrived (with the slack of matching by sender for the
 * two clocks). Mail that came before the thread was opened answers nothing in it: read later (a
 * backlog after the mailbox was unreachable, a new UIDVALIDITY) it made the thread `replied`
 * and cancelled its follow-up before the SDR had written a word.
 */
export async function threadOfAnswer(em: EntityManager, sdrId: string, chain: string[], from: string | null, receivedAt: Date): Promise<string | undefined> {
  // The SDR's threads, and those moved away from the SDR (thread_reassignments): the prospect
  // answers the message they were sent, from the mailbox that sent it, and the answer joins the
  // thread wherever it is now (docs/sdr-desk.md, "Reassigning threads").
  const heldOrMovedAway = `(t.sdr_id = ? or exists (select 1 from thread_reassignments r where r.from_sdr_id = ? and r.thread_id = t.id))`;
  let [thread] = chain.length
    ? await sql<{ id: string }>(
        em,
        `select t.id from thread_messages m join prospect_threads t on t.id = m.thread_id
          where ${heldOrMovedAway} and m.message_id_header = any(?::text[]) order by m.at desc limit 1`,
        [sdrId, sdrId, chain],
      )
    : [];
  if (!thread && from)
    [thread] = await sql<{ id: string }>(
      em,
      // The SDR's threads by the sdr_id indexes, the moved ones by thread_reassignments_from_idx
      // (an `or exists` here could not use an index for the SDR's own threads). The latest is
      // the one whose last message while this SDR held it is the latest: for a thread moved
      // away, its last message up to the SDR's last move of it (the mail that came after went
      // from another mailbox). Until 2026-11-30 any thread the SDR holds came first: an old
      // closed thread with the contact took the answer to the conversation just moved away, and
      // the SDR now holding that one never saw it.
      `select t.id from prospect_threads t
        where t.id in (select id from prospect_threads where sdr_id = ? union all select thread_id from thread_reassignments where from_sdr_id = ?)
          and lower(t.contact_email) = ? and t.created_at <= ?
        order by case when t.sdr_id = ? then t.last_message_at
                      else (select max(m.at) from thread_messages m
                             where m.thread_id = t.id
                               and m.at <= (select max(r.created_at) from thread_reassignments r where r.thread_id = t.id and r.from_sdr_id = ?)) end desc nulls last,
                 (t.sdr_id = ?) desc, t.last_message_at desc, t.id desc
        limit 1`,
      [sdrId, sdrId, from, new Date(receivedAt.getTime() + MATCH_CLOCK_SLACK_MS), sdrId, sdrId, sdrId],
    );
  return thread?.id;
}

/**
 * A prospect's answer joins the thread; a person's answer (not an out-of-office) makes an open
 * thread `replied` and ends its snooze: the desk hides snoozed threads, so an answer to one
 * stayed out of sight until the snooze ran out (docs/decisions.md, 2026-11-29). An
 * out-of-office is stored `automatic`: no send from the desk answers it (threadReferences).
 */
export async function addAnswer(
  em: EntityManager,
  threadId: string,
  m: { inboundMessageId: string; messageIdHeader: string | null; from: string; subject: string | null; bodyText: string; receivedAt: Date; outOfOffice: boolean },
  now: Date,
): Promise<void> {
  await sql(
    em,
    `insert into thread_messages (id, thread_id, direction, inbound_message_id, message_id_header, from_email, subject, body_text, automatic, at, created_at)
     values (?, ?, 'inbound', ?, ?, ?, ?, ?, ?, ?, ?)`,
    [newId('tmsg'), threadId, m.inboundMessageId, m.messageIdHeader, m.from, m.subject, m.bodyText, m.outOfOffice, m.receivedAt, now],
  );
  await sql(
    em,
    // An answer read late (a backlog) may have arrived before the SDR's last send: the thread's
    // last message never moves back (the inbox's order, recency, the follow-up's schedule).
    `update prospect_threads set status = case when ? and status = any(?::text[]) then 'replied' else status end,
            snoozed_until = case when ? then null else snoozed_until end,
            last_message_at = greatest(last_message_at, ?), updated_at = ? where id = ?`,
    [!m.outOfOffice, OPEN, !m.outOfOffice, m.receivedAt, now, threadId],
  );
}

/** The SDR's thread opened for this reply, locked, if it was handed to them before. */
export async function lockThreadOfReply(em: EntityManager, replyId: string, sdrId: string): Promise<{ id: string; category: ThreadCategory } | undefined> {
  const [existing] = await sql<{ id: string; category: ThreadCategory }>(em, `select id, category from prospect_threads where reply_id = ? and sdr_id = ? for update`, [replyId, sdrId]);
  return existing;
}

/**
 * A handed-off reply's classification was corrected by an operator (inbound/reclassify.ts): the
 * message each of its threads opened with (the reply itself, openThread's first message: no
 * inbound message of the SDR's mailbox, the thread's own Message-ID) is automatic exactly when the
 * reply is now an out-of-office, as openThread would have stored it. Returns the reply's threads,
 * in id order (their priority is computed again after).
 */
export async function setOpeningAnswerAutomatic(em: EntityManager, replyId: string, automatic: boolean): Promise<string[]> {
  // prospect_threads_reply_idx, then thread_messages by thread (thread_messages_thread_idx).
  const threads = await sql<Pick<ProspectThreadRow, 'id'>>(em, `select id from prospect_threads where reply_id = ? order by id`, [replyId]);
  if (!threads.length) return [];
  await sql(
    em,
    `update thread_messages m set automatic = ?
       from prospect_threads t
      where t.id = any(?::text[]) and m.thread_id = t.id and m.direction = 'inbound' and m.inbound_message_id is null
        and m.message_id_header is not distinct from t.mail_thread_id and m.automatic <> ?`,
    [automatic, threads.map((t) => t.id), automatic],
  );
  return threads.map((t) => t.id);
}

/** The SDRs holding a thread of each reply (a reply forwarded to two SDRs has two), by name. */
export async function holdersOfReplies(em: EntityManager, workspaceId: string, replyIds: string[]) {
  if (replyIds.length === 0) return [];
  // handoffs_reply_idx per reply (a handoff per forward; the first of each SDR's); sdrs by primary key.
  return sql<{ reply_id: string; sdr_id: string; name: string }>(
    em,
    `select h.reply_id, h.sdr_id, s.name from (
       select distinct on (reply_id, sdr_id) reply_id, sdr_id, created_at from handoffs
        where workspace_id = ? and reply_id = any(?::text[]) order by reply_id, sdr_id, created_at) h
       join sdrs s on s.id = h.sdr_id
      order by h.reply_id, h.created_at, h.sdr_id`,
    [workspaceId, replyIds],
  );
}

export async function recategorize(em: EntityManager, threadId: string, category: string, now: Date): Promise<void> {
  await sql(em, `update prospect_threads set category = ?, updated_at = ? where id = ?`, [category, now, threadId]);
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
  first: { from: string; to: string[]; cc: string[]; bodyText: string; bodyHtml: string | null; automatic: boolean },
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
    `insert into thread_messages (id, thread_id, direction, message_id_header, from_email, to_emails, cc_emails, subject, body_text, body_html, automatic, at, created_at)
     values (?, ?, 'inbound', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [newId('tmsg'), t.id, t.mailThreadId, first.from, first.to, first.cc, t.subject, first.bodyText, first.bodyHtml, first.automatic, t.receivedAt, now],
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

/** A thread as the inbox shows it (THREAD_COLUMNS). */
export type ThreadRow = Pick<
  ProspectThreadRow,
  'id' | 'contact_email' | 'contact_name' | 'subject' | 'status' | 'category' | 'priority_score' | 'last_message_at' | 'created_at' | 'snoozed_until'
>;

const THREAD_COLUMNS = 'id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, snoozed_until';

const ORDER_KEY: Record<InboxQuery['orderBy'], string> = {
  priority: 'priority_score',
  lastMessage: 'last_message_at',
  created: 'created_at',
};

/**
 * The one statement of the inbox: its page and its exact total, in one round trip (`?`
 * placeholders; bench/inbox.ts runs the same text through pg). One row per thread of the
 * page, each with `total`; an empty page is one row whose thread columns are null.
 *
 * - The page walks the order index, which covers every filter but search, so skipped threads
 *   cost no heap visit; only the page's threads are read from the table.
 * - With search or `snoozed=true`, the matching threads are collected once (trigram index on
 *   search_text, or the covering snoozed index) and both counted and ordered.
 * - Otherwise the total comes from prospect_thread_counts (0003_inbox_counts.ts), and for
 *   `snoozed=false` minus a count of the snoozed index.
 */
export function inboxStatement(scope: ThreadScope, q: InboxQuery, now: Date): { text: string; params: unknown[] } {
  // Every piece carries its own parameters, in the order its `?`s appear.
  type Piece = { text: string; params: unknown[] };
  const scopeWhere: Piece = { text: 'workspace_id = ? and sdr_id = ?', params: [scope.workspaceId, scope.sdrId] };
  const counterWhere: Piece[] = [scopeWhere];
  if (q.status && q.status.length > 0) counterWhere.push({ text: 'status = any(?::text[])', params: [q.status] });
  if (q.category) counterWhere.push({ text: 'category = ?', params: [q.category] });
  const threadWhere = [...counterWhere];
  const search = q.search !== undefined && q.search !== '';
  // search_text is lower(contact_email || ' ' || contact_name || ' ' || subject), trigram-indexed.
  // search_text is PostgreSQL's lower(); the term is lower-cased by the same function (likeSubstring).
  if (search) threadWhere.push({ text: `search_text like lower(?) escape '\\'`, params: [likeSubstring(q.search!)] });
  const snoozedNow: Piece = { text: 'snoozed_until > ?', params: [now] };
  if (q.snoozed === true) threadWhere.push(snoozedNow);
  if (q.snoozed === false) threadWhere.push({ text: '(snoozed_until is null or snoozed_until <= ?)', params: [now] });
  const and = (ps: Piece[]): Piece => ({ text: ps.map((p) => p.text).join(' and '), params: ps.flatMap((p) => p.params) });

  const key = ORDER_KEY[q.orderBy];
  const where = and(threadWhere);
  const page = { text: 'order by k desc, id limit ? offset ?', params: [q.limit, q.offset] };
  const select = `select c.total, ${THREAD_COLUMNS.split(', ').map((c) => 't.' + c).join(', ')}`;
  const join = 'left join (p join prospect_threads t on t.id = p.id) on true order by p.k desc, p.id';
  if (search || q.snoozed === true) {
    return {
      text:
        `with m as materialized (select id, ${key} as k from prospect_threads where ${where.text}), ` +
        `p as (select id, k from m ${page.text}) ` +
        `${select} from (select count(*)::int as total from m) c ${join}`,
      params: [...where.params, ...page.params],
    };
  }
  const counters = and(counterWhere);
  const counted = { text: `(select coalesce(sum(n), 0)::int from prospect_thread_counts where ${counters.text})`, params: counters.params };
  const snoozedCount = and([...counterWhere, snoozedNow]);
  const snoozed = { text: `(select count(*)::int from prospect_threads where ${snoozedCount.text})`, params: snoozedCount.params };
  const total: Piece = q.snoozed === undefined ? counted : { text: `${counted.text} - ${snoozed.text}`, params: [...counted.params, ...snoozed.params] };
  return {
    text: `with p as (select id, ${key} as k from prospect_threads where ${where.text} ${page.text}) ` + `${select} from (select ${total.text} as total) c ${join}`,
    params: [...where.params, ...page.params, ...total.params],
  };
}

/** The inbox page and its total (inboxStatement). */
export async function inboxPage(em: EntityManager, st: { text: string; params: unknown[] }) {
  return sql<ThreadRow & { total: number }>(em, st.text, st.params);
}

/** One thread of the SDR in the workspace (undefined: another's, or missing). */
export async function scopedThread(em: EntityManager, scope: ThreadScope, id: string): Promise<(ThreadRow & Pick<ProspectThreadRow, 'reply_id'>) | undefined> {
  const [row] = await sql<ThreadRow & Pick<ProspectThreadRow, 'reply_id'>>(
    em,
    `select ${THREAD_COLUMNS}, reply_id from prospect_threads where id = ? and workspace_id = ? and sdr_id = ?`,
    [id, scope.workspaceId, scope.sdrId],
  );
  return row;
}

export async function threadMessages(em: EntityManager, threadId: string) {
  return sql<Pick<ThreadMessageRow, 'id' | 'direction' | 'message_id_header' | 'from_email' | 'to_emails' | 'cc_emails' | 'subject' | 'body_text' | 'body_html' | 'at'>>(
    em,
    `select id, direction, message_id_header, from_email, to_emails, cc_emails, subject, body_text, body_html, at
       from thread_messages where thread_id = ? order by at asc, created_at asc, id asc`,
    [threadId],
  );
}

export async function latestHandoff(em: EntityManager, workspaceId: string, threadId: string) {
  const [handoff] = await sql<
    Pick<HandoffRow, 'id' | 'reply_id' | 'to_email' | 'cc_emails' | 'subject' | 'note' | 'category' | 'seniority' | 'employee_count' | 'snapshot' | 'created_at'>
  >(
    em,
    `select id, reply_id, to_email, cc_emails, subject, note, category, seniority, employee_count, snapshot, created_at
       from handoffs where thread_id = ? and workspace_id = ? order by created_at desc, id desc limit 1`,
    [threadId, workspaceId],
  );
  return handoff;
}

/** The thread's drafts (a read of the drafts module's table, in the thread's snapshot). */
export async function threadDrafts(em: EntityManager, workspaceId: string, threadId: string) {
  return sql<Record<string, any>>(
    em,
    `select id, state, subject, body_text, body_html, superseded_by, created_at, updated_at
       from drafts where thread_id = ? and workspace_id = ? order by created_at asc, id asc`,
    [threadId, workspaceId],
  );
}

/** What a thread's priority is computed from, as of `now`. */
export async function priorityInputs(em: EntityManager, threadId: string, now: Date) {
  const [r] = await sql<Pick<ProspectThreadRow, 'category' | 'last_message_at'> & { classification: string | null; overdue: number }>(
    em,
    `select t.category, t.last_message_at, r.classification,
            (select count(*)::int from followup_tasks f where f.thread_id = t.id and f.status = 'pending' and f.due_at <= ?) as overdue
       from prospect_threads t left join replies r on r.id = t.reply_id where t.id = ?`,
    [now, threadId],
  );
  return r;
}

export async function setPriority(em: EntityManager, threadId: string, score: number): Promise<void> {
  await sql(em, 'update prospect_threads set priority_score = ? where id = ?', [score, threadId]);
}

/** The next batch (by id, after `after`) of threads whose score can still move. */
export async function priorityBatch(em: EntityManager, now: Date, after: string, since: Date, batch: number) {
  return sql<Pick<ProspectThreadRow, 'id' | 'category' | 'last_message_at' | 'priority_score'> & { classification: string | null; overdue: number }>(
    em,
    `select t.id, t.category, t.last_message_at, r.classification, t.priority_score,
            (select count(*)::int from followup_tasks f where f.thread_id = t.id and f.status = 'pending' and f.due_at <= ?) as overdue
       from prospect_threads t left join replies r on r.id = t.reply_id
      where t.id > ?
        and (t.last_message_at >= ? or exists (select 1 from followup_tasks f where f.thread_id = t.id and f.status = 'pending'))
      order by t.id limit ?`,
    [now, after, since, batch],
  );
}

export async function setPriorities(em: EntityManager, changed: Array<{ id: string; score: number }>): Promise<void> {
  await sql(em, `update prospect_threads t set priority_score = x.score from unnest(?::text[], ?::float8[]) as x(id, score) where t.id = x.id`, [
    changed.map((c) => c.id),
    changed.map((c) => c.score),
  ]);
}

/** Compare-and-set on the status read, so a concurrent change cannot be overwritten blindly. */
export async function setStatusIf(em: EntityManager, id: string, from: ThreadStatus, to: ThreadStatus, now: Date): Promise<boolean> {
  const updated = await sql<{ id: string }>(em, 'update prospect_threads set status = ?, updated_at = ? where id = ? and status = ? returning id', [to, now, id, from]);
  return updated.length > 0;
}

export async function setSnooze(em: EntityManager, id: string, until: Date | null, now: Date): Promise<void> {
  if (until) await sql(em, 'update prospect_threads set snoozed_until = ?, updated_at = ? where id = ?', [until, now, id]);
  else await sql(em, 'update prospect_threads set snoozed_until = null, updated_at = ? where id = ?', [now, id]);
}

/**
 * The thread `t` is an active SDR's (sdrs by primary key). A deactivated SDR's follow-ups wait:
 * no new task, no thread made needs_followup; the first round after activation catches up.
 */
export const SDR_ACTIVE = 'exists (select 1 from sdrs s where s.id = t.sdr_id and s.active)';

/**
 * awaiting_reply threads with a pending follow-up due now become needs_followup. In the caller's
 * transaction, in two statements: the threads are locked first (others' locks skipped: they
 * are next round's), then the update reads the tasks in a snapshot taken after the locks. One
 * statement read the tasks in its own snapshot while it waited for a send's lock on the thread:
 * the send completed the task, and the thread still became needs_followup with no task pending
 * (the scheduler makes tasks only for awaiting_reply threads, so it stayed so). Whoever closes a
 * task locks its thread first (threadOfTaskForUpdate), so neither can slip between the two.
 */
export async function markFollowupsDue(em: EntityManager, now: Date) {
  const due = `exists (select 1 from followup_tasks f where f.thread_id = t.id and f.status = 'pending' and f.due_at <= ?)`;
  // Only an active SDR's threads: a deactivated SDR's wait, their tasks pending, until activation.
  const locked = await sql<{ id: string }>(
    em,
    `select t.id from prospect_threads t where t.status = 'awaiting_reply' and ${SDR_ACTIVE} and ${due} for update of t skip locked`,
    [now],
  );
  if (locked.length === 0) return [];
  return sql<{ id: string }>(
    em,
    `update prospect_threads t set status = 'needs_followup', updated_at = ?
      where t.id = any(?::text[]) and t.status = 'awaiting_reply' and ${due}
      returning t.id`,
    [now, locked.map((r) => r.id), now],
  );
}

/** Locks the thread of the SDR's task (before the task is closed: markFollowupsDue's order); undefined without such a task. */
export async function threadOfTaskForUpdate(em: EntityManager, scope: ThreadScope, taskId: string): Promise<string | undefined> {
  const [row] = await sql<{ id: string }>(
    em,
    `select t.id from prospect_threads t
      where t.id = (select f.thread_id from followup_tasks f where f.id = ? and f.workspace_id = ? and f.sdr_id = ?)
      for update of t`,
    [taskId, scope.workspaceId, scope.sdrId],
  );
  return row?.id;
}

/**
 * A needs_followup thread with no follow-up due any more awaits a reply again: its last pending
 * task was closed, or an out-of-office moved it past the prospect's return (markFollowupsDue's
 * rule the other way round: a thread needs a follow-up only while one is due).
 */
export async function backToAwaitingIfNothingDue(em: EntityManager, threadId: string, now: Date): Promise<void> {
  await sql(
    em,
    `update prospect_threads t set status = 'awaiting_reply', updated_at = ?
      where t.id = ? and t.status = 'needs_followup'
        and not exists (select 1 from followup_tasks f where f.thread_id = t.id and f.status = 'pending' and f.due_at <= ?)`,
    [now, threadId, now],
  );
}
