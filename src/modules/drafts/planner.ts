// Stage 1 of the draft pipeline: the planner. It reads the thread as a human would see it
// (hidden HTML, zero-width and bidi characters, quoted history removed), assembles everything
// the writer may use (history oldest first with length caps, the handoff, the lead, the SDR's
// profile, relevant knowledge-base entries), extracts the prospect's asks, lists the follow-up
// rules that will apply, and computes the allow-lists the writer and the guardrails check links,
// addresses and recipients against. Nothing of the prospect's text ever becomes a recipient,
// a link or an address the pipeline adds on its own.
import type { EntityManager } from '@mikro-orm/postgresql';
import { simpleParser } from 'mailparser';
import { contextHandoff, contextMailbox, contextMessages, contextSdr, contextThread, rulesWithUse, type HandoffSnapshot, type MessageRow } from './context-repository.ts';
import { campaignName, leadById } from '../campaigns/repository.ts';
import { ApiError } from '../../shared/errors.ts';
import { toIso } from '../../shared/time.ts';
import { normalizeEmail } from '../../shared/email.ts';
import type { ThreadScope } from '../sdrs/threads.ts';
import { formatDuration } from '../../shared/duration.ts';
import type { KbService, KbHit } from './kb.ts';
import { extractAsks, detectLanguage, detectObjection, languageOfTag, KIND_QUERY, type Ask, type Language, type Objection } from './asks.ts';
import { sanitizeForPrompt, sanitizeText, stripQuoted, visibleTextFromHtml } from './sanitize.ts';
import { domainOf, findEmails, findLinks } from './links.ts';

/** Length caps of what reaches the writer (characters). */
export const CAPS = { message: 2_000, history: 8_000, kbEntry: 1_200, note: 1_000, signature: 600 } as const;

export interface HistoryItem {
  direction: 'inbound' | 'outbound';
  from: string;
  at: string;
  subject: string;
  text: string;
}

export interface AppliedRule {
  ruleId: string;
  name: string;
  effect: string;
}

export interface DraftContext {
  workspaceId: string;
  threadId: string;
  thread: { subject: string; contactEmail: string; contactName: string; category: string; status: string };
  contact: { firstName: string | null; lastName: string | null; company: string | null; jobTitle: string | null; customFields: Record<string, unknown> };
  sdr: { id: string; name: string; email: string; tone: string | null; signature: string | null; calendarUrl: string | null; language: string | null };
  campaignName: string | null;
  handoffNote: string | null;
  /** Sanitized, quoted history removed, oldest first; older messages dropped first past CAPS.history. */
  history: HistoryItem[];
  /** The prospect's latest message, sanitized (what the asks come from). */
  lastProspectMessage: string;
  knowledge: KbHit[];
  asks: Ask[];
  /** An objection the prospect raised (budget, timing, a competitor), to acknowledge rather than push past. */
  objection: Objection | null;
  appliedRules: AppliedRule[];
  language: Language;
  /** Where a link or address may come from when we write a draft: the KB, the SDR profile, our own messages. */
  writerAllowed: { domains: string[]; emails: string[] };
  /** What the guardrails accept in a final body: the visible thread, the whole KB and the SDR profile. */
  sendAllowed: { domains: string[]; emails: string[] };
  /** Every address of the thread (its messages, the handoff) plus the SDR's own. */
  participants: string[];
}



/** The text a person sees in one stored thread message. */
async function visibleText(m: MessageRow): Promise<string> {
  if (m.direction === 'inbound') {
    // Prefer the stored original: an HTML part is what the prospect's mail client shows, and a
    // text/plain alternative can carry text the HTML hides.
    if (m.raw) {
      const parsed = await simpleParser(m.raw, { skipImageLinks: true, skipTextToHtml: true });
      if (typeof parsed.html === 'string' && parsed.html.trim()) return stripQuoted(visibleTextFromHtml(parsed.html));
      return stripQuoted(sanitizeText(parsed.text ?? ''));
    }
    if (m.body_html) return stripQuoted(visibleTextFromHtml(m.body_html));
  }
  return stripQuoted(sanitizeText(m.body_text));
}

function addFrom(text: string, domains: Set<string>, emails: Set<string>) {
  for (const l of findLinks(text)) if (l.host) domains.add(domainOf(l.host));
  for (const e of findEmails(text)) emails.add(e);
}

export class DraftPlanner {
  constructor(
    private readonly em: EntityManager,
    /** The knowledge base the context draws on (DraftService's, wired in services.ts). */
    private readonly kb: KbService,
  ) {}

  async plan(scope: ThreadScope, threadId: string): Promise<DraftContext> {
    const t = await contextThread(this.em, scope, threadId);
    if (!t) throw ApiError.notFound('thread', `thread ${threadId} not found`);

    const sdr = await contextSdr(this.em, scope.sdrId);
    const box = await contextMailbox(this.em, scope.sdrId);
    const lead = t.lead_id ? await leadById(this.em, t.lead_id) : undefined;
    const campaign = t.campaign_id ? { name: await campaignName(this.em, t.campaign_id) } : undefined;
    const handoff = await contextHandoff(this.em, threadId);
    const stored = await contextMessages(this.em, threadId);
    // The campaign steps the lead received before the thread began come from the handoff snapshot
    // (the thread itself starts with the prospect's reply, which ended the sequence).
    const steps: MessageRow[] = (handoff?.snapshot?.messages ?? [])
      .filter((m) => m.direction === 'outbound' && m.at)
      .map((m) => ({ direction: 'outbound', from_email: '', to_emails: [t.contact_email], cc_emails: [], subject: m.subject ?? '', body_text: m.bodyText ?? '', body_html: null, raw: null, at: m.at! }));
    const messages = [...steps, ...stored];

    // History: newest first into the budget, then oldest first for reading.
    const texts = await Promise.all(messages.map(visibleText));
    const history: HistoryItem[] = [];
    let budget: number = CAPS.history;
    for (let i = messages.length - 1; i >= 0 && budget > 0; i--) {
      const text = sanitizeForPrompt(texts[i], Math.min(CAPS.message, budget));
      budget -= text.length;
      const m = messages[i];
      history.unshift({ direction: m.direction, from: m.from_email, at: toIso(m.at), subject: sanitizeText(m.subject), text });
    }
    const lastInbound = [...history].reverse().find((h) => h.direction === 'inbound');
    const lastProspectMessage = lastInbound?.text ?? '';

    const asks = extractAsks(lastProspectMessage);
    // Up to 3 entries for each ask (its sentence plus the words entries about its kind use), then
    // the best for the whole message, at most 6 in all.
    const found = new Map<string, KbHit>();
    for (const a of asks) for (const h of await this.kb.search(scope.workspaceId, `${a.text}\n${KIND_QUERY[a.kind]}`, 3)) found.set(h.id, h);
    for (const h of await this.kb.search(scope.workspaceId, `${t.subject}\n${lastProspectMessage}`, 4)) if (found.size < 6) found.set(h.id, h);
    const knowledge = [...found.values()].slice(0, 6).map((k) => ({ ...k, body: sanitizeForPrompt(k.body, CAPS.kbEntry) }));
    const kbTexts = await this.kb.allText(scope.workspaceId);
    const language = languageOfTag(sdr.language) ?? detectLanguage(lastProspectMessage) ?? 'en';

    const firstName = lead?.first_name ?? (t.contact_name.split(/\s+/)[0] || null);
    const participants = new Set<string>([t.contact_email, sdr.email].map(normalizeEmail));
    if (box) participants.add(normalizeEmail(box.email));
    for (const m of messages) for (const a of [m.from_email, ...m.to_emails, ...m.cc_emails]) if (a) participants.add(normalizeEmail(a));
    if (handoff) for (const a of [handoff.to_email, ...handoff.cc_emails]) participants.add(normalizeEmail(a));

    // The writer's allow-list: the KB, the SDR's profile, and what we ourselves sent.
    const wDomains = new Set<string>();
    const wEmails = new Set<string>([sdr.email, ...(box ? [box.email] : [])].map(normalizeEmail));
    for (const k of kbTexts) addFrom(k, wDomains, wEmails);
    addFrom(`${sdr.signature ?? ''}\n${sdr.calendar_url ?? ''}`, wDomains, wEmails);
    for (const [i, m] of messages.entries()) if (m.direction === 'outbound') addFrom(texts[i], wDomains, wEmails);
    // The guardrails' allow-list adds what the prospect visibly wrote (contract §9: "in the thread").
    const sDomains = new Set(wDomains);
    const sEmails = new Set(wEmails);
    for (const [i, m] of messages.entries()) if (m.direction === 'inbound') addFrom(texts[i], sDomains, sEmails);
    // The thread's subjects are in the thread too: a draft's subject repeats them ("Re: ...").
    // Read as the guardrails read the subject (sanitized: the default subject is the sanitized
    // thread subject, so a domain behind an invisible character or a lookalike is found there).
    for (const subject of [t.subject, ...messages.map((m) => m.subject)]) if (subject) addFrom(`${subject}\n${sanitizeText(subject)}`, sDomains, sEmails);
    for (const p of participants) sEmails.add(p);

    return {
      workspaceId: scope.workspaceId,
      threadId,
      thread: { subject: sanitizeText(t.subject), contactEmail: t.contact_email, contactName: sanitizeText(t.contact_name), category: t.category, status: t.status },
      contact: {
        firstName: firstName ? sanitizeText(firstName) : null,
        lastName: lead?.last_name ? sanitizeText(lead.last_name) : null,
        company: lead?.company ? sanitizeText(lead.company) : null,
        jobTitle: lead?.job_title ? sanitizeText(lead.job_title) : null,
        customFields: lead?.custom ?? {},
      },
      sdr: {
        id: sdr.id,
        name: sdr.name,
        email: box?.email ?? sdr.email,
        tone: sdr.tone,
        signature: sdr.signature ? sdr.signature.trim().slice(0, CAPS.signature) : null,
        calendarUrl: sdr.calendar_url,
        language: sdr.language,
      },
      campaignName: campaign?.name ?? null,
      handoffNote: handoff?.note ? sanitizeForPrompt(handoff.note, CAPS.note) : null,
      history,
      lastProspectMessage,
      knowledge,
      asks,
      objection: detectObjection(lastProspectMessage),
      appliedRules: await this.appliedRules(scope.workspaceId, threadId, t.category),
      language,
      writerAllowed: { domains: [...wDomains], emails: [...wEmails] },
      sendAllowed: { domains: [...sDomains], emails: [...sEmails] },
      participants: [...participants],
    };
  }

  /** The follow-up rules that will act on this thread once a reply is sent, with what each will do. */
  private async appliedRules(workspaceId: string, threadId: string, category: string): Promise<AppliedRule[]> {
    const rules = await rulesWithUse(this.em, workspaceId, threadId);
    return rules
      .filter((r) => !r.categories || r.categories.includes(category))
      .filter((r) => r.used < r.max_attempts)
      .map((r) => ({
        ruleId: r.id,
        name: r.name,
        effect:
          `if the prospect does not answer within ${formatDuration(Number(r.after_ms))}${r.business_days ? ' (business days)' : ''} of this reply, ` +
          `a follow-up task is created (attempt ${r.used + 1} of ${r.max_attempts})`,
      }));
  }
}
