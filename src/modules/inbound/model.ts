// A multinomial naive Bayes model over words, word pairs and character n-grams of a reply's own
// text, trained offline by scripts/train-reply-model.ts from the tuning replies only and shipped
// as JSON (reply-model.json). It runs in-process, needs no service and decides in microseconds.
// docs/classification.md says where it is used and how it measured against the phrase lists.
import type { ClassifierInput, ReplyClassification } from './classification.ts';
import { readSubject } from './subject.ts';

export interface ReplyModel {
  version: 1;
  classes: ReplyClassification[];
  /** log P(class) */
  priors: number[];
  /** feature -> log P(feature | class), one per class */
  features: Record<string, number[]>;
}

/**
 * A whitespace-free token that the pattern `\S+@\S+\.\S+` would match whole: something, `@`,
 * something, `.`, something. Checked by position, not by that pattern, whose backtracking takes
 * time quadratic in a token's length (a 64 KB run without spaces took 3 s, 1 MB minutes).
 */
function looksLikeEmail(token: string): boolean {
  const at = token.indexOf('@', 1);
  if (at < 0) return false;
  const dot = token.indexOf('.', at + 2);
  return dot >= 0 && dot <= token.length - 2;
}

/** How much of a reply's text its features come from (featuresOf). */
export const FEATURE_TEXT_CHARS = 20_000;

/** The features of one reply: each counted once (binary), which suits short texts best. */
export function featuresOf(input: Pick<ClassifierInput, 'subject' | 'text'>): string[] {
  // The subject only when it is the lead's own: "Re: <our subject>" (also "[EXTERNAL] RE: ...")
  // says nothing about the lead.
  const subject = readSubject(input.subject).isReply ? '' : input.subject;
  // The model reads the start of a reply: past FEATURE_TEXT_CHARS a reply adds nothing a
  // classifier of short texts can use, and its features (3- to 5-character pieces of every word)
  // would grow with it (a 16 MB reply: tens of millions of strings).
  const text = `${subject}\n${input.text.slice(0, FEATURE_TEXT_CHARS)}`
    .normalize('NFC')
    .toLowerCase()
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    .replace(/https?:\/\/\S+/g, ' url ')
    .replace(/\S+/g, (token) => (looksLikeEmail(token) ? ' email ' : token))
    .replace(/\d/g, '0');
  const words = text.match(/[\p{L}0']+/gu) ?? [];
  const out = new Set<string>();
  for (let i = 0; i < words.length; i++) {
    out.add(`w:${words[i]}`);
    if (i + 1 < words.length) out.add(`b:${words[i]} ${words[i + 1]}`);
    const padded = ` ${words[i]} `;
    for (let n = 3; n <= 5; n++) for (let j = 0; j + n <= padded.length; j++) out.add(`c:${padded.slice(j, j + n)}`);
  }
  if (/[!?]/.test(input.text)) out.add(`p:${/\?/.test(input.text) ? '?' : '!'}`);
  if (words.length <= 3) out.add('len:short');
  return [...out];
}

export interface Example {
  classification: ReplyClassification;
  features: string[];
}

/** Trains the model; features seen in fewer than `minCount` examples are dropped (size, noise). */
export function train(examples: Example[], minCount = 2): ReplyModel {
  const classes = [...new Set(examples.map((e) => e.classification))].sort() as ReplyClassification[];
  const docCount = new Map<string, number>();
  for (const e of examples) for (const f of e.features) docCount.set(f, (docCount.get(f) ?? 0) + 1);
  const kept = [...docCount].filter(([, n]) => n >= minCount).map(([f]) => f).sort();
  const index = new Map(kept.map((f, i) => [f, i]));
  const counts = classes.map(() => new Float64Array(kept.length));
  const totals = classes.map(() => 0);
  const perClass = classes.map(() => 0);
  for (const e of examples) {
    const c = classes.indexOf(e.classification);
    perClass[c]++;
    for (const f of e.features) {
      const i = index.get(f);
      if (i === undefined) continue;
      counts[c][i]++;
      totals[c]++;
    }
  }
  const alpha = 0.5;
  const denom = classes.map((_, c) => totals[c] + alpha * kept.length);
  const r = (x: number) => Math.round(x * 1000) / 1000;
  const features: Record<string, number[]> = {};
  kept.forEach((f, i) => (features[f] = classes.map((_, c) => r(Math.log((counts[c][i] + alpha) / denom[c])))));
  return {
    version: 1,
    classes,
    // Uniform priors: the tuning set's class mix is ours, not the mailbox's.
    priors: classes.map(() => r(Math.log(1 / classes.length))),
    features,
  };
}

/** The most probable class (of `among`, default all), its posterior among them, and how many word features the model knew. */
export function predict(model: ReplyModel, features: string[], among: readonly ReplyClassification[] = model.classes): { classification: ReplyClassification; probability: number; known: number } {
  const scores = [...model.priors];
  let known = 0;
  for (const f of features) {
    const w = model.features[f];
    if (!w) continue;
    // Only the text's own words count as knowing it: "short" or "has a ?" alone is no evidence.
    if (f.charCodeAt(1) === 58 && 'wbc'.includes(f[0])) known++;
    for (let c = 0; c < scores.length; c++) scores[c] += w[c];
  }
  const allowed = model.classes.map((c) => among.includes(c));
  let best = allowed.indexOf(true);
  for (let c = 0; c < scores.length; c++) if (allowed[c] && scores[c] > scores[best]) best = c;
  const sum = scores.reduce((s, x, c) => s + (allowed[c] ? Math.exp(x - scores[best]) : 0), 0);
  return { classification: model.classes[best], probability: 1 / sum, known };
}
