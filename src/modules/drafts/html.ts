import { escapeHtml } from '../sending/render.ts';
import { findLinksAndEmails } from './links.ts';

/**
 * The HTML body of a draft, rendered from its text (never taken from the LLM): everything is
 * escaped; blank-line-separated paragraphs become <p>, single newlines <br>; http(s) URLs become
 * <a href="URL">URL</a> (the visible text is the destination, nothing hidden) and email
 * addresses <a href="mailto:x">x</a>. No other tag or attribute is produced.
 */
export function textToHtml(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .split(/\n[ \t]*\n/)
    .map((p) => p.trim())
    .filter((p) => p !== '')
    .map((p) => `<p>${p.split('\n').map(inlineHtml).join('<br>\n')}</p>`)
    .join('\n');
}

/** One line: escaped text with its http(s) URLs and email addresses as links. */
function inlineHtml(line: string): string {
  let out = '';
  let at = 0;
  for (const span of findLinksAndEmails(line)) {
    // Scheme-less links (www.x.com) stay text: a link we render always shows its full URL.
    const target = span.kind === 'email' ? `mailto:${span.email}` : /^https?:\/\//i.test(span.link.url) ? span.link.url : null;
    if (target === null) continue;
    const index = span.kind === 'email' ? span.index : span.link.index;
    const shown = span.kind === 'email' ? span.email : span.link.url;
    out += `${escapeHtml(line.slice(at, index))}<a href="${escapeHtml(target)}">${escapeHtml(shown)}</a>`;
    at = index + shown.length;
  }
  return out + escapeHtml(line.slice(at));
}
