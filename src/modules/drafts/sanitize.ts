import { convert } from 'html-to-text';
import { DomUtils, parseDocument } from 'htmlparser2';
import { cutQuotedHistory } from '../inbound/strip.ts';
import { own } from '../../shared/own.ts';

// Email content is data, never instructions (contract §9). Everything a prospect wrote reaches
// the LLM only through these functions: what a human reader would not see (invisible
// characters, hidden HTML) is removed, so it cannot smuggle instructions into a prompt.
// The exact lists and thresholds are documented in docs/drafts-scoring.md.

// ---------------------------------------------------------------------------------------------
// Plain text

/**
 * Characters that render as nothing: zero-width (U+200B–U+200F, U+2060–U+2064, U+FEFF, U+180E),
 * bidi controls (U+202A–U+202E, U+2066–U+2069, U+061C), the soft hyphen and other fillers, and
 * the two ranges used for "ASCII smuggling": tag characters (U+E0000–U+E007F) and variation
 * selectors (U+FE00–U+FE0F, U+E0100–U+E01EF).
 */
const INVISIBLE =
  /[\u200B-\u200F\u2060-\u2064\uFEFF\u180E\u202A-\u202E\u2066-\u2069\u061C\u00AD\u034F\u115F\u1160\u3164\uFFA0\uFE00-\uFE0F\u{E0000}-\u{E007F}\u{E0100}-\u{E01EF}]/gu;
/** C0 and C1 controls except \t and \n (\r is turned into \n first). */
const CONTROLS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/g;

/** Plain text that is safe to show to an LLM: only what a reader sees, in canonical form. */
export function sanitizeText(text: string): string {
  return (
    text
      .replace(/\r\n?/g, '\n')
      // NFKC first: fullwidth and compatibility lookalikes ("ｉｇｎｏｒｅ") become plain letters,
      // and the removals below then also catch anything NFKC produced.
      .normalize('NFKC')
      .replace(INVISIBLE, '')
      .replace(CONTROLS, '')
      .replace(/[\u2028\u2029]/g, '\n')
      // Trailing whitespace, line by line (a /[ \t]+$/gm replace is quadratic on long runs of spaces).
      .split('\n')
      .map((line) => line.trimEnd())
      .join('\n')
      // Two or more blank lines in a row become one.
      .replace(/\n{3,}/g, '\n\n')
      .trim()
  );
}

// ---------------------------------------------------------------------------------------------
// HTML: what a human would see

type Document = ReturnType<typeof parseDocument>;
type Node = Document['children'][number];
type Element = Parameters<typeof DomUtils.getAttributeValue>[0];

/** Elements whose content is never shown. */
const NEVER_SHOWN = new Set(['script', 'style', 'head', 'title', 'template', 'noscript', 'meta', 'link', 'base', 'iframe']);

/** Text below this contrast ratio with its background (WCAG formula) counts as invisible. */
const MIN_CONTRAST = 1.2;
/** Text at or below this size (CSS px) counts as invisible. */
const MAX_INVISIBLE_FONT_PX = 1;
/** Opacity (or colour alpha) at or below this counts as invisible. */
const MAX_INVISIBLE_OPACITY = 0.1;
/** An element moved this far off-screen (px; em and rem at 16px) counts as hidden. */
const OFFSCREEN_PX = -500;
/**
 * Content nested deeper than this is dropped: real mail stays far below it, and it bounds the
 * recursion here, in the serializer and in html-to-text (thousands of nested tags would
 * otherwise overflow the stack).
 */
const MAX_DEPTH = 200;

/** The HTML after removing everything a reader would not see (`visibleTextFromHtml`, links.ts). */
export function visibleDom(html: string): Document {
  const doc = parseDocument(html, { withStartIndices: true });
  const sheet = styleSheetRules(doc);
  pruneHidden(doc.children, { color: BLACK, background: WHITE, fontPx: 16 }, sheet, 0);
  return doc;
}

/** Every node under `root` in document order, without recursion (deeply nested mail must not overflow the stack). */
export function* descendants(root: { children: Node[] }): Generator<Node> {
  const stack = [...root.children].reverse();
  while (stack.length > 0) {
    const node = stack.pop()!;
    yield node;
    if (DomUtils.hasChildren(node)) for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]);
  }
}

/**
 * The text a human would see in an HTML body: hidden content removed (see `visibleDom`),
 * converted to text (a link as "text (url)" unless the url is its text) and `sanitizeText`ed.
 */
export function visibleTextFromHtml(html: string): string {
  const doc = visibleDom(html);
  for (const a of descendants(doc)) {
    if (!DomUtils.isTag(a) || a.name !== 'a') continue;
    const href = a.attribs.href;
    if (href !== undefined && sameLink(href, DomUtils.textContent(a))) delete a.attribs.href;
  }
  const text = convert(DomUtils.getOuterHTML(doc), {
    wordwrap: false,
    selectors: [
      ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((h) => ({ selector: h, options: { uppercase: false } })),
      { selector: 'img', format: 'skip' },
      { selector: 'a', options: { linkBrackets: ['(', ')'] as [string, string], hideLinkHrefIfSameAsText: true } },
    ],
  });
  return sanitizeText(text);
}

/** "https://acme.com/" shown as "acme.com", "mailto:x@y" shown as "x@y": the same link. */
function sameLink(href: string, text: string): boolean {
  const canonical = (s: string) =>
    s
      .trim()
      .toLowerCase()
      .replace(/^(mailto:|https?:\/\/)/, '')
      .replace(/^www\./, '')
      .replace(/\/$/, '');
  return canonical(href) === canonical(text);
}

/** What an element inherits that decides whether its text can be seen. */
interface Inherited {
  color: Rgba;
  background: Rgba;
  fontPx: number;
}

function pruneHidden(nodes: Node[], inherited: Inherited, sheet: SheetRule[], depth: number): void {
  // A copy: removing a node changes the array being walked.
  for (const node of [...nodes]) {
    if (depth > MAX_DEPTH) {
      DomUtils.removeElement(node);
    } else if (node.type === 'text') {
      if (node.data.trim() !== '' && !textVisible(inherited)) DomUtils.removeElement(node);
      // Now, not after conversion: html-to-text would turn U+200B into a word break.
      else node.data = node.data.replace(INVISIBLE, '');
    } else if (DomUtils.isTag(node)) {
      const decls = computedDeclarations(node, sheet);
      if (elementHidden(node, decls)) DomUtils.removeElement(node);
      else {
        if (node.name === 'details' && !('open' in node.attribs)) closeDetails(node);
        pruneHidden(node.children, inheritedBy(node, decls, inherited), sheet, depth + 1);
      }
    } else {
      // Comments (including conditional comments), CDATA, <!DOCTYPE> and processing instructions.
      DomUtils.removeElement(node);
    }
  }
}

/** A closed <details> shows only its first <summary> until the reader opens it: the rest goes. */
function closeDetails(details: Element): void {
  let summaryKept = false;
  for (const child of [...details.children]) {
    if (!summaryKept && DomUtils.isTag(child) && child.name === 'summary') summaryKept = true;
    else if (child.type !== 'text' || child.data.trim() !== '') DomUtils.removeElement(child);
  }
}

function elementHidden(el: Element, decls: Map<string, string>): boolean {
  if (NEVER_SHOWN.has(el.name)) return true;
  if ('hidden' in el.attribs) return true;
  if (el.attribs['aria-hidden']?.trim().toLowerCase() === 'true') return true;
  const get = (prop: string) => decls.get(prop) ?? '';
  if (get('display') === 'none' || get('mso-hide') === 'all') return true;
  if (['hidden', 'collapse'].includes(get('visibility'))) return true;
  const opacity = parseAlpha(get('opacity'));
  if (opacity !== null && opacity <= MAX_INVISIBLE_OPACITY) return true;
  // A box of at most 1px that clips its overflow (max-height:0, the "sr-only" pattern, ...).
  const clips = ['overflow', 'overflow-x', 'overflow-y'].some((p) => ['hidden', 'clip'].includes(get(p)));
  if (clips) {
    for (const prop of ['height', 'max-height', 'width', 'max-width']) {
      const px = lengthPx(get(prop));
      if (px !== null && px <= 1) return true;
    }
  }
  // Moved off-screen.
  for (const prop of ['text-indent', 'left', 'top', 'margin-left', 'margin-top']) {
    const px = lengthPx(get(prop));
    if (px !== null && px <= OFFSCREEN_PX) return true;
  }
  if (transformHides(get('transform')) || clipHides(get('clip')) || clipPathHides(get('clip-path'))) return true;
  return false;
}

/** The functions of a CSS value ("scale(0) translate(1px,2px)" → [["scale", ["0"]], ...]). */
function cssFunctions(value: string): Array<[string, string[]]> {
  const out: Array<[string, string[]]> = [];
  for (const m of value.toLowerCase().matchAll(/([a-z0-9-]+)\(([^()]*)\)/g)) out.push([m[1], m[2].split(/[\s,]+/).filter(Boolean)]);
  return out;
}

/**
 * A transform that shrinks the box to (almost) nothing (scale(0), scaleY(0.05), matrix(0, ...))
 * or moves it off-screen (translate(-9999px)).
 */
function transformHides(value: string): boolean {
  for (const [fn, args] of cssFunctions(value)) {
    const n = args.map((a) => (/^-?[\d.]+$/.test(a) ? Number(a) : NaN));
    const tiny = (x: number) => !Number.isNaN(x) && Math.abs(x) <= MAX_INVISIBLE_OPACITY;
    if (fn === 'scale' && (tiny(n[0]) || tiny(n[1] ?? n[0]))) return true;
    if ((fn === 'scalex' || fn === 'scaley') && tiny(n[0])) return true;
    // matrix(a, b, c, d, e, f): no area when the determinant ad - bc is (nearly) 0.
    if (fn === 'matrix' && n.length === 6 && n.every((x) => !Number.isNaN(x)) && Math.abs(n[0] * n[3] - n[1] * n[2]) <= 0.01) return true;
    if (fn === 'translate' || fn === 'translatex' || fn === 'translatey' || fn === 'translate3d') {
      for (const a of args.slice(0, 2)) {
        const px = lengthPx(a);
        if (px !== null && px <= OFFSCREEN_PX) return true;
      }
    }
  }
  return false;
}

/** The old `clip: rect(top, right, bottom, left)` (the "sr-only" pattern): at most 1px left visible. */
function clipHides(value: string): boolean {
  const rect = cssFunctions(value).find(([fn]) => fn === 'rect');
  if (!rect || rect[1].length !== 4) return false;
  const [top, right, bottom, left] = rect[1].map((a) => lengthPx(a));
  if (top === null || right === null || bottom === null || left === null) return false;
  return bottom - top <= 1 || right - left <= 1;
}

/** `clip-path` cutting everything away: inset(50%) or more, circle(0), ellipse(0 0), a degenerate polygon. */
function clipPathHides(value: string): boolean {
  for (const [fn, args] of cssFunctions(value)) {
    if (fn === 'inset') {
      const until = args.indexOf('round');
      // Percentages of the box; a zero length is 0%. Other lengths depend on the box: skipped.
      const sides = (until < 0 ? args : args.slice(0, until)).map((a) => (a.endsWith('%') ? parseFloat(a) : lengthPx(a) === 0 ? 0 : NaN));
      if (sides.length === 0 || sides.some((x) => Number.isNaN(x))) continue;
      const [t, r = t, b = t, l = r] = sides;
      if (t + b >= 100 || l + r >= 100) return true;
    }
    if (fn === 'circle' || fn === 'ellipse') {
      const radii = args.slice(0, args.includes('at') ? args.indexOf('at') : args.length);
      if (radii.length > 0 && radii.some((a) => (lengthPx(a) ?? (a.endsWith('%') ? parseFloat(a) : NaN)) === 0)) return true;
    }
    if (fn === 'polygon') {
      const points = value.toLowerCase().match(/polygon\(([^()]*)\)/)?.[1].split(',').map((p) => p.trim()) ?? [];
      if (points.length > 0 && new Set(points).size <= 2) return true;
    }
  }
  return false;
}

function inheritedBy(el: Element, decls: Map<string, string>, parent: Inherited): Inherited {
  // -webkit-text-fill-color paints the text instead of color where supported (Apple Mail).
  const color = decls.get('-webkit-text-fill-color') ?? decls.get('color') ?? (el.name === 'font' ? el.attribs.color : undefined);
  const background = decls.get('background-color') ?? backgroundColorOf(decls.get('background')) ?? el.attribs.bgcolor;
  const bg = background === undefined ? null : parseColor(background, parent.color);
  return {
    color: (color === undefined ? null : parseColor(color, parent.color)) ?? parent.color,
    // A translucent background mostly shows what is behind it: keep the inherited one.
    background: bg !== null && bg.a >= 0.5 ? bg : parent.background,
    fontPx: fontSizePx(decls.get('font-size'), parent.fontPx),
  };
}

function textVisible(s: Inherited): boolean {
  if (s.fontPx <= MAX_INVISIBLE_FONT_PX || s.color.a <= MAX_INVISIBLE_OPACITY) return false;
  return contrast(blend(s.color, s.background), s.background) >= MIN_CONTRAST;
}

// --- CSS declarations ------------------------------------------------------------------------

interface Declaration {
  value: string;
  important: boolean;
}

/** A rule of a <style> element whose selector we can match: the last compound only. */
interface SheetRule {
  tag: string | null;
  classes: string[];
  id: string | null;
  declarations: Map<string, Declaration>;
}

/** "color: #FFF !important; Font-Size:0" → lower-cased properties and values. */
function parseDeclarations(css: string): Map<string, Declaration> {
  const out = new Map<string, Declaration>();
  for (const part of withoutComments(css).split(';')) {
    const colon = part.indexOf(':');
    if (colon < 0) continue;
    const prop = part.slice(0, colon).trim().toLowerCase();
    let value = part.slice(colon + 1).trim().toLowerCase().replace(/\s+/g, ' ');
    const important = /!\s*important$/.test(value);
    if (important) value = value.replace(/\s*!\s*important$/, '');
    if (prop !== '' && value !== '') out.set(prop, { value, important });
  }
  return out;
}

/**
 * Rules from every <style> element. Selectors are matched by their last compound
 * (`div .x > span.hide` as `span.hide`), which over-approximates: content is rather dropped than
 * shown. Compounds with attribute selectors or pseudo-classes (`a:hover`) are ignored, and
 * specificity is not computed (later rules win, `!important` wins).
 */
function styleSheetRules(doc: Document): SheetRule[] {
  const rules: SheetRule[] = [];
  for (const style of descendants(doc)) {
    if (!DomUtils.isTag(style) || style.name !== 'style') continue;
    const css = withoutComments(DomUtils.textContent(style));
    // Innermost blocks, so the rules inside @media are read as well. A rule starts only at the
    // beginning or after a brace, which keeps the scan linear.
    for (const [, selectors, body] of css.matchAll(/(?<=^|[{}])([^{}]+)\{([^{}]*)\}/g)) {
      const declarations = parseDeclarations(body);
      for (const selector of selectors.split(',')) {
        const compound = selector.trim().split(/[\s>+~]+/).pop() ?? '';
        const m = /^([a-z][a-z0-9-]*|\*)?((?:[.#][\w-]+)*)$/i.exec(compound);
        if (m === null || compound === '') continue;
        const parts = m[2].match(/[.#][\w-]+/g) ?? [];
        rules.push({
          tag: m[1] === undefined || m[1] === '*' ? null : m[1].toLowerCase(),
          classes: parts.filter((p) => p.startsWith('.')).map((p) => p.slice(1)),
          id: parts.find((p) => p.startsWith('#'))?.slice(1) ?? null,
          declarations,
        });
      }
    }
  }
  return rules;
}

/** CSS without its comments (an unterminated one runs to the end). */
function withoutComments(css: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const open = css.indexOf('/*', at);
    if (open < 0) return out + css.slice(at);
    out += css.slice(at, open);
    const close = css.indexOf('*/', open + 2);
    if (close < 0) return out;
    at = close + 2;
  }
}

/** The element's declarations: matching sheet rules in order, then its style attribute. */
function computedDeclarations(el: Element, sheet: SheetRule[]): Map<string, string> {
  const merged = new Map<string, Declaration>();
  const apply = (decls: Map<string, Declaration>) => {
    for (const [prop, d] of decls) {
      if (!merged.get(prop)?.important || d.important) merged.set(prop, d);
    }
  };
  const classes = new Set((el.attribs.class ?? '').split(/\s+/).filter(Boolean));
  for (const rule of sheet) {
    if (rule.tag !== null && rule.tag !== el.name) continue;
    if (rule.id !== null && rule.id !== el.attribs.id) continue;
    if (!rule.classes.every((c) => classes.has(c))) continue;
    apply(rule.declarations);
  }
  if (el.attribs.style !== undefined) apply(parseDeclarations(el.attribs.style));
  return new Map([...merged].map(([prop, d]) => [prop, d.value]));
}

/** A CSS number, written so that no input makes these regexes backtrack ("1", "1.5", ".5"). */
const NUMBER = String.raw`(?:\d+(?:\.\d+)?|\.\d+)`;
const LENGTH = new RegExp(`^(-?${NUMBER})(px|pt|em|rem)?$`);
const FONT_SIZE = new RegExp(`^(${NUMBER})(px|pt|em|rem|%)?$`);
const ALPHA = new RegExp(`^${NUMBER}%?$`);

/** A length in CSS px (em and rem at 16px); null when it is not a plain length. */
function lengthPx(value: string): number | null {
  const m = LENGTH.exec(value);
  if (m === null) return null;
  const n = Number(m[1]);
  switch (m[2]) {
    case undefined:
      return n === 0 ? 0 : null;
    case 'pt':
      return (n * 4) / 3;
    case 'em':
    case 'rem':
      return n * 16;
    default:
      return n;
  }
}

const FONT_KEYWORDS: Record<string, number> = { 'xx-small': 9, 'x-small': 10, small: 13, medium: 16, large: 18, 'x-large': 24, 'xx-large': 32 };

function fontSizePx(value: string | undefined, parentPx: number): number {
  if (value === undefined) return parentPx;
  const keyword = own(FONT_KEYWORDS, value);
  if (keyword !== undefined) return keyword;
  if (value === 'smaller') return parentPx / 1.2;
  if (value === 'larger') return parentPx * 1.2;
  const m = FONT_SIZE.exec(value);
  if (m === null) return parentPx; // calc(), var(), inherit: keep the inherited size
  const n = Number(m[1]);
  switch (m[2]) {
    case 'pt':
      return (n * 4) / 3;
    case 'em':
      return n * parentPx;
    case 'rem':
      return n * 16;
    case '%':
      return (n / 100) * parentPx;
    default:
      return n; // px, or a unitless 0
  }
}

// --- Colours ---------------------------------------------------------------------------------

interface Rgba {
  r: number;
  g: number;
  b: number;
  a: number;
}

const BLACK: Rgba = { r: 0, g: 0, b: 0, a: 1 };
const WHITE: Rgba = { r: 255, g: 255, b: 255, a: 1 };

/**
 * Named colours: the basic sixteen plus every near-white and near-black name (the ones used to
 * hide text on the usual white or black background). Other names parse as unknown (visible).
 */
const NAMED: Record<string, string> = {
  black: '000000', white: 'ffffff', silver: 'c0c0c0', gray: '808080', grey: '808080', maroon: '800000', red: 'ff0000',
  purple: '800080', fuchsia: 'ff00ff', magenta: 'ff00ff', green: '008000', lime: '00ff00', olive: '808000', yellow: 'ffff00',
  navy: '000080', blue: '0000ff', teal: '008080', aqua: '00ffff', cyan: '00ffff', orange: 'ffa500',
  snow: 'fffafa', ivory: 'fffff0', ghostwhite: 'f8f8ff', whitesmoke: 'f5f5f5', floralwhite: 'fffaf0', seashell: 'fff5ee',
  linen: 'faf0e6', oldlace: 'fdf5e6', mintcream: 'f5fffa', azure: 'f0ffff', aliceblue: 'f0f8ff', honeydew: 'f0fff0',
  lavenderblush: 'fff0f5', cornsilk: 'fff8dc', lightyellow: 'ffffe0', beige: 'f5f5dc', lemonchiffon: 'fffacd',
  lightcyan: 'e0ffff', mistyrose: 'ffe4e1', gainsboro: 'dcdcdc', lightgray: 'd3d3d3', lightgrey: 'd3d3d3',
  papayawhip: 'ffefd5', blanchedalmond: 'ffebcd', antiquewhite: 'faebd7', lavender: 'e6e6fa',
  midnightblue: '191970', darkslategray: '2f4f4f', darkslategrey: '2f4f4f', dimgray: '696969', dimgrey: '696969',
};

/** A CSS colour (hex, rgb[a](), hsl[a](), a known name, transparent); null when not understood. */
function parseColor(value: string, current: Rgba): Rgba | null {
  const v = value.trim().toLowerCase();
  if (v === 'transparent') return { ...BLACK, a: 0 };
  if (v === 'currentcolor') return current;
  // "#fff", "#ffffff80", a name, or six bare hex digits as legacy attributes allow (bgcolor="ffffff").
  const hex = own(NAMED, v) ?? /^#([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/.exec(v)?.[1] ?? /^[0-9a-f]{6}$/.exec(v)?.[0];
  if (hex !== undefined) {
    const full = hex.length <= 4 ? [...hex].map((c) => c + c).join('') : hex;
    const n = (i: number) => parseInt(full.slice(i, i + 2), 16);
    return { r: n(0), g: n(2), b: n(4), a: full.length === 8 ? n(6) / 255 : 1 };
  }
  const fn = /^(rgba?|hsla?)\((.*)\)$/.exec(v);
  if (fn === null) return null;
  const args = fn[2].split(/[\s,/]+/).filter(Boolean);
  if (args.length < 3) return null;
  const a = args[3] === undefined ? 1 : parseAlpha(args[3]);
  if (a === null) return null;
  if (fn[1].startsWith('rgb')) {
    const [r, g, b] = args.slice(0, 3).map((x) => (x.endsWith('%') ? (parseFloat(x) * 255) / 100 : parseFloat(x)));
    return [r, g, b].some(Number.isNaN) ? null : { r, g, b, a };
  }
  const [h, s, l] = [parseFloat(args[0]), parseFloat(args[1]) / 100, parseFloat(args[2]) / 100];
  if ([h, s, l].some(Number.isNaN)) return null;
  // CSS Color 4, hsl to rgb.
  const f = (k: number) => {
    const t = (k + h / 30) % 12;
    return 255 * (l - s * Math.min(l, 1 - l) * Math.max(-1, Math.min(t - 3, 9 - t, 1)));
  };
  return { r: f(0), g: f(8), b: f(4), a };
}

/** "0.5", "50%" → 0.5; null when not a number. */
function parseAlpha(value: string): number | null {
  if (!ALPHA.test(value)) return null;
  return value.endsWith('%') ? parseFloat(value) / 100 : parseFloat(value);
}

/** The colour part of a `background` shorthand ("#fff url(x.png) no-repeat" → "#fff"). */
function backgroundColorOf(shorthand: string | undefined): string | undefined {
  if (shorthand === undefined) return undefined;
  for (const token of shorthand.match(/(?:rgba?|hsla?)\([^()]*\)|[^\s()]+(?:\([^()]*\))?/g) ?? []) {
    if (parseColor(token, BLACK) !== null) return token;
  }
  return undefined;
}

/** A translucent colour as it looks over `under`. */
function blend(c: Rgba, under: Rgba): Rgba {
  const mix = (x: number, y: number) => c.a * x + (1 - c.a) * y;
  return { r: mix(c.r, under.r), g: mix(c.g, under.g), b: mix(c.b, under.b), a: 1 };
}

/** WCAG 2 contrast ratio, 1 (same colour) to 21 (black on white). */
function contrast(x: Rgba, y: Rgba): number {
  const lum = (c: Rgba) => {
    const ch = (v: number) => {
      const s = Math.min(255, Math.max(0, v)) / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b);
  };
  const [hi, lo] = [lum(x), lum(y)].sort((a, b) => b - a);
  return (hi + 0.05) / (lo + 0.05);
}

// ---------------------------------------------------------------------------------------------
// Quoted history

/**
 * The text without quoted history: lines starting with ">" are dropped, and everything from the
 * first attribution line on ("On ... wrote:" and its translations, "-----Original Message-----",
 * an Outlook "From:/Sent:" header block). The same cut the inbound classifier makes.
 */
export function stripQuoted(text: string): string {
  return cutQuotedHistory(text.replace(/\r\n?/g, '\n'));
}

// ---------------------------------------------------------------------------------------------

const TRUNCATED = ' …[truncated]';

/**
 * A prospect's text ready for a prompt: sanitized, without quoted history, and at most
 * `maxChars` long including the " …[truncated]" marker. The cut is at the last word boundary
 * when that is within the last 20% of the room left, else mid-word (one very long token).
 */
export function sanitizeForPrompt(text: string, maxChars: number): string {
  const clean = stripQuoted(sanitizeText(text));
  if (clean.length <= maxChars) return clean;
  if (maxChars <= TRUNCATED.length) return withoutBrokenPair(clean.slice(0, Math.max(0, maxChars)));
  const budget = maxChars - TRUNCATED.length;
  let cut = clean.slice(0, budget);
  if (!/\s/.test(clean[budget])) {
    const space = cut.search(/\s\S*$/);
    if (space >= budget * 0.8) cut = cut.slice(0, space);
  }
  return withoutBrokenPair(cut).trimEnd() + TRUNCATED;
}

/** Never leave half of a surrogate pair at the end of a cut. */
/** `s` without a trailing half of a surrogate pair (what a cut by UTF-16 index can leave). */
export function withoutBrokenPair(s: string): string {
  return /[\uD800-\uDBFF]$/.test(s) ? s.slice(0, -1) : s;
}
