// What the prospect asked for, and in which language they wrote: plain rules over the sanitized
// text of their last message, in the languages the classifier knows (en, es, pt, fr, de). The
// planner hands the asks to the writer (answer each) and to the judge's rubric (was each answered).

export type AskKind = 'pricing' | 'meeting' | 'information' | 'security' | 'integration' | 'timing' | 'question';

export interface Ask {
  kind: AskKind;
  /** The sentence the ask was found in (sanitized prospect text, at most 300 characters). */
  text: string;
  /** The word of the prospect's text that matched (it helps pick the knowledge-base entry). */
  keyword: string | null;
}

export type Language = 'en' | 'es' | 'pt' | 'fr' | 'de';

// Order matters: the first kind whose pattern matches a sentence names it.
const KINDS: { kind: Exclude<AskKind, 'question'>; pattern: RegExp }[] = [
  {
    kind: 'pricing',
    pattern:
      /\b(pricing|prices?|costs?|quotes?|quotation|budget|plans?|licen[cs]es?|seats?|discounts?|invoices?|precios?|preços?|pre[cç]o|custos?|tarifs?|prix|co[uû]ts?|devis|preise?|kosten|kostet|angebot|cuesta|cuestan|custa|custam|co[uû]te)\b/iu,
  },
  {
    kind: 'meeting',
    pattern:
      /\b(call|meeting|meet|demo|chat|calendar|schedule|availability|available|slot|zoom|teams|tuesday|wednesday|thursday|friday|monday|next week|llamada|reuni[oó]n|reuni[aã]o|liga[cç][aã]o|r[ée]union|rendez-vous|appel|termin|gespr[aä]ch|anruf)\b/iu,
  },
  {
    kind: 'security',
    pattern: /\b(security|secure|soc ?2|iso ?27001|gdpr|dpa|compliance|hipaa|encryption|sso|saml|seguridad|seguran[cç]a|lgpd|s[ée]curit[ée]|rgpd|sicherheit|datenschutz|dsgvo)\b/iu,
  },
  {
    kind: 'integration',
    pattern: /\b(integrat\w*|api|webhooks?|salesforce|hubspot|crm|zapier|connectors?|sync\w*|integra[cç][aã]o|integraci[oó]n|int[ée]gration|schnittstelle)\b/iu,
  },
  {
    kind: 'timing',
    pattern: /\b(next (quarter|month|year)|q[1-4]|later this year|timeline|timing|when could|how long|onboarding|implementation|go[- ]live|pr[oó]ximo (trimestre|mes|m[eê]s)|trimestre prochain|n[aä]chste[sn]? (quartal|monat))\b/iu,
  },
  {
    kind: 'information',
    pattern:
      /\b(more (info|information|details)|tell me more|send (me|over|us)|share|deck|case stud(y|ies)|brochure|one[- ]pager|docs|documentation|examples?|references?|m[aá]s (informaci[oó]n|detalles)|mais (informa[cç][oõ]es|detalhes)|plus d'informations|mehr (infos?|informationen|details))\b/iu,
  },
];

const WHEN =
  /\b(monday|tuesday|wednesday|thursday|friday|tomorrow|today|next week|this week|\d{1,2}(:\d{2})?\s?(am|pm|h)|lunes|martes|mi[eé]rcoles|jueves|viernes|segunda|ter[cç]a|quarta|quinta|sexta|lundi|mardi|mercredi|jeudi|vendredi|montag|dienstag|mittwoch|donnerstag|freitag|semana que vem|pr[oó]xima semana|semaine prochaine|n[aä]chste woche)\b/iu;

const REQUEST = /\?|\b(can|could|would|will) you\b|\bplease\b|\blet me know\b|\bsend me\b|\bi('d| would) (like|love)\b|\binterested in\b|\bpodr[ií]a|\bpoderia|\bpouvez|\bk[oö]nnten\b|\bgerne\b/iu;

/** Search words that find the knowledge-base entries about each kind of ask (any language). */
export const KIND_QUERY: Record<AskKind, string> = {
  pricing: 'pricing price prices cost plan plans seat seats discount precio precios preço preços tarifs prix preis preise',
  meeting: '',
  security: 'security soc compliance sso saml gdpr dpa encryption seguridad segurança sécurité sicherheit',
  integration: 'integration integrations integrates api salesforce hubspot crm webhooks',
  timing: 'onboarding implementation rollout timeline weeks',
  information: 'case study customers overview',
  question: '',
};

/** Splits text into sentences (keeps the terminating punctuation). */
export function sentences(text: string): string[] {
  return text
    .replace(/\s+/g, ' ')
    .split(/(?<=[.!?])\s+(?=[\p{Lu}\p{N}¿¡"'(])/u)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/**
 * The prospect's asks: every sentence that asks or requests (a question mark, "can you",
 * "please", "send me"…) or names a topic of its own (pricing, a call…). A sentence with no
 * known topic but a question mark is a plain `question`. At most one ask per kind, in order.
 */
export function extractAsks(text: string, max = 6): Ask[] {
  const out: Ask[] = [];
  const seen = new Set<AskKind>();
  for (const s of sentences(text)) {
    const isRequest = REQUEST.test(s);
    let found: Ask | null = null;
    for (const { kind, pattern } of KINDS) {
      const m = pattern.exec(s);
      if (m) {
        found = { kind, text: s.slice(0, 300), keyword: m[0].toLowerCase() };
        break;
      }
    }
    // A topic counts as an ask when the sentence asks for something, or when it is one a
    // prospect only mentions to have it answered: pricing, or a meeting with a day or time
    // ("I'm free Tuesday at 2pm"); "we use it for call coaching" asks for nothing.
    if (found && !(isRequest || found.kind === 'pricing' || (found.kind === 'meeting' && WHEN.test(s)))) found = null;
    if (!found && s.includes('?')) found = { kind: 'question', text: s.slice(0, 300), keyword: null };
    if (found && !seen.has(found.kind)) {
      seen.add(found.kind);
      out.push(found);
      if (out.length >= max) break;
    }
  }
  return out;
}

const LANGUAGE_WORDS: Record<Language, string[]> = {
  en: ['the', 'and', 'you', 'for', 'this', 'that', 'with', 'would', 'can', 'what', 'are', 'thanks', 'next', 'week'],
  es: ['el', 'los', 'las', 'que', 'por', 'para', 'con', 'una', 'gracias', 'podemos', 'semana', 'cuál', 'cómo', 'precio', 'está'],
  pt: ['não', 'você', 'uma', 'para', 'com', 'que', 'obrigado', 'obrigada', 'podemos', 'semana', 'qual', 'como', 'preço', 'está', 'vocês'],
  fr: ['le', 'les', 'des', 'est', 'pour', 'avec', 'une', 'merci', 'vous', 'nous', 'semaine', 'quel', 'prix', 'pas', 'je'],
  de: ['der', 'die', 'das', 'und', 'ist', 'mit', 'für', 'nicht', 'danke', 'wir', 'sie', 'woche', 'wie', 'preis', 'ich'],
};

/** The language of a text among en/es/pt/fr/de by common words; null when too little text to tell. */
export function detectLanguage(text: string): Language | null {
  const words = text.toLowerCase().match(/[\p{L}]+/gu) ?? [];
  if (words.length < 3) return null;
  let best: Language | null = null;
  let bestHits = 0;
  for (const [lang, list] of Object.entries(LANGUAGE_WORDS) as [Language, string[]][]) {
    const set = new Set(list);
    const hits = words.filter((w) => set.has(w)).length;
    if (hits > bestHits) {
      best = lang;
      bestHits = hits;
    }
  }
  return bestHits >= 2 ? best : null;
}

/** A profile language tag ("pt-BR", "en") as one of ours, else null. */
export function languageOfTag(tag: string | null | undefined): Language | null {
  const base = (tag ?? '').toLowerCase().split('-')[0];
  return (['en', 'es', 'pt', 'fr', 'de'] as const).find((l) => l === base) ?? null;
}

export type Objection = 'budget' | 'timing' | 'competitor';

const OBJECTIONS: { kind: Objection; pattern: RegExp }[] = [
  { kind: 'budget', pattern: /\b(no|not enough|without|tight|frozen|zero) budget\b|\bbudget (is|was) (tight|frozen|spent|gone)\b|\bcan'?t afford\b|\btoo expensive\b|\bsin presupuesto\b|\bsem or[cç]amento\b|\bpas de budget\b|\bkein budget\b/iu },
  { kind: 'competitor', pattern: /\b(already (use|using|have|work with)|we use|we'?re using|locked into|under contract with|ya usamos|j[aá] usamos|nous utilisons d[ée]j[aà]|wir nutzen bereits)\b/iu },
  {
    kind: 'timing',
    pattern:
      /\b(not (a|the) (priority|right time)|not now|bad timing|maybe later|circle back|reach out (again )?(in|next)|revisit|next (quarter|year)|in q[1-4]|later this year|no es (el )?momento|n[aã]o [eé] o momento|pas le moment|nicht der richtige zeitpunkt|sp[aä]ter)\b/iu,
  },
];

/** The prospect's objection, if their last message raises one (budget first: it is the strongest). */
export function detectObjection(text: string): Objection | null {
  return OBJECTIONS.find((o) => o.pattern.test(text))?.kind ?? null;
}
