import { domainToASCII } from 'node:url';
import { DomUtils, parseDocument } from 'htmlparser2';
import { descendants, visibleDom } from './sanitize.ts';

// Links and addresses in drafts and prospect mail. A draft may only point where the thread, the
// knowledge base or the SDR's profile already point (contract §9); these helpers find every
// link a mail client would show as one and tell what is wrong with it. Lists are documented in
// docs/drafts-scoring.md.

export interface FoundLink {
  /** As written (trailing punctuation removed). */
  url: string;
  /** Lower-case, IDN hosts in punycode (as the WHATWG URL parser gives them); '' when none. */
  host: string;
  /** 'other' covers scheme-less links (www.acme.com, acme.com/x) and any other scheme. */
  scheme: 'http' | 'https' | 'other';
  /** Offset in the searched text (for HTML, of the element or text node it was found in). */
  index: number;
}

/**
 * Top-level domains a bare "name.tld" is recognised with. Mail clients turn such text into a
 * link, so a draft saying "see evil.example.com" is a link; the list is kept to common TLDs so
 * "e.g.", "Node.js" or "file.txt" are not.
 */
const BARE_TLDS = [
  'com', 'net', 'org', 'io', 'co', 'ai', 'app', 'dev', 'info', 'biz', 'me', 'us', 'uk', 'de', 'fr', 'es', 'it', 'nl', 'eu',
  'ch', 'at', 'be', 'se', 'no', 'dk', 'fi', 'pl', 'pt', 'br', 'mx', 'ar', 'ca', 'au', 'nz', 'in', 'jp', 'cn', 'ru', 'ie',
  'sg', 'hk', 'za', 'ae', 'id', 'xyz', 'site', 'online', 'link', 'ly', 'gl', 'gy', 'gd', 'cc', 'tv', 'to', 'sh', 'so',
  'gg', 'st', 'al', 'ink', 'tech', 'store', 'shop', 'page', 'club', 'top', 'live', 'pro', 'cloud', 'email',
];

// One scan finds emails, scheme URLs, www. links and bare domains, leftmost first, so an email's
// domain or a URL's path is never reported as a second link. Each alternative may only start
// where its token starts (the lookbehinds), which keeps the scan linear on hostile input.
// An address at a domain, or at an address literal (x@[192.0.2.1], x@[IPv6:2001:db8::1]), which
// mail servers deliver to as well: unrecognised, it passed the guardrails as no address at all.
const EMAIL_SRC = String.raw`[a-z0-9._%+-]+@(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}|\[(?:ipv6:)?[0-9a-f:.]+\])`;
const URL_CHARS = String.raw`[^\s<>"'\x60]`;
/** The first character after "://" or "www.": one that trailing-punctuation trimming keeps. */
const URL_START = String.raw`[^\s<>"'\x60.,;:!?*_~\u2026)\]}]`;
const SCAN = new RegExp(
  [
    `(?<email>(?<![a-z0-9._%+-])${EMAIL_SRC})`,
    String.raw`(?<url>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*:\/\/${URL_START}${URL_CHARS}*)`,
    String.raw`(?<www>(?<![\w.@/-])www\.${URL_START}${URL_CHARS}*)`,
    String.raw`(?<bare>(?<![\w.@/:-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:${BARE_TLDS.join('|')})(?![\w-])(?:[/?#:]${URL_CHARS}*)?)`,
  ].join('|'),
  'giu',
);
const EMAIL = new RegExp(`(?<![a-z0-9._%+-])${EMAIL_SRC}`, 'gi');

/** Link and email spans of a text, in order and never overlapping (textToHtml links them). */
export type Span = { kind: 'link'; link: FoundLink } | { kind: 'email'; email: string; index: number };

export function findLinksAndEmails(text: string): Span[] {
  const spans: Span[] = [];
  for (const m of text.matchAll(SCAN)) {
    if (m.groups!.email !== undefined) spans.push({ kind: 'email', email: m[0], index: m.index });
    else spans.push({ kind: 'link', link: toFoundLink(trimTrailing(m[0]), m.index) });
  }
  return spans;
}

/** http(s):// and other scheme URLs, www.… and bare common-TLD domains in a text. */
export function findLinks(text: string): FoundLink[] {
  return findLinksAndEmails(text).flatMap((s) => (s.kind === 'link' ? [s.link] : []));
}

/** Every email address in a text (also inside URLs), lower-cased, each once. */
export function findEmails(text: string): string[] {
  return [...new Set(Array.from(text.matchAll(EMAIL), (m) => m[0].toLowerCase()))];
}

const CLOSING: Record<string, string> = { ')': '(', ']': '[', '}': '{' };

/** Trailing sentence punctuation is not part of a URL; a ")" is when the URL opened one. */
function trimTrailing(url: string): string {
  const count = (c: string) => url.split(c).length - 1;
  const unmatched: Record<string, number> = {};
  for (const [close, open] of Object.entries(CLOSING)) unmatched[close] = count(close) - count(open);
  let end = url.length;
  while (end > 0) {
    const last = url[end - 1];
    if ('.,;:!?*_~\u2026'.includes(last)) end--;
    else if (last in CLOSING && unmatched[last] > 0) {
      unmatched[last]--;
      end--;
    } else break;
  }
  return url.slice(0, end);
}

/** "ftp:", "javascript:" … but not "acme.com:8080" (a port). */
const EXPLICIT_SCHEME = /^([a-z][a-z0-9+.-]*):(?!\d)/i;

function toFoundLink(url: string, index: number): FoundLink {
  const scheme = /^https:/i.test(url) ? 'https' : /^http:/i.test(url) ? 'http' : 'other';
  // Scheme-less links are read as the client would: "//x" with the page's https, "x.com" as http.
  const absolute = EXPLICIT_SCHEME.test(url) ? url : url.startsWith('//') ? `https:${url}` : url.startsWith('/') ? null : `http://${url}`;
  return { url, host: absolute === null ? '' : hostOf(absolute), scheme, index };
}

function hostOf(absolute: string): string {
  try {
    return new URL(absolute).hostname;
  } catch {
    // Not parseable (a bad port, a broken IPv6 literal): the authority as written.
    return /^[a-z][a-z0-9+.-]*:\/\/(?:[^/?#@]*@)?(\[[^\]]*\]|[^/?#:]*)/i.exec(absolute)?.[1]?.toLowerCase() ?? '';
  }
}

/** Attributes whose value is a URL the client loads or follows (SVG's xlink:href, <object data>). */
const URL_ATTRIBUTES = ['href', 'xlink:href', 'src', 'data', 'action', 'formaction', 'background', 'poster', 'cite'];
/** Values of those attributes that are not web links (addresses are checked as addresses). */
const NOT_A_WEB_LINK = /^(mailto:|tel:|sms:|cid:|data:image\/|#|$)/i;

/**
 * Links in an HTML body: URL attributes (href, src, …; each `srcset` candidate), URLs in style
 * attributes (`url(...)`), and links in the text, each distinct url once. By default only what a
 * reader can see is searched (hidden elements are skipped, see sanitize.ts), which is what to
 * use when collecting the domains a prospect's mail allows. `includeHidden` searches everything,
 * which is what to use on a body about to be sent.
 */
export function findLinksInHtml(html: string, options: { includeHidden?: boolean } = {}): FoundLink[] {
  const found = new Map<string, FoundLink>();
  const add = (link: FoundLink) => {
    if (!found.has(link.url)) found.set(link.url, link);
  };
  walkHtml(html, options.includeHidden ?? false, {
    text: (text, index, inStyle) => {
      findLinks(text).forEach((l) => add({ ...l, index: index + l.index }));
      if (inStyle) cssLinks(text).forEach((l) => add({ ...l, index }));
    },
    element: (el, index) => {
      for (const name of URL_ATTRIBUTES) {
        // Browsers drop tabs and newlines inside URLs ("java\tscript:" is "javascript:").
        const value = el.attribs[name]?.replace(/[\t\n\r]/g, '').trim();
        if (value !== undefined && !NOT_A_WEB_LINK.test(value)) add(toFoundLink(value, index));
      }
      for (const candidate of el.attribs.srcset?.split(',') ?? []) {
        const value = candidate.trim().split(/\s+/)[0] ?? '';
        if (!NOT_A_WEB_LINK.test(value)) add(toFoundLink(value, index));
      }
      if (el.attribs.style !== undefined) [...findLinks(el.attribs.style), ...cssLinks(el.attribs.style)].forEach((l) => add({ ...l, index }));
    },
  });
  return [...found.values()];
}

/**
 * The absolute URLs a style sheet or a style attribute loads, as the client's CSS parser reads
 * them: escapes decoded (`\68ttps:` is `https:`), then every `url(…)` and quoted string that
 * has a scheme or starts with `//` (protocol-relative: `url(//host/x.png)`). Relative ones
 * (`url(x.png)`) have no host to leave for and are not listed.
 */
export function cssLinks(css: string): FoundLink[] {
  const decoded = css
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/\\(?:([0-9a-f]{1,6})[ \t\n\r\f]?|\r\n|([\s\S]))/gi, (_, hex: string | undefined, ch: string | undefined) => {
      if (hex === undefined) return ch === undefined || ch === '\n' || ch === '\r' || ch === '\f' ? '' : ch;
      const cp = parseInt(hex, 16);
      return cp === 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? '\ufffd' : String.fromCodePoint(cp);
    });
  const out: FoundLink[] = [];
  for (const m of decoded.matchAll(/url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))|"([^"]*)"|'([^']*)'/gi)) {
    const inUrl = m[1] !== undefined || m[2] !== undefined || m[3] !== undefined;
    const value = (m[1] ?? m[2] ?? m[3] ?? m[4] ?? m[5] ?? '').replace(/[\t\n\r]/g, '').trim();
    if (NOT_A_WEB_LINK.test(value)) continue;
    // Browsers read a backslash in a web URL as a slash ("\\evil.example" is "//evil.example").
    if (/^[\\/]{2}/.test(value)) out.push(toFoundLink(`//${value.replace(/^[\\/]+/, '')}`, m.index));
    // In url() any scheme (javascript:, http:); a plain string (@import "…", image-set("…"),
    // content: "…") only when it is a URL with an authority.
    else if (inUrl ? EXPLICIT_SCHEME.test(value) : /^[a-z][a-z0-9+.-]*:[\\/]{2}/i.test(value)) out.push(toFoundLink(value, m.index));
  }
  return out;
}

/** Email addresses in an HTML body's text and attribute values (mailto: links), each once. */
export function findEmailsInHtml(html: string, options: { includeHidden?: boolean } = {}): string[] {
  const found = new Set<string>();
  walkHtml(html, options.includeHidden ?? false, {
    text: (text) => findEmails(text).forEach((e) => found.add(e)),
    element: (el) => Object.values(el.attribs).forEach((v) => findEmails(decodeURIComponentSafe(v)).forEach((e) => found.add(e))),
  });
  return [...found];
}

/** "mailto:dana%40acme.com" → "mailto:dana@acme.com"; the value itself when it is not valid. */
function decodeURIComponentSafe(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

type Element = Parameters<typeof DomUtils.getAttributeValue>[0];

function walkHtml(
  html: string,
  includeHidden: boolean,
  visit: { text: (text: string, index: number, inStyle: boolean) => void; element: (el: Element, index: number) => void },
): void {
  const doc = includeHidden ? parseDocument(html, { withStartIndices: true }) : visibleDom(html);
  for (const node of descendants(doc)) {
    if (DomUtils.isTag(node)) visit.element(node, node.startIndex ?? 0);
    else if (node.type === 'text') {
      const parent = node.parent;
      visit.text(node.data, node.startIndex ?? 0, parent !== null && DomUtils.isTag(parent) && parent.name === 'style');
    }
  }
}

/** Lower-case, without a leading "www.", a port or a trailing dot; the domain part of an email. */
export function domainOf(hostOrEmail: string): string {
  let d = hostOrEmail.trim().toLowerCase();
  d = d.slice(d.lastIndexOf('@') + 1);
  if (d.startsWith('[')) return d.slice(0, d.indexOf(']') + 1) || d;
  // One colon is a port; more is a bare IPv6 address.
  if (d.split(':').length === 2) d = d.slice(0, d.indexOf(':'));
  d = d.replace(/\.$/, '').replace(/^www\./, '');
  // A domain written in Unicode compares in the punycode form the URL parser gives hosts.
  return /^[\x00-\x7f]*$/.test(d) ? d : domainToASCII(d) || d;
}

/**
 * Generic link shorteners: a shortened link hides where it goes (it can redirect anywhere).
 * Subdomains count. Single-site short domains (youtu.be, amzn.to) are not on the list.
 */
const SHORTENERS = [
  'bit.ly', 't.co', 'tinyurl.com', 'goo.gl', 'ow.ly', 'is.gd', 'buff.ly', 'rebrand.ly', 'cutt.ly', 'shorturl.at', 't.ly',
  'rb.gy', 'tiny.cc', 'lnkd.in', 'bl.ink', 's.id', 'v.gd', 'qr.ae', 'trib.al', 'shorte.st', 'adf.ly', 'soo.gd', '1url.com',
  'bitly.com', 'bit.do', 'tiny.one', 'short.gy', 'x.co', 'dlvr.it', 'ift.tt', 'shor.by', 'snip.ly', 'clck.ru', 'urlz.fr',
  'han.gl', 'hubs.ly', 'hubs.la', 'mcaf.ee', 'qrco.de',
];

export function isShortener(host: string): boolean {
  const d = domainOf(host);
  return SHORTENERS.some((s) => d === s || d.endsWith(`.${s}`));
}

/** IPv4 (also the integer, hex and octal forms browsers accept: 3232235777, 0x7f.1) and IPv6. */
export function isIpHost(host: string): boolean {
  let h = host.trim().toLowerCase().replace(/\.$/, '');
  if (h.startsWith('[')) return true;
  const colons = h.split(':').length - 1;
  if (colons > 1) return /^[0-9a-f:.]+$/.test(h);
  if (colons === 1) h = h.slice(0, h.indexOf(':'));
  return /^(?:0x[0-9a-f]*|\d+)(?:\.(?:0x[0-9a-f]*|\d+)){0,3}$/.test(h);
}

/** Any label in ACE form ("xn--"): an internationalised name, possibly a lookalike. */
export function isPunycode(host: string): boolean {
  return host.toLowerCase().split('.').some((label) => label.startsWith('xn--'));
}

/** The host is an allowed domain or a subdomain of one (entries may be hosts or emails). */
export function domainAllowed(host: string, allowed: Iterable<string>): boolean {
  const d = domainOf(host);
  if (d === '') return false;
  for (const entry of allowed) {
    const a = domainOf(entry);
    if (a !== '' && (d === a || d.endsWith(`.${a}`))) return true;
  }
  return false;
}

/**
 * What is wrong with a link, in this order: 'http' (http: or another scheme that is not https;
 * scheme-less links are judged by host only), 'shortener', 'ip', 'punycode', and
 * 'unknown_domain' when the host is none of those three and not allowed.
 */
export type LinkProblem = 'http' | 'shortener' | 'ip' | 'punycode' | 'unknown_domain';

export function linkProblems(link: FoundLink, allowed: Iterable<string>): LinkProblem[] {
  const hostProblems: LinkProblem[] = [];
  if (isShortener(link.host)) hostProblems.push('shortener');
  if (link.host !== '' && isIpHost(link.host)) hostProblems.push('ip');
  if (isPunycode(link.host)) hostProblems.push('punycode');
  if (hostProblems.length === 0 && !domainAllowed(link.host, allowed)) hostProblems.push('unknown_domain');
  const insecure = link.scheme === 'http' || (link.scheme === 'other' && EXPLICIT_SCHEME.test(link.url));
  return insecure ? ['http', ...hostProblems] : hostProblems;
}
