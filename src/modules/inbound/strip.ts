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
  let stripped = REPLY_PARSER.parseReply(own);
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
    .replace(/[ \t]+$/gm, '');
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
