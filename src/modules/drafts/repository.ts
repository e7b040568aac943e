import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { Style } from './offline.ts';
import type { Scores } from './judge.ts';

// Drafts and their insights (drafts, draft_insights): the one place that writes them.

export type DraftState = 'generated' | 'edited' | 'superseded' | 'sent' | 'discarded';
export type Approach = Style | 'offline_template';

/** A draft that can still be edited, sent, discarded or regenerated. */
export const OPEN_STATES: DraftState[] = ['generated', 'edited'];

export interface DraftRow {
  id: string;
  thread_id: string;
  sdr_id: string;
  workspace_id: string;
  state: DraftState;
  subject: string;
  body_text: string;
  body_html: string;
  instructions: string | null;
  model: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  latency_ms: number | null;
  sent_message_id: string | null;
  superseded_by: string | null;
  created_at: string | Date;
  updated_at: string | Date;
}

export interface InsightRow {
  draft_id: string;
  approach: Approach;
  confidence: number;
  rationale: string;
  scores: { scores?: Scores; style?: Style; [k: string]: unknown };
}

export async function draftOf(em: EntityManager, workspaceId: string, sdrId: string, draftId: string): Promise<DraftRow | undefined> {
  const [d] = await sql<DraftRow>(em, `select * from drafts where id = ? and workspace_id = ? and sdr_id = ?`, [draftId, workspaceId, sdrId]);
  return d;
}

export async function insightOf(em: EntityManager, draftId: string): Promise<InsightRow | undefined> {
  const [insight] = await sql<InsightRow>(em, `select * from draft_insights where draft_id = ?`, [draftId]);
  return insight;
}

/** Locks the draft (its send is decided under the lock). */
export async function lockDraft(em: EntityManager, draftId: string): Promise<DraftRow> {
  const [locked] = await sql<DraftRow>(em, `select * from drafts where id = ? for update`, [draftId]);
  return locked;
}

export async function insertDraft(
  em: EntityManager,
  d: {
    id: string;
    workspaceId: string;
    threadId: string;
    sdrId: string;
    subject: string;
    bodyText: string;
    bodyHtml: string;
    instructions: string | null;
    model: string | null;
    promptTokens: number | null;
    completionTokens: number | null;
    latencyMs: number | null;
  },
  i: { approach: Approach; confidence: number; rationale: string; scores: unknown },
  now: Date,
): Promise<{ row: DraftRow; insight: InsightRow }> {
  const [row] = await sql<DraftRow>(
    em,
    `insert into drafts (id, workspace_id, thread_id, sdr_id, state, subject, body_text, body_html, instructions, model, prompt_tokens, completion_tokens,
                         latency_ms, created_at, updated_at)
     values (?, ?, ?, ?, 'generated', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning *`,
    [d.id, d.workspaceId, d.threadId, d.sdrId, d.subject, d.bodyText, d.bodyHtml, d.instructions, d.model, d.promptTokens, d.completionTokens, d.latencyMs, now, now],
  );
  const [insight] = await sql<InsightRow>(
    em,
    `insert into draft_insights (draft_id, approach, confidence, rationale, scores) values (?, ?, ?, ?, ?::jsonb) returning *`,
    [d.id, i.approach, i.confidence, i.rationale, JSON.stringify(i.scores)],
  );
  return { row, insight };
}

/** Compare-and-set: the open draft becomes superseded by its successor; false when it was no longer open. */
export async function supersede(em: EntityManager, draftId: string, by: string, now: Date): Promise<boolean> {
  const moved = await sql<{ id: string }>(
    em,
    `update drafts set state = 'superseded', superseded_by = ?, updated_at = ? where id = ? and state = any(?::text[]) returning id`,
    [by, now, draftId, OPEN_STATES],
  );
  return moved.length > 0;
}

/** The open draft edited; undefined when it was no longer open. */
export async function edit(em: EntityManager, draftId: string, e: { bodyText: string; bodyHtml: string; subject: string }, now: Date): Promise<DraftRow | undefined> {
  const [row] = await sql<DraftRow>(
    em,
    `update drafts set state = 'edited', body_text = ?, body_html = ?, subject = ?, updated_at = ?
      where id = ? and state = any(?::text[]) returning *`,
    [e.bodyText, e.bodyHtml, e.subject, now, draftId, OPEN_STATES],
  );
  return row;
}

/** The open draft discarded; false when it was no longer open. */
export async function discard(em: EntityManager, draftId: string, now: Date): Promise<boolean> {
  const rows = await sql<{ id: string }>(em, `update drafts set state = 'discarded', updated_at = ? where id = ? and state = any(?::text[]) returning id`, [
    now,
    draftId,
    OPEN_STATES,
  ]);
  return rows.length > 0;
}

/**
 * Locks the thread's open drafts in id order (drafts_thread_idx): a send's first lock, so two
 * sends of sibling drafts (two variants, two tabs) go one after the other and the second finds
 * its draft superseded by the first (supersedeSiblings), instead of each holding its own draft
 * and waiting for the other's.
 */
export async function lockOpenDrafts(em: EntityManager, threadId: string): Promise<void> {
  await sql(em, `select id from drafts where thread_id = ? and state = any(?::text[]) order by id for update`, [threadId, OPEN_STATES]);
}

/** The open drafts of these threads locked in id order (a reassignment's first lock, as lockOpenDrafts is a send's). */
export async function lockOpenDraftsOf(em: EntityManager, threadIds: string[]): Promise<void> {
  if (threadIds.length === 0) return;
  await sql(em, `select id from drafts where thread_id = any(?::text[]) and state = any(?::text[]) order by id for update`, [threadIds, OPEN_STATES]);
}

/**
 * The threads moved to another SDR (sdrs/reassign.ts): their open drafts become `discarded`
 * (written in the old SDR's voice, signed with their name), and every draft of the threads
 * becomes the new SDR's. The caller locked the open ones (lockOpenDraftsOf). Returns the
 * discarded drafts.
 */
export async function discardAndMoveDrafts(em: EntityManager, threadIds: string[], toSdrId: string, now: Date) {
  const discarded = await sql<{ id: string; thread_id: string }>(
    em,
    `update drafts set state = 'discarded', updated_at = ? where thread_id = any(?::text[]) and state = any(?::text[]) returning id, thread_id`,
    [now, threadIds, OPEN_STATES],
  );
  await sql(em, `update drafts set sdr_id = ? where thread_id = any(?::text[]) and sdr_id <> ?`, [toSdrId, threadIds, toSdrId]);
  return discarded;
}

/**
 * Before a draft of the thread is stored (generate, regenerate): the thread's open drafts, then
 * the thread (`for share`), a send's lock order; false when the thread is no longer the SDR's (an
 * admin moved it while the draft was being written: it would land in another SDR's thread,
 * in this SDR's voice).
 */
export async function lockThreadForDraft(em: EntityManager, workspaceId: string, sdrId: string, threadId: string): Promise<boolean> {
  await lockOpenDrafts(em, threadId);
  const rows = await sql<{ id: string }>(em, `select id from prospect_threads where id = ? and workspace_id = ? and sdr_id = ? for share`, [threadId, workspaceId, sdrId]);
  return rows.length > 0;
}

/** The thread's other open drafts become superseded by the one just sent (locked by lockOpenDrafts). */
export async function supersedeSiblings(em: EntityManager, threadId: string, sentDraftId: string, now: Date): Promise<number> {
  const rows = await sql<{ id: string }>(
    em,
    `update drafts set state = 'superseded', superseded_by = ?, updated_at = ? where thread_id = ? and id <> ? and state = any(?::text[]) returning id`,
    [sentDraftId, now, threadId, sentDraftId, OPEN_STATES],
  );
  return rows.length;
}

/**
 * The thread's open drafts become superseded by a reply the SDR wrote by hand (send-manual):
 * `superseded_by` stays null, as no draft took their place. The caller locked them
 * (lockOpenDrafts) first, in a send's lock order.
 */
export async function supersedeByManualReply(em: EntityManager, threadId: string, now: Date): Promise<number> {
  const rows = await sql<{ id: string }>(
    em,
    `update drafts set state = 'superseded', superseded_by = null, updated_at = ? where thread_id = ? and state = any(?::text[]) returning id`,
    [now, threadId, OPEN_STATES],
  );
  return rows.length;
}

export async function markDraftSent(em: EntityManager, draftId: string, sentMessageId: string | null, mail: { bodyText: string; bodyHtml: string }, now: Date): Promise<void> {
  await sql(em, `update drafts set state = 'sent', sent_message_id = ?, body_text = ?, body_html = ?, updated_at = ? where id = ?`, [
    sentMessageId,
    mail.bodyText,
    mail.bodyHtml,
    now,
    draftId,
  ]);
}
