// The knowledge base: short entries (pricing, security, case studies, scheduling rules) the
// draft pipeline may quote and link to. Managed by the operator with `mailgate kb`; retrieved
// for a thread by PostgreSQL full-text search, with trigram similarity as the fallback for
// words full-text search cannot match (typos, inflections, other languages).
import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteEntry, entriesOf, entryTexts, fullTextHits, insertEntry, trigramHits, type KbRow } from './kb-repository.ts';
import { newId } from '../../adapters/ids.ts';
import { ApiError } from '../../shared/errors.ts';
import { toIso } from '../../shared/time.ts';
import type { Deps } from '../../deps.ts';
import { domainOf, findLinks, linkProblems } from './links.ts';

export const KB_TITLE_MAX = 200;
export const KB_BODY_MAX = 20_000;

export interface KbEntry {
  id: string;
  workspaceId: string;
  title: string;
  body: string;
  createdAt: string;
}

export interface KbHit {
  id: string;
  title: string;
  body: string;
  /** ts_rank_cd for a full-text hit, trigram word similarity for a fallback hit. */
  score: number;
  matchedBy: 'fulltext' | 'trigram';
}


function view(r: KbRow): KbEntry {
  return { id: r.id, workspaceId: r.workspace_id, title: r.title, body: r.body, createdAt: toIso(r.created_at) };
}

/**
 * Links in an entry that the pre-send guardrails would block in a draft quoting it (http:,
 * shorteners, IP or punycode hosts), each with its reasons: `mailgate kb add` warns about them.
 */
export function blockedLinks(text: string): { url: string; problems: string[] }[] {
  return findLinks(text).flatMap((l) => {
    const problems = linkProblems(l, l.host ? [domainOf(l.host)] : []).filter((p) => p !== 'unknown_domain');
    return problems.length ? [{ url: l.url, problems }] : [];
  });
}

/** Letters and digits only, at least 3 characters: safe as tsquery lexemes, meaningful as search terms. */
export function searchTerms(text: string, max = 24): string[] {
  const seen = new Set<string>();
  for (const m of text.toLowerCase().normalize('NFKC').matchAll(/[\p{L}\p{N}]{3,}/gu)) {
    if (STOP.has(m[0])) continue;
    seen.add(m[0]);
    if (seen.size >= max) break;
  }
  return [...seen];
}

// Words that match everything and rank nothing (English plus the other languages the desk writes).
const STOP = new Set(
  (
    'the and for you your are was were this that with have has had not but can could would should will our out about from they them ' +
    'what when where which who how why all any some just also very more most than then there their its into over only other such ' +
    'thanks thank hi hello dear best regards please let know get got one two yes sure okay does did doing been being here each ' +
    'que para com uma por los las una del con por el la le les des une est pas pour avec sur und der die das ist nicht mit ein eine'
  ).split(' '),
);

export class KbService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async add(workspaceId: string, title: string, body: string): Promise<KbEntry> {
    const t = title.trim();
    const b = body.replace(/\r\n?/g, '\n').trim();
    if (!t) throw ApiError.invalid('title: must not be empty');
    if (t.length > KB_TITLE_MAX) throw ApiError.invalid(`title: at most ${KB_TITLE_MAX} characters (got ${t.length})`);
    if (!b) throw ApiError.invalid('text: must not be empty');
    if (b.length > KB_BODY_MAX) throw ApiError.invalid(`text: at most ${KB_BODY_MAX} characters (got ${b.length})`);
    const row = await insertEntry(this.em, newId('kb'), workspaceId, t, b, this.deps.clock.now());
    return view(row);
  }

  async list(workspaceId: string): Promise<KbEntry[]> {
    const rows = await entriesOf(this.em, workspaceId);
    return rows.map(view);
  }

  async remove(id: string): Promise<{ id: string; removed: true }> {
    if (!(await deleteEntry(this.em, id))) throw ApiError.notFound('kb_entry', `knowledge-base entry ${id} not found`);
    return { id, removed: true };
  }

  /** Every entry's text, for the guardrails' allow-list of links and addresses. */
  async allText(workspaceId: string): Promise<string[]> {
    const rows = await entryTexts(this.em, workspaceId);
    return rows.map((r) => `${r.title}\n${r.body}`);
  }

  /**
   * The `limit` entries most relevant to `text`: full-text matches of any of its terms ranked by
   * cover density; when fewer than `limit` match, trigram word similarity of single terms fills up.
   */
  async search(workspaceId: string, text: string, limit = 4): Promise<KbHit[]> {
    const terms = searchTerms(text);
    if (terms.length === 0) return [];
    const fts = await fullTextHits(this.em, workspaceId, terms, limit);
    const hits: KbHit[] = fts.map((r) => ({ id: r.id, title: r.title, body: r.body, score: Number(r.score), matchedBy: 'fulltext' }));
    if (hits.length < limit) {
      const rows = await trigramHits(this.em, workspaceId, terms.filter((t) => t.length >= 4), hits.map((h) => h.id), limit - hits.length);
      for (const r of rows) hits.push({ id: r.id, title: r.title, body: r.body, score: Number(r.score), matchedBy: 'trigram' });
    }
    return hits;
  }
}
