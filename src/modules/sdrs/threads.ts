// Prospect threads as the SDR desk sees them: the inbox, one thread with its messages, status
// changes through the state machine, snoozing. Every query is scoped to (workspace, SDR): a
// thread of another SDR or workspace answers 404 thread_not_found, exactly as a missing one.
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { ApiError } from '../../shared/errors.ts';
import { isoOrNull, toDate } from '../../shared/time.ts';
import type { Deps } from '../../services.ts';
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

const THREAD_COLUMNS = 'id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, snoozed_until';

const ORDER: Record<InboxQuery['orderBy'], string> = {
  priority: 'priority_score desc, id asc',
  lastMessage: 'last_message_at desc, id asc',
  created: 'created_at desc, id asc',
};

export function threadView(r: ThreadRow) {
  return {
    id: r.id,
    contactEmail: r.contact_email,
    contactName: r.contact_name,
    subject: r.subject,
    status: r.status,
    category: r.category,
    priorityScore: Number(r.priority_score),
    lastMessageAt: toDate(r.last_message_at).toISOString(),
    createdAt: toDate(r.created_at).toISOString(),
    snoozedUntil: isoOrNull(r.snoozed_until),
  };
}

/** Escapes LIKE wildcards so the search is a plain substring match. */
function likeLiteral(s: string): string {
  return s.replace(/[\\%_]/g, (c) => '\\' + c);
}

export class ThreadService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async inbox(scope: ThreadScope, q: InboxQuery) {
    const where: string[] = ['workspace_id = ?', 'sdr_id = ?'];
    const params: unknown[] = [scope.workspaceId, scope.sdrId];
    if (q.status && q.status.length > 0) {
      where.push('status = any(?::text[])');
      params.push(q.status);
    }
    if (q.category) {
      where.push('category = ?');
      params.push(q.category);
    }
    if (q.search !== undefined && q.search !== '') {
      // The expression of prospect_threads_search_idx (trigram), so LIKE can use the index.
      where.push(`lower(contact_email || ' ' || contact_name || ' ' || subject) like ? escape '\\'`);
      params.push('%' + likeLiteral(q.search.toLowerCase()) + '%');
    }
    if (q.snoozed !== undefined) {
      where.push(q.snoozed ? 'snoozed_until > ?' : '(snoozed_until is null or snoozed_until <= ?)');
      params.push(this.deps.clock.now());
    }
    const cond = where.join(' and ');
    const [{ n }] = await sql<{ n: number }>(this.em, `select count(*)::int as n from prospect_threads where ${cond}`, params);
    const rows = await sql<ThreadRow>(this.em, `select ${THREAD_COLUMNS} from prospect_threads where ${cond} order by ${ORDER[q.orderBy]} limit ? offset ?`, [
      ...params,
      q.limit,
      q.offset,
    ]);
    return { threads: rows.map(threadView), total: n, hasMore: q.offset + rows.length < n };
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

  /** The thread with its messages (oldest first), its handoff snapshot (latest) and drafts. */
  async get(scope: ThreadScope, id: string) {
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
        at: toDate(m.at).toISOString(),
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
            createdAt: toDate(handoff.created_at).toISOString(),
          }
        : null,
      drafts: drafts.map((d) => ({
        id: d.id,
        state: d.state,
        subject: d.subject,
        bodyText: d.body_text,
        bodyHtml: d.body_html,
        createdAt: toDate(d.created_at).toISOString(),
        updatedAt: toDate(d.updated_at).toISOString(),
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
