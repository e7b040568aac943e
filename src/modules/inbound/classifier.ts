import { featuresOf, predict, type ReplyModel } from './model.ts';
import { readSubject } from './subject.ts';
import type { Classification, ClassifierInput, MailHeaders, ReplyClassification } from './classification.ts';

export type { Classification, ClassifierInput, MailHeaders, ReplyClassification };
import { AUTO_ACK, AUTO_ACK_SUBJECT, BARE_NO, INTERESTED, NOT_INTERESTED, OOO_BODY, OOO_SUBJECT, POLITE_DECLINE, STOP_WORDS, UNSUBSCRIBE, type Cue, type Lang } from './lexicon.ts';

export interface ClassifierResult {
  classification: ReplyClassification;
  /** The rule or model that decided, e.g. "header:auto-submitted", "lexicon:unsubscribe:de". */
  decidedBy: string;
  /** 0..1 */
  confidence: number;
}

/**
 * The one seam for reply classification. The rules below implement it today; an LLM-backed
 * classifier can implement it later (and fall back to the rules when the model is unsure).
 */
export interface ReplyClassifier {
  classify(input: ClassifierInput): Promise<ClassifierResult>;
}

/** The first value of a header, as text, from mailparser's header map or a plain record. */
export function headerValue(headers: MailHeaders, name: string): string | null {
  const key = name.toLowerCase();
  let v: unknown;
  if (headers instanceof Map) v = headers.get(key);
  else v = Object.entries(headers).find(([k]) => k.toLowerCase() === key)?.[1];
  if (Array.isArray(v)) v = v[0];
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return v;
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object') {
    const o = v as { value?: unknown; text?: unknown };
    if (typeof o.value === 'string') return o.value;
    if (typeof o.text === 'string') return o.text;
  }
  return String(v);
}

// RFC 3834 and the de-facto auto-responder headers. X-Auto-Response-Suppress is deliberately
// absent: Outlook puts it on ordinary mail to ask others not to auto-reply.
const AUTO_REPLY_HEADERS: Array<{ name: string; decidedBy: string; matches: (v: string) => boolean }> = [
  { name: 'auto-submitted', decidedBy: 'header:auto-submitted', matches: (v) => !/^\s*no\s*(;|\(|$)/i.test(v) && v.trim() !== '' },
  { name: 'x-autoreply', decidedBy: 'header:x-autoreply', matches: (v) => !/^\s*(no|false|0)\s*$/i.test(v) },
  { name: 'x-autorespond', decidedBy: 'header:x-autorespond', matches: (v) => !/^\s*(no|false|0)\s*$/i.test(v) },
  { name: 'precedence', decidedBy: 'header:precedence', matches: (v) => /^\s*auto[_-]reply\s*$/i.test(v) },
];

const DEFAULT_DECISION = 'default:human-reply';

interface Match {
  cue: Cue;
  index: number;
  length: number;
}

/** Rules over headers, subject and the stripped text, in a fixed order (see docs/classification.md). */
export class RuleClassifier implements ReplyClassifier {
  async classify(input: ClassifierInput): Promise<ClassifierResult> {
    return this.classifySync(input);
  }

  classifySync(input: ClassifierInput): ClassifierResult {
    // "Re: <our subject>" (also "[EXTERNAL] RE: ...", subject.ts) is our own wording; an
    // auto-responder's subject names itself ("Automatic reply: ...", "Abwesenheitsnotiz: ...",
    // Sieve's "Auto: ...", "[Auto-Reply] Re: ...").
    const parts = readSubject(input.subject);
    const subject = prepare(parts.lead);
    const ownSubject = prepare(parts.own);
    const isReplySubject = parts.isReply;
    const text = prepare(input.text);

    // An unsubscribe request wins over every automatic reading: the mail clients that send our
    // List-Unsubscribe mailto for the reader (or answer "unsubscribe" for them) may mark it
    // Auto-Submitted, and add a sentence of their own ("This message was automatically generated").
    if (requestsUnsubscribe(text, ownSubject, isReplySubject)) {
      return { classification: 'unsubscribe', decidedBy: 'lexicon:unsubscribe:stop-word', confidence: 0.9 };
    }

    for (const h of AUTO_REPLY_HEADERS) {
      const v = headerValue(input.headers, h.name);
      if (v !== null && h.matches(v)) return { classification: 'out_of_office', decidedBy: h.decidedBy, confidence: 0.98 };
    }

    const subjectOoo = firstMatch(OOO_SUBJECT, subject);
    if (subjectOoo) return { classification: 'out_of_office', decidedBy: `pattern:ooo-subject:${subjectOoo.cue.lang}`, confidence: 0.95 };

    const ooo = score(OOO_BODY, text);
    if (ooo.total >= 2) {
      return { classification: 'out_of_office', decidedBy: `pattern:ooo-body:${ooo.lang}`, confidence: Math.min(0.95, 0.8 + 0.05 * (ooo.total - 2)) };
    }

    // A ticket system's acknowledgement is an automatic answer, headers or not (contract §5 has
    // one automatic class: out_of_office). Its subject tag counts one point at most.
    const ack = score(AUTO_ACK, text);
    const ackSubject = firstMatch(AUTO_ACK_SUBJECT, subject);
    const ackTotal = ack.total + (ackSubject ? 1 : 0);
    if (ackTotal >= 2) {
      return { classification: 'out_of_office', decidedBy: `pattern:auto-ack:${ack.lang ?? ackSubject!.cue.lang}`, confidence: Math.min(0.95, 0.8 + 0.05 * (ackTotal - 2)) };
    }

    const unsub = firstMatch(UNSUBSCRIBE, text) ?? (isReplySubject ? null : firstMatch(UNSUBSCRIBE, ownSubject));
    if (unsub) return { classification: 'unsubscribe', decidedBy: `lexicon:unsubscribe:${unsub.cue.lang}`, confidence: 0.92 };

    if (BARE_NO.test(text.trim())) return { classification: 'not_interested', decidedBy: 'lexicon:not_interested:bare-no', confidence: 0.85 };

    const negative = score([...NOT_INTERESTED, ...POLITE_DECLINE], text);
    // "not interested" must not also count as "interested": the negative phrases are blanked out first.
    const positive = score(INTERESTED, mask(text, negative.matches));
    if (negative.total === 0 && positive.total === 0) {
      return { classification: 'interested', decidedBy: DEFAULT_DECISION, confidence: 0.5 };
    }
    const [winner, loser, classification] =
      positive.total > negative.total ? [positive, negative, 'interested' as const] : [negative, positive, 'not_interested' as const];
    const confidence = 0.5 + (0.45 * (winner.total - loser.total)) / (winner.total + loser.total + 1);
    return { classification, decidedBy: `lexicon:${classification}:${winner.lang}`, confidence: round(confidence) };
  }
}

/**
 * A request to unsubscribe by its form: a reply that is only a stop word ("unsubscribe", "stop",
 * "abmelden"), or a new mail whose subject is one (what our List-Unsubscribe mailto,
 * `?subject=unsubscribe`, makes a mail client send), whatever body the client adds. No
 * auto-responder writes either, so it is read before the auto-reply headers, and the guard for
 * automatic mail (analyze.ts) lets it through.
 */
export function isUnsubscribeRequest(input: Pick<ClassifierInput, 'subject' | 'text'>): boolean {
  const parts = readSubject(input.subject);
  return requestsUnsubscribe(prepare(input.text), prepare(parts.own), parts.isReply);
}

function requestsUnsubscribe(text: string, ownSubject: string, isReplySubject: boolean): boolean {
  return STOP_WORDS.test(text) || ((text === '' || !isReplySubject) && STOP_WORDS.test(ownSubject));
}

function prepare(s: string): string {
  return s
    .normalize('NFC')
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    .replace(/\s+/g, ' ')
    .trim();
}

function firstMatch(list: Cue[], text: string): Match | null {
  let best: Match | null = null;
  for (const cue of list) {
    const m = cue.re.exec(text);
    if (m && (!best || m.index < best.index)) best = { cue, index: m.index, length: m[0].length };
  }
  return best;
}

interface Score {
  total: number;
  lang: Lang | null;
  matches: Match[];
}

/** Each cue counts once; the language is that of the heaviest (then earliest) matching cue. */
function score(list: Cue[], text: string): Score {
  const matches: Match[] = [];
  for (const cue of list) {
    for (const m of text.matchAll(globalOf(cue))) matches.push({ cue, index: m.index ?? 0, length: m[0].length });
  }
  const counted = new Set<Cue>();
  let total = 0;
  for (const m of matches) {
    if (counted.has(m.cue)) continue;
    counted.add(m.cue);
    total += m.cue.weight;
  }
  const lead = [...matches].sort((a, b) => b.cue.weight - a.cue.weight || a.index - b.index)[0];
  return { total, lang: lead?.cue.lang ?? null, matches };
}

const GLOBAL = new WeakMap<Cue, RegExp>();
function globalOf(cue: Cue): RegExp {
  let re = GLOBAL.get(cue);
  if (!re) GLOBAL.set(cue, (re = new RegExp(cue.re.source, cue.re.flags + 'g')));
  return re;
}

function mask(text: string, matches: Match[]): string {
  let out = text;
  for (const m of matches) out = out.slice(0, m.index) + ' '.repeat(m.length) + out.slice(m.index + m.length);
  return out;
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

/** What a person writes when no rule recognised the reply: the model chooses among these. */
const HUMAN_CLASSES: ReplyClassification[] = ['interested', 'not_interested', 'unsubscribe'];
const MODEL_MIN = 0.6;
const MODEL_MIN_UNSUBSCRIBE = 0.9;

/**
 * The rules decide whenever one of their phrases matched; a reply none of them recognised (once
 * "interested" by default) goes to the model. Out-of-office stays with the rules: the model
 * only chooses among the human classes. Measured in docs/classification.md.
 */
export function combine(rule: ClassifierResult, model: ReplyModel, input: ClassifierInput): ClassifierResult {
  if (rule.decidedBy !== DEFAULT_DECISION) return rule;
  const p = predict(model, featuresOf(input), HUMAN_CLASSES);
  // Unsure, or knows none of the words: the default stands and a person reads the reply. An
  // unsubscribe suppresses the address for good, so the model needs to be surer of it
  // ("Cheers!" and "Ok" must not unsubscribe anyone).
  if (p.known === 0 || p.probability < MODEL_MIN || (p.classification === 'unsubscribe' && p.probability < MODEL_MIN_UNSUBSCRIBE)) return rule;
  return { classification: p.classification, decidedBy: `model:nb:${p.classification}`, confidence: round(Math.min(0.9, p.probability)) };
}

/** The daemon's classifier: the rules, and the shipped model where they are weakest. */
export class HybridClassifier implements ReplyClassifier {
  private readonly rules = new RuleClassifier();
  constructor(private readonly model: ReplyModel) {}
  async classify(input: ClassifierInput): Promise<ClassifierResult> {
    return combine(this.rules.classifySync(input), this.model, input);
  }
}
