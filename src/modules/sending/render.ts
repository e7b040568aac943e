import { convert } from 'html-to-text';
import { own } from '../../shared/own.ts';

// Personalization (contract §4): {{firstName}}, {{company}}, {{jobTitle}}, {{email}},
// {{lastName}}, any custom field, {{unsubscribeUrl}}; {{name|fallback}} gives a fallback.
// One pass: a value that itself contains {{...}} is inserted as is, never expanded again.
const TOKEN = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\|([^}]*))?\}\}/g;

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

export interface LeadValues {
  email: string;
  firstName: string | null;
  lastName: string | null;
  company: string | null;
  jobTitle: string | null;
  custom: Record<string, unknown>;
}

/**
 * A token's value: the lead's own field (own properties only: a token such as {{constructor}}
 * names no field and is missing), a string or a number; any other value counts as missing.
 */
function valueOf(name: string, lead: LeadValues, extra: Record<string, string>): string | undefined {
  let v: unknown;
  if (Object.hasOwn(extra, name)) v = extra[name];
  else {
    switch (name) {
      case 'email':
        v = lead.email;
        break;
      case 'firstName':
        v = lead.firstName;
        break;
      case 'lastName':
        v = lead.lastName;
        break;
      case 'company':
        v = lead.company;
        break;
      case 'jobTitle':
        v = lead.jobTitle;
        break;
      default:
        v = lead.custom !== null && typeof lead.custom === 'object' ? own(lead.custom, name) : undefined;
    }
  }
  const s = typeof v === 'string' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined;
  return s === undefined || s.trim() === '' ? undefined : s;
}

/** Replaces tokens once; `escape` is applied to every inserted value (and fallback). */
export function renderTokens(template: string, lead: LeadValues, extra: Record<string, string>, escape: (s: string) => string): string {
  return template.replace(TOKEN, (_m, name: string, fallback: string | undefined) => {
    const v = valueOf(name, lead, extra);
    return escape(v ?? fallback?.trim() ?? '');
  });
}

/** A subject line: tokens inserted, every CR/LF run becomes one space (no header injection). */
export function renderSubject(template: string, lead: LeadValues, extra: Record<string, string> = {}): string {
  return renderTokens(template, lead, extra, (s) => s)
    .replace(/[\r\n]+/g, ' ')
    .trim();
}

/**
 * An HTML tag, end tag, comment, doctype or character reference (`&eacute;`, `&#233;`: written
 * by someone writing HTML). A step body without any is plain text (a body written in a
 * plain-text editor or typed into the dashboard's field): "<https://x>", "a < b" or "Q&A" are
 * no markup.
 */
const MARKUP = /<(?:[A-Za-z][A-Za-z0-9-]*(?=[\s/>])|\/[A-Za-z][A-Za-z0-9-]*\s*>|!--|!doctype\b)|&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#x[0-9A-Fa-f]+);/i;

/** Whether a step body is plain text: no HTML markup at all. */
export function isPlainTextBody(template: string): boolean {
  return !MARKUP.test(template);
}

/**
 * A plain-text step body as the HTML template it stands for: its text escaped (tokens left as
 * they are: their values are escaped when inserted), a paragraph per blank-line-separated
 * block, a <br> per line break. Read as HTML, its line breaks collapsed into one run-on line,
 * in the HTML part and in the text part converted from it.
 */
export function plainTextBodyHtml(template: string): string {
  return template
    .replace(/\r\n?/g, '\n')
    .split(/\n[ \t]*\n/)
    .map((p) => p.replace(/^\n+|\n+$/g, ''))
    .filter((p) => p.trim() !== '')
    .map((p) => `<p>${p.split('\n').map(escapeOutsideTokens).join('<br>\n')}</p>`)
    .join('\n');
}

function escapeOutsideTokens(text: string): string {
  let out = '';
  let at = 0;
  for (const m of text.matchAll(TOKEN)) {
    out += escapeHtml(text.slice(at, m.index)) + m[0];
    at = m.index + m[0].length;
  }
  return out + escapeHtml(text.slice(at));
}

const htmlTemplates = new Map<string, string>();

/** The step body as an HTML template (a plain-text body converted once, as renderText's cache does). */
function htmlTemplateOf(template: string): string {
  let html = htmlTemplates.get(template);
  if (html === undefined) {
    html = isPlainTextBody(template) ? plainTextBodyHtml(template) : template;
    if (htmlTemplates.size >= 500) htmlTemplates.delete(htmlTemplates.keys().next().value!);
    htmlTemplates.set(template, html);
  }
  return html;
}

export function renderHtml(template: string, lead: LeadValues, extra: Record<string, string> = {}): string {
  return renderTokens(htmlTemplateOf(template), lead, extra, escapeHtml);
}

/** The text/plain alternative derived from the rendered HTML. */
export function htmlToText(html: string): string {
  return convert(html, {
    // No wrapping and no upper-casing: the text may still hold {{tokens}} (see renderText).
    wordwrap: false,
    selectors: [
      ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((h) => ({ selector: h, options: { uppercase: false } })),
      { selector: 'img', format: 'skip' },
      { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
      // Table rows and cells are inline by default: a table-laid-out email (what most email
      // builders write) had its rows and cells run together on one line ("Hi Ann,Second
      // paragraph."). Each row and cell is a line of its own.
      ...['tr', 'td', 'th'].map((selector) => ({ selector, format: 'block', options: { leadingLineBreaks: 1, trailingLineBreaks: 1 } })),
    ],
  }).trim();
}

const textTemplates = new Map<string, string>();

/**
 * The text/plain part of a rendered step: the step's HTML is converted to text once (tokens
 * survive the conversion as text) and the lead's values are inserted into that, unescaped.
 * Converting each personalized HTML body instead costs a parse per message. A plain-text body
 * is its own text part, line breaks as written.
 */
export function renderText(htmlTemplate: string, lead: LeadValues, extra: Record<string, string> = {}): string {
  let template = textTemplates.get(htmlTemplate);
  if (template === undefined) {
    template = isPlainTextBody(htmlTemplate) ? htmlTemplate.replace(/\r\n?/g, '\n').trim() : htmlToText(htmlTemplate);
    if (textTemplates.size >= 500) textTemplates.delete(textTemplates.keys().next().value!);
    textTemplates.set(htmlTemplate, template);
  }
  return renderTokens(template, lead, extra, (s) => s);
}

/** Appends the open-tracking pixel inside <body> when there is one, else at the end. */
export function withOpenPixel(html: string, pixelUrl: string): string {
  const img = `<img src="${escapeHtml(pixelUrl)}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" />`;
  const i = html.search(/<\/body\s*>/i);
  return i >= 0 ? html.slice(0, i) + img + html.slice(i) : html + img;
}

/** "Re: <previous>" without stacking prefixes. */
export function replySubject(previous: string): string {
  return /^\s*re\s*:/i.test(previous) ? previous : `Re: ${previous}`;
}
