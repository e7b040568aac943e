import { findLinks, findLinksAndEmails, linkProblems, type LinkProblem } from './links.ts';
import { sanitizeText, stripQuoted } from './sanitize.ts';

// The judge stage: deterministic scores for a draft, each 0..1 and rounded to 3 decimals. Every
// number and list here is documented in docs/drafts-scoring.md; change them together.

export interface Scores {
  overall: number;
  readability: number;
  personalization: number;
  linkQuality: number;
}

export interface JudgeInput {
  bodyText: string;
  /** "Dana Reyes": the first name is what counts. */
  contactName?: string | null;
  company?: string | null;
  lastProspectMessage?: string | null;
  /** Domains from the thread, the knowledge base and the SDR profile. */
  allowedDomains: Iterable<string>;
  /** The draft's language: picks the reading-ease formula (default en). */
  language?: ReadingLanguage;
}

export type ReadingLanguage = 'en' | 'es' | 'pt' | 'fr' | 'de';

export interface JudgeDetails {
  fleschReadingEase: number | null;
  words: number;
  sentences: number;
  nameUsed: boolean;
  companyUsed: boolean;
  echoedWords: string[];
  links: number;
  badLinks: { url: string; reason: LinkProblem }[];
}

const WEIGHTS = { readability: 0.4, personalization: 0.35, linkQuality: 0.25 } as const;
const PERSONALIZATION_WEIGHTS = { name: 0.4, company: 0.3, echo: 0.3 } as const;
/** Flesch reading ease at or above this is readability 1 … */
const FRE_EASY = 70;
/** … and at or below this, 0; linear in between. */
const FRE_HARD = 20;

export function judgeDraft(input: JudgeInput): { scores: Scores; details: JudgeDetails } {
  const body = sanitizeText(input.bodyText);
  const core = coreBody(body);
  const language = input.language ?? 'en';
  const stats = textStats(core, language);
  const fre = stats.words === 0 ? null : flesch(stats, language);
  const readability = fre === null ? 0 : clamp01((fre - FRE_HARD) / (FRE_EASY - FRE_HARD));

  // Names in URLs or addresses are not personalization: search the body without them.
  const prose = withoutLinksAndEmails(body);
  const firstName = firstNameOf(input.contactName);
  const companyName = companyCore(input.company);
  const nameUsed = firstName !== null && containsPhrase(prose, firstName);
  const companyUsed = companyName !== null && containsPhrase(prose, companyName);
  const lastMessage = input.lastProspectMessage?.trim() || null;
  const echoedWords = lastMessage === null ? [] : echoed(lastMessage, core, [firstName, companyName]);
  // A component whose input is missing is left out; the weights of the others are renormalised.
  const components: [weight: number, score: number][] = [];
  if (firstName !== null) components.push([PERSONALIZATION_WEIGHTS.name, nameUsed ? 1 : 0]);
  if (companyName !== null) components.push([PERSONALIZATION_WEIGHTS.company, companyUsed ? 1 : 0]);
  if (lastMessage !== null) {
    components.push([PERSONALIZATION_WEIGHTS.echo, echoedWords.length >= 2 ? 1 : echoedWords.length === 1 ? 0.5 : 0]);
  }
  const totalWeight = components.reduce((sum, [w]) => sum + w, 0);
  const personalization = totalWeight === 0 ? 0.5 : components.reduce((sum, [w, s]) => sum + w * s, 0) / totalWeight;

  const allowed = [...input.allowedDomains];
  const links = findLinks(body);
  const badLinks = links.flatMap((l) => {
    const [reason] = linkProblems(l, allowed);
    return reason === undefined ? [] : [{ url: l.url, reason }];
  });
  const linkQuality = links.length === 0 ? 1 : ((links.length - badLinks.length) / links.length) * (links.length > 2 ? 0.5 : 1);

  const rounded = { readability: round3(readability), personalization: round3(personalization), linkQuality: round3(linkQuality) };
  const overall = round3(
    WEIGHTS.readability * rounded.readability + WEIGHTS.personalization * rounded.personalization + WEIGHTS.linkQuality * rounded.linkQuality,
  );
  return {
    scores: { overall, ...rounded },
    details: {
      fleschReadingEase: fre === null ? null : Math.round(fre * 10) / 10,
      words: stats.words,
      sentences: stats.sentences,
      nameUsed,
      companyUsed,
      echoedWords,
      links: links.length,
      badLinks,
    },
  };
}

// --- Readability -----------------------------------------------------------------------------

/**
 * Flesch reading ease: 206.835 − 1.015·(words/sentences) − 84.6·(syllables/words) in English,
 * and the published adaptations for the other languages (see FLESCH); null when no words.
 */
export function fleschReadingEase(text: string, language: ReadingLanguage = 'en'): number | null {
  const stats = textStats(text, language);
  return stats.words === 0 ? null : flesch(stats, language);
}

interface TextStats {
  words: number;
  sentences: number;
  syllables: number;
}

/**
 * [base, per word of sentence length, per syllable of word length], on the same 0-100 scale:
 * en Flesch (1948); es Fernández Huerta (1959, as corrected); pt Martins et al. (1996: English
 * plus 42); fr Kandel & Moles (1958); de Amstad (1978).
 */
const FLESCH: Record<ReadingLanguage, [number, number, number]> = {
  en: [206.835, 1.015, 84.6],
  es: [206.84, 1.02, 60],
  pt: [248.835, 1.015, 84.6],
  fr: [207, 1.015, 73.6],
  de: [180, 1, 58.5],
};

function flesch({ words, sentences, syllables }: TextStats, language: ReadingLanguage): number {
  const [base, perWord, perSyllable] = FLESCH[language];
  return base - perWord * (words / sentences) - perSyllable * (syllables / words);
}

/** A word: letters and digits, with inner apostrophes, hyphens and dots ("don't", "follow-up", "e.g"). */
const WORD = /[\p{L}\p{N}]+(?:['’.\-][\p{L}\p{N}]+)*/gu;
/** Words whose final "." does not end a sentence (besides dotted ones like "e.g." and "U.S."). */
const ABBREVIATIONS = new Set([
  'mr', 'mrs', 'ms', 'dr', 'prof', 'sr', 'jr', 'st', 'vs', 'etc', 'inc', 'ltd', 'co', 'corp', 'approx', 'dept', 'fig',
  'jan', 'feb', 'apr', 'jun', 'jul', 'aug', 'sep', 'sept', 'oct', 'nov', 'dec', 'mon', 'tue', 'wed', 'thu', 'fri',
]);
/** "e.g", "U.S", "a.m", "Ph.D": short letter groups joined by dots. */
const DOTTED_ABBREVIATION = /^\p{L}{1,4}(?:\.\p{L}{1,4})+$/u;
/** Right after a word: closing quotes or brackets, then the sentence's end mark(s). */
const SENTENCE_END = /["')\]]*([.!?…]+)/y;

/**
 * Words, sentences and syllables. A sentence ends at ".", "!" or "?" after a word (not after an
 * abbreviation, a dotted word such as "e.g." or "U.S.", or a single letter), and at the end of a
 * line that does not end with a comma (lists, one-line paragraphs).
 */
function textStats(text: string, language: ReadingLanguage): TextStats {
  let words = 0;
  let syllables = 0;
  let sentences = 0;
  for (const line of text.split('\n')) {
    let open = false; // words since the last sentence end
    for (const m of line.matchAll(WORD)) {
      words++;
      syllables += syllableCount(m[0], language);
      open = true;
      SENTENCE_END.lastIndex = m.index + m[0].length;
      const end = SENTENCE_END.exec(line);
      if (end === null) continue;
      const w = m[0].toLowerCase();
      const abbreviation = end[1] === '.' && (DOTTED_ABBREVIATION.test(w) || ABBREVIATIONS.has(w) || /^\p{L}$/u.test(w));
      if (!abbreviation) {
        sentences++;
        open = false;
      }
    }
    if (open && !line.trimEnd().endsWith(',')) sentences++;
  }
  return { words, sentences: Math.max(1, sentences), syllables };
}

/**
 * Syllables: groups of one or two vowels (accents folded); in English and French less a silent
 * final "e"/"es" (and "ed" in English); at least 1.
 */
function syllableCount(word: string, language: ReadingLanguage): number {
  const w = word
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^a-z]/g, '');
  if (w.length <= 3) return 1; // also numbers and non-Latin words
  const stem = language === 'en' ? w.replace(/(?:[^laeiouy]es|ed|[^laeiouy]e)$/, '').replace(/^y/, '') : language === 'fr' ? w.replace(/(?:[^aeiouy]es|[^aeiouy]e)$/, '') : w;
  const groups = stem.match(/[aeiouy]{1,2}/g);
  return Math.max(1, groups?.length ?? 0);
}

// --- Core body -------------------------------------------------------------------------------

/** Greetings, each followed by a non-letter. */
const GREETING = new RegExp(
  String.raw`^(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening)|olá|ola|oi|hola|buenos días|bonjour|salut|hallo|guten tag|moin|ciao|buongiorno|salve)(?![\p{L}\p{N}])`,
  'iu',
);
/** What may follow a greeting on a line of its own: up to four words (names, titles), then ",", "!", ":" or ".". */
const GREETING_REST = /^(?:\s+[\p{L}.'’-]+){0,4}\s*[,!:.]?$/u;
/** A greeting in front of the first sentence: "Hi Dana, thanks for ..." loses "Hi Dana, ". */
const GREETING_PREFIX = /^[^,!\n]{0,40}[,!]\s+/u;

/** Sign-offs, longest first so "best regards" is not read as "best". */
const SIGN_OFFS = [
  'best', 'best regards', 'best wishes', 'all the best', 'regards', 'kind regards', 'warm regards', 'warmest regards', 'warmly',
  'cheers', 'thanks', 'thanks again', 'thank you', 'many thanks', 'sincerely', 'yours', 'yours truly', 'talk soon', 'speak soon',
  'obrigado', 'obrigada', 'abraços', 'atenciosamente', 'saludos', 'un saludo', 'gracias', 'atentamente', 'cordialement',
  'bien à vous', 'merci', 'viele grüße', 'beste grüße', 'liebe grüße', 'mit freundlichen grüßen', 'grüße', 'lg', 'grazie',
  'cordiali saluti', 'saluti', 'un saluto',
].sort((a, b) => b.length - a.length);
const SIGN_OFF = new RegExp(`^(?:${SIGN_OFFS.join('|')})(?![\\p{L}\\p{N}])`, 'iu');
/** After a sign-off on its line: punctuation and at most a capitalised name ("Thanks, Alex"). */
const SIGN_OFF_REST = /^[,!.]?(?:\s+\p{Lu}[\p{L}'’-]*){0,3}[,!.]?$/u;
/** A signature line: empty, or up to eight words not ending like a sentence ("Alex Kim", "Head of Sales, Acme"). */
const SIGNATURE_LINE = /^$|^(?:\S+\s+){0,7}\S*[^\s.!?]$/u;

/**
 * The body a reader reads: without the greeting line(s), the sign-off and everything after it
 * (the signature), and without URLs.
 */
export function coreBody(text: string): string {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  let start = 0;
  for (;;) {
    while (start < lines.length && lines[start].trim() === '') start++;
    if (start >= lines.length) break;
    const line = lines[start].trim();
    const greeting = GREETING.exec(line);
    if (greeting === null) break;
    const rest = line.slice(greeting[0].length);
    if (GREETING_REST.test(rest)) start++;
    else {
      lines[start] = rest.replace(GREETING_PREFIX, '');
      break;
    }
  }
  let end = lines.length;
  for (let i = start; i < lines.length; i++) {
    const line = lines[i].trim();
    const signOff = SIGN_OFF.exec(line);
    if ((signOff === null || !SIGN_OFF_REST.test(line.slice(signOff[0].length))) && !/^--\s?$/.test(line)) continue;
    // The first line is a sign-off only when nothing but a signature follows ("Thanks!" can open a reply).
    if (i > start || lines.slice(i + 1).every((l) => SIGNATURE_LINE.test(l.trim()))) {
      end = i;
      break;
    }
  }
  const body = lines.slice(start, end).join('\n');
  // URLs out (their words are not prose); what is left of a sentence stays.
  let out = '';
  let at = 0;
  for (const link of findLinks(body)) {
    out += body.slice(at, link.index);
    at = link.index + link.url.length;
  }
  return (out + body.slice(at)).replace(/[ \t]+/g, ' ').trim();
}

// --- Personalization -------------------------------------------------------------------------

const NAME_TITLES = new Set(['mr', 'mrs', 'ms', 'miss', 'mx', 'dr', 'prof', 'sir', 'madam']);

/** "Dr. Dana Reyes" → "Dana"; null when there is no usable name (also an email address). */
function firstNameOf(contactName: string | null | undefined): string | null {
  if (!contactName || contactName.includes('@')) return null;
  const words = contactName.trim().split(/\s+/).map((w) => w.replace(/^[^\p{L}]+|[^\p{L}]+$/gu, ''));
  return words.find((w) => w.length >= 2 && !NAME_TITLES.has(w.toLowerCase())) ?? null;
}

/** Legal-form suffixes dropped from a company name before looking for it ("Acme Inc." → "Acme"). */
const LEGAL_SUFFIX =
  /[\s,&]+(inc|incorporated|llc|l\.l\.c|ltd|limited|corp|corporation|co|company|gmbh|ag|sa|s\.a|sas|sarl|bv|b\.v|nv|plc|pty|oy|ab|as|srl|s\.r\.l|spa|s\.p\.a|ltda|kg|lp|llp)\.?$/i;

function companyCore(company: string | null | undefined): string | null {
  let name = company?.trim() ?? '';
  for (let previous = ''; previous !== name; ) {
    previous = name;
    name = name.replace(LEGAL_SUFFIX, '').trim();
  }
  return name === '' ? null : name;
}

/** Case- and accent-insensitive whole-word (whole-phrase) search. */
function containsPhrase(text: string, phrase: string): boolean {
  const escaped = fold(phrase).replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\s+/g, '\\s+');
  return new RegExp(`(?<![\\p{L}\\p{N}])${escaped}(?![\\p{L}\\p{N}])`, 'u').test(fold(text));
}

function fold(s: string): string {
  return s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
}

function withoutLinksAndEmails(text: string): string {
  let out = '';
  let at = 0;
  for (const span of findLinksAndEmails(text)) {
    const index = span.kind === 'link' ? span.link.index : span.index;
    out += `${text.slice(at, index)} `;
    at = index + (span.kind === 'link' ? span.link.url.length : span.email.length);
  }
  return out + text.slice(at);
}

/**
 * Words that do not show the reply engaged with what the prospect wrote: function words and
 * the small talk of any business email.
 */
const STOPWORDS = new Set(
  `about above after again against also although always another anyone anything around because been before being below
  between both cannot could didn does doesn doing done down during each either else even ever every from further have
  haven having here hers herself himself however into itself just know last least less like made make many maybe might
  more most much must myself need never next none only other ours ourselves over perhaps please quite rather really same
  shall should since some something still such sure than that their theirs them themselves then there these they thing
  things think this those though through thus together told took toward under unless until upon very want wanted wants
  well were what whatever when where whether which while whom whose will with within without would your yours yourself
  yourselves
  hello thanks thank regards best cheers dear email emails mail message reply replied reach touch time today tomorrow
  week weeks month year soon great good nice happy glad love look looking forward hope call chat meet meeting talk back
  getting going come coming kind sounds sound interested interesting work works working`.split(/\s+/),
);

/** Content words (≥ 4 letters, not stopwords) of the prospect's message that the draft uses, in draft order. */
function echoed(lastProspectMessage: string, draftCore: string, exclude: (string | null)[]): string[] {
  const excluded = new Set(exclude.flatMap((e) => (e === null ? [] : fold(e).split(/\s+/))));
  const contentWords = (text: string) =>
    Array.from(fold(text).matchAll(/\p{L}+/gu), (m) => m[0]).filter(
      (w) => [...w].length >= 4 && !STOPWORDS.has(w) && !excluded.has(w),
    );
  const prospect = new Set(contentWords(withoutLinksAndEmails(stripQuoted(sanitizeText(lastProspectMessage)))));
  return [...new Set(contentWords(draftCore).filter((w) => prospect.has(w)))];
}

function clamp01(x: number): number {
  return Math.min(1, Math.max(0, x));
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
