// Prospect threads as the SDR desk sees them: the inbox, one thread with its messages, status
// changes through the state machine, snoozing. Every query is scoped to (workspace, SDR): a
// thread of another SDR or workspace answers 404 thread_not_found, exactly as a missing one.
import { IsolationLevel, type EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { ApiError } from '../../shared/errors.ts';
import { isoOrNull, toDate, toIso } from '../../shared/time.ts';
import type { Deps } from '../../deps.ts';
import { allowedTransitions, canTransition, type ThreadStatus } from './threads-state.ts';
import { priorityScore, type ThreadCategory } from './priority.ts';

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

interface ThreadRow {
  id: string;
  contact_email: string;
  contact_name: string;
  subject: string;
  status: ThreadStatus;
  category: ThreadCategory;
  priority_score: number;
  last_message_at: string | Date;
  created_at: string | Date;
  snoozed_until: string | Date | null;
}

/** Recency is 20 * 0.5^(days): under 0.2 after ~6.6 days; a thread is refreshed for a day more. */
export const PRIORITY_WINDOW_DAYS = 8;
/** Scores are rounded to 0.01; smaller moves are not worth a row write. */
export const PRIORITY_EPSILON = 0.05;

const THREAD_COLUMNS = 'id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, snoozed_until';

export function threadView(r: ThreadRow) {
  return {
    id: r.id,
    contactEmail: r.contact_email,
    contactName: r.contact_name,
    subject: r.subject,
    status: r.status,
    category: r.category,
    priorityScore: Number(r.priority_score),
    lastMessageAt: toIso(r.last_message_at),
    createdAt: toIso(r.created_at),
    snoozedUntil: isoOrNull(r.snoozed_until),
  };
}

/** Escapes LIKE wildcards so the search is a plain substring match. */
function likeLiteral(s: string): string {
  return s.replace(/[\\%_]/g, (c) => '\\' + c);
}

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
  if (search) threadWhere.push({ text: `search_text like ? escape '\\'`, params: ['%' + likeLiteral(q.search!.toLowerCase()) + '%'] });
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

export class ThreadService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async inbox(scope: ThreadScope, q: InboxQuery) {
    const st = inboxStatement(scope, q, this.deps.clock.now());
    const rows = await sql<ThreadRow & { total: number }>(this.em, st.text, st.params);
    const total = rows.length > 0 ? rows[0].total : 0;
    const threads = rows.filter((r) => r.id !== null).map(threadView);
    return { threads, total, hasMore: q.offset + threads.length < total };
  }

  private async row(scope: ThreadScope, id: string): Promise<ThreadRow & { reply_id: string | null }> {
    const [row] = await sql<ThreadRow & { reply_id: string | null }>(
      this.em,
      `select ${THREAD_COLUMNS}, reply_id from prospect_threads where id = ? and workspace_id = ? and sdr_id = ?`,
      [id, scope.workspaceId, scope.sdrId],
    );
    if (!row) throw ApiError.notFound('thread', `thread ${id} not found`);
    return row;
  }

  /**
   * The thread with its messages (oldest first), its handoff snapshot (latest) and drafts, read
   * in one REPEATABLE READ snapshot: an answer committing between the reads cannot show its
   * message next to the status from before it.
   */
  async get(scope: ThreadScope, id: string) {
    return this.em.transactional((tx) => new ThreadService(this.deps, tx).read(scope, id), { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true });
  }

  private async read(scope: ThreadScope, id: string) {
    const row = await this.row(scope, id);
    const messages = await sql<Record<string, any>>(
      this.em,
      `select id, direction, message_id_header, from_email, to_emails, cc_emails, subject, body_text, body_html, at
         from thread_messages where thread_id = ? order by at asc, created_at asc, id asc`,
      [id],
    );
    const [handoff] = await sql<Record<string, any>>(
      this.em,
      `select id, reply_id, to_email, cc_emails, subject, note, category, seniority, employee_count, snapshot, created_at
         from handoffs where thread_id = ? and workspace_id = ? order by created_at desc, id desc limit 1`,
      [id, scope.workspaceId],
    );
    const drafts = await sql<Record<string, any>>(
      this.em,
      `select id, state, subject, body_text, body_html, created_at, updated_at
         from drafts where thread_id = ? and workspace_id = ? order by created_at asc, id asc`,
      [id, scope.workspaceId],
    );
    return {
      ...threadView(row),
      messages: messages.map((m) => ({
        id: m.id,
        direction: m.direction,
        messageIdHeader: m.message_id_header,
        fromEmail: m.from_email,
        toEmails: m.to_emails,
        ccEmails: m.cc_emails,
        subject: m.subject,
        bodyText: m.body_text,
        bodyHtml: m.body_html,
        at: toIso(m.at),
      })),
      handoff: handoff
        ? {
            id: handoff.id,
            replyId: handoff.reply_id,
            toEmail: handoff.to_email,
            ccEmails: handoff.cc_emails,
            subject: handoff.subject,
            note: handoff.note,
            category: handoff.category,
            seniority: handoff.seniority,
            employeeCount: handoff.employee_count,
            snapshot: handoff.snapshot,
            createdAt: toIso(handoff.created_at),
          }
        : null,
      drafts: drafts.map((d) => ({
        id: d.id,
        state: d.state,
        subject: d.subject,
        bodyText: d.body_text,
        bodyHtml: d.body_html,
        createdAt: toIso(d.created_at),
        updatedAt: toIso(d.updated_at),
      })),
    };
  }

  /**
   * Recomputes the stored priority_score of a thread from its category, the classification
   * of the reply it came from, lastMessageAt and its overdue pending follow-ups, as of now.
   */
  async recomputePriority(threadId: string): Promise<number> {
    const now = this.deps.clock.now();
    const [r] = await sql<{ category: ThreadCategory; last_message_at: string | Date; classification: string | null; overdue: number }>(
      this.em,
      `select t.category, t.last_message_at, r.classification,
              (select count(*)::int from followup_tasks f where f.thread_id = t.id and f.status = 'pending' and f.due_at <= ?) as overdue
         from prospect_threads t left join replies r on r.id = t.reply_id where t.id = ?`,
      [now, threadId],
    );
    if (!r) throw ApiError.notFound('thread', `thread ${threadId} not found`);
    const score = priorityScore({ category: r.category, classification: r.classification, lastMessageAt: toDate(r.last_message_at), overdueFollowups: r.overdue, now });
    await sql(this.em, 'update prospect_threads set priority_score = ? where id = ?', [score, threadId]);
    return score;
  }

  /**
   * The priority job: recency decays with time, so stored scores are refreshed for every thread
   * whose score can still move, that is one with a message in the last PRIORITY_WINDOW_DAYS (a
   * day past the point where recency is under 0.2) or a pending follow-up, in batches by id.
   * Only rows whose score changed by PRIORITY_EPSILON or more are written. Returns how many were.
   */
  async refreshPriorities(batch = 1000): Promise<number> {
    const now = this.deps.clock.now();
    const since = new Date(now.getTime() - PRIORITY_WINDOW_DAYS * 86_400_000);
    let after = '';
    let written = 0;
    for (;;) {
      const rows = await sql<{ id: string; category: ThreadCategory; last_message_at: string | Date; classification: string | null; overdue: number; priority_score: number }>(
        this.em,
        `select t.id, t.category, t.last_message_at, r.classification, t.priority_score,
                (select count(*)::int from followup_tasks f where f.thread_id = t.id and f.status = 'pending' and f.due_at <= ?) as overdue
           from prospect_threads t left join replies r on r.id = t.reply_id
          where t.id > ?
            and (t.last_message_at >= ? or exists (select 1 from followup_tasks f where f.thread_id = t.id and f.status = 'pending'))
          order by t.id limit ?`,
        [now, after, since, batch],
      );
      if (rows.length === 0) break;
      const changed: { id: string; score: number }[] = [];
      for (const r of rows) {
        const score = priorityScore({ category: r.category, classification: r.classification, lastMessageAt: toDate(r.last_message_at), overdueFollowups: r.overdue, now });
        if (Math.abs(score - Number(r.priority_score)) >= PRIORITY_EPSILON) changed.push({ id: r.id, score });
      }
      if (changed.length > 0) {
        await sql(this.em, `update prospect_threads t set priority_score = x.score from unnest(?::text[], ?::float8[]) as x(id, score) where t.id = x.id`, [
          changed.map((c) => c.id),
          changed.map((c) => c.score),
        ]);
        written += changed.length;
      }
      after = rows[rows.length - 1].id;
      if (rows.length < batch) break;
    }
    return written;
  }

  /** PATCH status: validated against the state machine; 400 invalid_transition lists the allowed ones. */
  async setStatus(scope: ThreadScope, id: string, to: ThreadStatus): Promise<ReturnType<typeof threadView>> {
    const row = await this.row(scope, id);
    if (!canTransition(row.status, to)) {
      throw new ApiError(400, 'invalid_transition', `a thread in status ${row.status} cannot move to ${to}`, { allowedTransitions: allowedTransitions(row.status) });
    }
    // Compare-and-set on the status read, so a concurrent change cannot be overwritten blindly.
    const updated = await sql<{ id: string }>(this.em, 'update prospect_threads set status = ?, updated_at = ? where id = ? and status = ? returning id', [
      to,
      this.deps.clock.now(),
      id,
      row.status,
    ]);
    if (updated.length === 0) return this.setStatus(scope, id, to);
    await this.recomputePriority(id);
    return threadView(await this.row(scope, id));
  }

  async snooze(scope: ThreadScope, id: string, until: Date) {
    const now = this.deps.clock.now();
    if (!(until.getTime() > now.getTime())) throw ApiError.invalid(`until: must be in the future (now is ${now.toISOString()})`, { errors: [{ field: 'until', value: until.toISOString(), message: 'must be in the future' }] });
    await this.row(scope, id);
    await sql(this.em, 'update prospect_threads set snoozed_until = ?, updated_at = ? where id = ?', [until, now, id]);
    await this.recomputePriority(id);
    return threadView(await this.row(scope, id));
  }

  async unsnooze(scope: ThreadScope, id: string) {
    await this.row(scope, id);
    await sql(this.em, 'update prospect_threads set snoozed_until = null, updated_at = ? where id = ?', [this.deps.clock.now(), id]);
    await this.recomputePriority(id);
    return threadView(await this.row(scope, id));
  }
}
