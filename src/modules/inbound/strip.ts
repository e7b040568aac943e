import EmailReplyParser from 'email-reply-parser';

// Quoted history and signatures are removed before a reply is classified (contract §5), so
// "yes" above a quoted "please unsubscribe me" is read as "yes". Two passes:
//  1. our own cut at the first line that starts quoted history in the six languages the
//     contract names (wrapped "On ... wrote:" headers, Outlook "From:/Sent:" blocks,
//     "-----Original Message-----"), and removal of ">" lines;
//  2. email-reply-parser (Crisp) for what it knows beyond that: more languages' quote
//     headers and common signature shapes;
// then a last cut at the "-- " separator and mobile-client signatures.

const REPLY_PARSER = new EmailReplyParser();

/** "On <date>, <name> wrote:" in the languages we support; tested on up to three joined lines. */
const ATTRIBUTION: RegExp[] = [
  /^on\s.{4,300}\swrote\s*:$/i,
  /^am\s.{4,300}\sschrieb(\s.{0,200})?:$/i,
  /^le\s.{4,300}\sa\s+écrit\s*:$/i,
  /^el\s.{4,300}\sescribió\s*:$/i,
  /^em\s.{4,300}\sescreveu\s*:$/i,
  /^op\s.{4,300}\sschreef(\s.{0,200})?:$/i,
  /^op\s.{4,300}\sheeft\s.{1,200}\shet volgende geschreven\s*:$/i,
  /^il\s.{4,300}\sha\s+scritto\s*:$/i,
];
/** "Name <addr> wrote:", tested on one line only (it has no leading word to anchor on). */
const NAMED_ATTRIBUTION = /^.{0,120}<[^<>\s]+@[^<>\s]+>\)?\s*(wrote|schrieb|a\s+écrit|escribió|escreveu|schreef|ha\s+scritto)\s*:$/i;

const SEPARATOR_LINE =
  /^\s*-{2,}\s*(original message|ursprüngliche nachricht|originalnachricht|message d'origine|mensaje original|mensagem original|oorspronkelijk bericht|origineel bericht|forwarded message|weitergeleitete nachricht|message transféré|mensaje reenviado|mensagem encaminhada|doorgestuurd bericht)\s*-{2,}\s*$/i;
const FORWARD_LINE = /^\s*(begin forwarded message|anfang der weitergeleiteten nachricht|début du message réexpédié)\s*:\s*$/i;

// Outlook's reply header: "From:" followed closely by "Sent:"/"Date:", "To:", "Subject:" lines.
const HEADER_FROM = /^\s*\*?(from|von|de|van|da|från|fra)\s*:\*?\s*\S/i;
const HEADER_NEXT = /^\s*\*?(sent|date|to|cc|subject|gesendet|datum|an|betreff|envoyé|date|à|objet|enviado|enviada|fecha|para|asunto|assunto|data|verzonden|aan|onderwerp|verstuurd)\s*:\*?/i;

const SIGNATURE_DASHES = /^-- ?$/;
const MOBILE_SIGNATURE =
  /^\s*(sent from my\b|sent from (outlook|mail|yahoo|gmail|samsung)\b|get outlook for\b|gesendet von meinem\b|von meinem \S+ gesendet|gesendet mit\b|envoyé de mon\b|envoyé depuis\b|envoyé à partir de\b|enviado desde mi\b|enviado desde\b|enviado do meu\b|enviado de meu\b|enviado a partir do\b|verzonden vanaf\b|verstuurd vanaf\b|verzonden met\b|verzonden vanuit\b|verstuurd met\b)/i;

/** The reply's own text: without quoted history, forwarded content and signature. */
export function stripReply(text: string): string {
  const normalized = normalize(text);
  const own = cutQuotedHistory(normalized);
  let stripped = parseReplyBounded(own);
  // The library hides a whole fragment it takes for a quote header or signature; when that is
  // everything (a one-line reply such as "Cheers!"), the reply itself is what remains.
  if (stripped.trim() === '') stripped = own;
  return cutSignature(stripped).trim();
}

/** First `max` characters of the text, whitespace collapsed (threadSnippet). */
export function snippetOf(text: string, max = 200): string {
  const collapsed = text.replace(/\s+/g, ' ').trim();
  const chars = Array.from(collapsed);
  return chars.length <= max ? collapsed : chars.slice(0, max).join('').trimEnd();
}

function normalize(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/[\u00a0\u2007\u202f]/g, ' ')
    .replace(/[\u200b\u200c\u200d\ufeff]/g, '')
    // Only from the start of a run of blanks: tried at every blank of a run that ends in a
    // word, the pattern took time quadratic in the run (100,000 blanks before a word: 40 s).
    .replace(/(?<![ \t])[ \t]+$/gm, '');
}

/**
 * What email-reply-parser reads of a reply. Its patterns backtrack: "NAME on DATE at TIME
 * wrote:" is cubic in a line's length (a 40,000-character paragraph of prose, one line in an
 * HTML-only reply, took 4 s; 2 MB would hold the worker's event loop for hours, and every worker
 * that took the mailbox over), and others are cubic across lines. So it reads lines of at most
 * PARSER_MAX_LINE characters (a longer line is prose, never a quote header or a signature: a
 * placeholder stands in for it and the line comes back after) and PARSER_MAX_CHARS characters
 * so counted. A reply longer than that keeps the rest as it is, unless the parser hid the end
 * of what it read (quoted history or a signature: what follows belongs to it).
 */
const PARSER_MAX_LINE = 1_000;
const PARSER_MAX_CHARS = 10_000;
const PLACEHOLDER = /\ue000(\d+)\ue000/g;

function parseReplyBounded(text: string): string {
  const lines = text.split('\n');
  const long: string[] = [];
  const head: string[] = [];
  let chars = 0;
  let i = 0;
  for (; i < lines.length; i++) {
    let line = lines[i].replace(PLACEHOLDER, '');
    if (line.length > PARSER_MAX_LINE) {
      long.push(line);
      line = `\ue000${long.length - 1}\ue000`;
    }
    if (head.length && chars + line.length + 1 > PARSER_MAX_CHARS) break;
    head.push(line);
    chars += line.length + 1;
  }
  const restore = (t: string) => t.replace(PLACEHOLDER, (_, n: string) => long[Number(n)].replace(/^\s+/, ''));
  if (i === lines.length) return restore(REPLY_PARSER.parseReply(head.join('\n')));
  const fragments = REPLY_PARSER.read(head.join('\n')).getFragments();
  const last = [...fragments].reverse().find((f) => !f.isEmpty());
  const visible = restore(fragments.filter((f) => !f.isHidden()).join('\n').replace(/~*$/, ''));
  if (last && (last.isQuoted() || last.isSignature())) return visible;
  return `${visible}\n${lines.slice(i).join('\n')}`;
}

/**
 * The text above the first line that starts quoted history, without ">" lines. Text must have
 * "\n" line ends (the drafts' sanitizer uses it too, on text it has already cleaned).
 */
export function cutQuotedHistory(text: string): string {
  const lines = text.split('\n');
  const kept: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (startsQuotedHistory(lines, i)) break;
    if (/^\s*>/.test(lines[i])) continue;
    kept.push(lines[i]);
  }
  return kept.join('\n').trim();
}

function startsQuotedHistory(lines: string[], i: number): boolean {
  const line = lines[i].trim();
  if (line === '') return false;
  if (SEPARATOR_LINE.test(line) || FORWARD_LINE.test(line)) return true;
  // Outlook's plain-text separator: a line of underscores right above "From:".
  if (/^_{10,}$/.test(line)) return isHeaderBlock(lines, i + 1) || isHeaderBlock(lines, i + 2);
  if (isHeaderBlock(lines, i)) return true;
  if (NAMED_ATTRIBUTION.test(line)) return true;
  // Clients wrap long attribution lines ("... Alice Martin <\nalice@example.com> wrote:").
  let joined = line;
  for (let k = i; k < Math.min(lines.length, i + 3); k++) {
    if (k > i) {
      if (lines[k].trim() === '') break;
      joined = `${joined} ${lines[k].trim()}`;
    }
    if (joined.length > 400) break;
    if (ATTRIBUTION.some((re) => re.test(joined))) return true;
  }
  return false;
}

/** "From: x" followed, within the next four lines, by two more header lines. */
function isHeaderBlock(lines: string[], i: number): boolean {
  if (i >= lines.length || !HEADER_FROM.test(lines[i])) return false;
  let headers = 0;
  for (let k = i + 1; k < Math.min(lines.length, i + 6) && headers < 2; k++) {
    if (HEADER_NEXT.test(lines[k])) headers++;
    else if (lines[k].trim() !== '' && !/^\s/.test(lines[k])) break;
  }
  return headers >= 2;
}

function cutSignature(text: string): string {
  const lines = text.split('\n');
  const end = lines.findIndex((l) => SIGNATURE_DASHES.test(l) || MOBILE_SIGNATURE.test(l));
  return (end < 0 ? lines : lines.slice(0, end)).join('\n');
}
