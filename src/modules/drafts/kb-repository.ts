import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';

// The knowledge base (kb_entries, with its generated tsvector and trigram index): the one place
// that reads and writes it.

export interface KbRow {
  id: string;
  workspace_id: string;
  title: string;
  body: string;
  created_at: string | Date;
}

export async function insertEntry(em: EntityManager, id: string, workspaceId: string, title: string, body: string, now: Date): Promise<KbRow> {
  const [row] = await sql<KbRow>(
    em,
    `insert into kb_entries (id, workspace_id, title, body, created_at) values (?, ?, ?, ?, ?) returning id, workspace_id, title, body, created_at`,
    [id, workspaceId, title, body, now],
  );
  return row;
}

export async function entriesOf(em: EntityManager, workspaceId: string): Promise<KbRow[]> {
  return sql<KbRow>(em, `select id, workspace_id, title, body, created_at from kb_entries where workspace_id = ? order by created_at, id`, [workspaceId]);
}

export async function deleteEntry(em: EntityManager, id: string): Promise<boolean> {
  const rows = await sql<Pick<KbRow, 'id'>>(em, `delete from kb_entries where id = ? returning id`, [id]);
  return rows.length > 0;
}

export async function entryTexts(em: EntityManager, workspaceId: string) {
  return sql<Pick<KbRow, 'title' | 'body'>>(em, `select title, body from kb_entries where workspace_id = ?`, [workspaceId]);
}

/** Full-text matches of any of the terms, ranked by cover density. */
export async function fullTextHits(em: EntityManager, workspaceId: string, terms: string[], limit: number) {
  return sql<Pick<KbRow, 'id' | 'title' | 'body'> & { score: number }>(
    em,
    `select id, title, body, ts_rank_cd(tsv, q) as score
       from kb_entries, to_tsquery('simple', ?) q
      where workspace_id = ? and tsv @@ q
      order by score desc, id
      limit ?`,
    [terms.join(' | '), workspaceId, limit],
  );
}

/** Entries similar to single terms, not among `exclude`: the sum of their terms' word similarities. */
export async function trigramHits(em: EntityManager, workspaceId: string, terms: string[], exclude: string[], limit: number) {
  // Per term: `term <% text` (word similarity >= pg_trgm.word_similarity_threshold, 0.6 by
  // default) can use kb_entries_trgm_idx; an entry scores the sum of its terms' similarities.
  return sql<Pick<KbRow, 'id' | 'title' | 'body'> & { score: number }>(
    em,
    `select k.id, k.title, k.body, sum(word_similarity(t.term, k.title || ' ' || k.body)) as score
       from kb_entries k
       join unnest(?::text[]) as t(term) on t.term <% (k.title || ' ' || k.body)
      where k.workspace_id = ? and not (k.id = any(?::text[]))
      group by k.id
      order by score desc, k.id
      limit ?`,
    [terms, workspaceId, exclude, limit],
  );
}
