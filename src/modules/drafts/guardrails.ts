import { DomUtils, parseDocument } from 'htmlparser2';
import { normalizeEmail } from '../../shared/email.ts';
import { judgeDraft, type ReadingLanguage, type Scores } from './judge.ts';
import { domainAllowed, domainOf, findEmails, findEmailsInHtml, findLinks, findLinksInHtml, linkProblems, type FoundLink, type LinkProblem } from './links.ts';
import { descendants, sanitizeText } from './sanitize.ts';

// Pre-send guardrails (contract §9), run on the final subject and bodies before every send. The
// codes, lists and messages are documented in docs/drafts-scoring.md.

export interface GuardrailIssue {
  code: string;
  severity: 'block' | 'warn';
  message: string;
  field: string;
}

export interface GuardrailsResult {
  blocked: boolean;
  issues: GuardrailIssue[];
  scores: Scores;
}

export interface GuardrailInput {
  subject: string;
  bodyText: string;
  bodyHtml: string;
  /** The recipients about to be used. */
  to: string[];
  cc: string[];
  /**
   * participants: every address seen in the thread's messages and the handoff, plus the SDR's own.
   * sdrEmail: the SDR's mailbox; colleagues at its (non-free-mail) domain may be cc'd.
   */
  thread: { contactEmail: string; participants: string[]; sdrEmail?: string };
  /** From the thread, the knowledge base and the SDR profile. */
  allowed: { domains: Iterable<string>; emails: Iterable<string> };
  /** MAILGATE_GUARDRAIL_THRESHOLD, default 0.6. */
  threshold: number;
  /** Default 5000 characters of bodyText. */
  maxBodyChars?: number;
  contactName?: string | null;
  company?: string | null;
  lastProspectMessage?: string | null;
  /** The draft's language, for the readability formula (default en). */
  language?: ReadingLanguage;
  /** From an LLM rubric, when configured: each is a block issue. */
  unsupportedClaims?: string[];
  /** From an LLM rubric: each is a warn issue. */
  unansweredAsks?: string[];
}

export const DEFAULT_MAX_BODY_CHARS = 5000;

export function runGuardrails(input: GuardrailInput): GuardrailsResult {
  const issues: GuardrailIssue[] = [];
  const block = (code: string, field: string, message: string) => issues.push({ code, severity: 'block', message, field });
  const warn = (code: string, field: string, message: string) => issues.push({ code, severity: 'warn', message, field });

  const allowedDomains = [...input.allowed.domains];
  // What a reader sees: invisible characters gone, lookalikes folded (ｈｔｔｐ:// is http://).
  const text = sanitizeText(input.bodyText);
  const subject = sanitizeText(input.subject);
  const htmlText = htmlTextAndAttributes(input.bodyHtml);

  // --- Content ---
  if (subject === '') block('empty_subject', 'subject', 'the subject is empty');
  if (!/[\p{L}\p{N}]/u.test(text)) block('empty_body', 'bodyText', 'the body is empty');
  const maxChars = input.maxBodyChars ?? DEFAULT_MAX_BODY_CHARS;
  if (input.bodyText.length > maxChars) {
    block('body_too_long', 'bodyText', `the body is ${input.bodyText.length} characters long; the limit is ${maxChars}`);
  }
  // The HTML normally repeats the text: what the text already reported is not reported again.
  const seenPlaceholders = new Set<string>();
  for (const [field, value] of [['subject', subject], ['bodyText', text], ['bodyHtml', htmlText]] as const) {
    for (const token of placeholders(value)) {
      if (field === 'bodyHtml' && seenPlaceholders.has(token)) continue;
      seenPlaceholders.add(token);
      block('unresolved_placeholder', field, `unresolved placeholder ${token} in the ${FIELD_NAMES[field]} — replace it with the real text`);
    }
  }

  // --- Links and addresses, in the subject, the text and the HTML (hidden parts and hrefs included) ---
  const linksByField: [string, FoundLink[]][] = [
    ['subject', findLinks(subject)],
    ['bodyText', findLinks(text)],
    ['bodyHtml', findLinksInHtml(input.bodyHtml, { includeHidden: true })],
  ];
  const seenLinks = new Set<string>();
  for (const [field, links] of linksByField) {
    for (const link of links) {
      if (seenLinks.has(link.url)) continue;
      seenLinks.add(link.url);
      for (const problem of linkProblems(link, allowedDomains)) {
        const [code, message] = LINK_ISSUES[problem](link);
        block(code, field, message);
      }
    }
  }
  const contactEmail = normalizeAddress(input.thread.contactEmail);
  const participants = new Set([contactEmail, ...input.thread.participants.map(normalizeAddress)]);
  const allowedEmails = new Set([...[...input.allowed.emails].map(normalizeAddress), ...participants]);
  const addressesByField: [string, string[]][] = [
    ['subject', findEmails(subject)],
    ['bodyText', findEmails(text)],
    ['bodyHtml', findEmailsInHtml(input.bodyHtml, { includeHidden: true })],
  ];
  const seenAddresses = new Set<string>();
  for (const [field, addresses] of addressesByField) {
    for (const address of addresses) {
      if (seenAddresses.has(address)) continue;
      seenAddresses.add(address);
      if (!allowedEmails.has(address) && !domainAllowed(address, allowedDomains)) {
        block('unknown_address', field, `address ${address} is not from the thread, the knowledge base or your profile — remove it or check it`);
      }
    }
  }

  // --- Recipients ---
  const to = [...new Set(input.to.map(normalizeAddress))];
  if (to.length !== 1 || to[0] !== contactEmail) {
    block('recipient_mismatch', 'to', `the reply must go to the thread's contact ${contactEmail} and no one else (to: ${to.join(', ') || 'empty'})`);
  }
  // A cc may be anyone who took part in the thread, or someone at the contact's or the SDR's own
  // company (never "anyone at gmail.com").
  const ccDomains = [domainOf(contactEmail), ...(input.thread.sdrEmail ? [domainOf(normalizeAddress(input.thread.sdrEmail))] : [])].filter(
    (d) => !FREE_MAIL_DOMAINS.has(d),
  );
  for (const cc of new Set(input.cc.map(normalizeAddress))) {
    if (!/^[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+$/.test(cc)) {
      block('recipient_not_in_thread', 'cc', `cc ${cc} is not a valid email address`);
    } else if (!participants.has(cc) && !domainAllowed(cc, ccDomains)) {
      block('recipient_not_in_thread', 'cc', `cc ${cc} has not taken part in this thread and is not at ${ccDomains.join(' or ') || "the contact's company"}`);
    }
  }

  // --- Quality ---
  const { scores } = judgeDraft({
    bodyText: input.bodyText,
    contactName: input.contactName,
    company: input.company,
    lastProspectMessage: input.lastProspectMessage,
    language: input.language,
    allowedDomains,
  });
  if (scores.overall < input.threshold) {
    block(
      'low_score',
      'scores.overall',
      `quality score ${scores.overall} is below the threshold ${input.threshold} (readability ${scores.readability}, personalization ${scores.personalization}, links ${scores.linkQuality})`,
    );
  }
  for (const claim of input.unsupportedClaims ?? []) {
    block('unsupported_claim', 'bodyText', `"${claim}" is not supported by the thread or the knowledge base — remove it or back it up`);
  }

  // --- Warnings ---
  for (const [field, value] of [['subject', subject], ['bodyText', text]] as const) {
    for (const { phrase } of matches(AI_TELLS, value)) {
      warn('ai_tell', field, `"${phrase}" reads as machine-written — rephrase it`);
    }
    for (const { phrase } of matches(SPAM_PHRASES, value)) {
      warn('spam_phrase', field, `"${phrase}" is a spam-filter trigger — rephrase it`);
    }
    if (/!!/.test(value) || (field === 'bodyText' && (value.match(/!/g)?.length ?? 0) > MAX_EXCLAMATIONS)) {
      warn('excessive_exclamation', field, `too many exclamation marks in the ${FIELD_NAMES[field]}`);
    }
  }
  const shouted = shoutedWords(text);
  if (shouted.length >= MIN_SHOUTED_WORDS) {
    warn('all_caps', 'bodyText', `words in capitals read as shouting: ${shouted.slice(0, 5).join(', ')}`);
  }
  if (allCapsSubject(subject)) warn('all_caps', 'subject', 'the subject is in capitals — write it in normal case');
  for (const ask of input.unansweredAsks ?? []) {
    warn('unanswered_ask', 'bodyText', `the prospect asked "${ask}" and the reply does not answer it`);
  }

  return { blocked: issues.some((i) => i.severity === 'block'), issues, scores };
}

const FIELD_NAMES = { subject: 'subject', bodyText: 'body', bodyHtml: 'HTML body' } as const;

const LINK_ISSUES: Record<LinkProblem, (link: FoundLink) => [code: string, message: string]> = {
  http: (l) => ['insecure_link', `link ${shown(l.url)} uses ${/^[a-z][a-z0-9+.-]*:/i.exec(l.url)?.[0] ?? 'http:'} — use https`],
  shortener: (l) => ['shortened_link', `link ${shown(l.url)} is shortened (${l.host}) — use the full link`],
  ip: (l) => ['ip_link', `link ${shown(l.url)} points to an IP address — use the site's domain name`],
  punycode: (l) => [
    'punycode_link',
    `link ${shown(l.url)} has an internationalised domain (${l.host}) that may imitate another — check it and use the real domain`,
  ],
  unknown_domain: (l) => [
    'unknown_link',
    `link ${shown(l.url)} goes to ${l.host || 'no domain'}, which is not from the thread, the knowledge base or your profile`,
  ],
};

/** A URL as quoted in a message: long ones (data: URLs, tracking links) shortened. */
function shown(url: string): string {
  return url.length > 100 ? `${url.slice(0, 99)}…` : url;
}

/** "Dana Reyes <Dana@Acme.com>" → "dana@acme.com". */
function normalizeAddress(address: string): string {
  return normalizeEmail(/<([^<>]*)>/.exec(address)?.[1] ?? address);
}

/**
 * Free-mail providers: a contact at gmail.com does not make every gmail.com address a
 * colleague who may be copied.
 */
const FREE_MAIL_DOMAINS = new Set([
  'gmail.com', 'googlemail.com', 'yahoo.com', 'ymail.com', 'outlook.com', 'hotmail.com', 'live.com', 'msn.com', 'icloud.com',
  'me.com', 'mac.com', 'aol.com', 'proton.me', 'protonmail.com', 'pm.me', 'gmx.com', 'gmx.de', 'gmx.net', 'web.de',
  'yandex.com', 'yandex.ru', 'mail.ru', 'zoho.com', 'fastmail.com', 'hey.com', 'tutanota.com', 'qq.com', '163.com',
]);

/** An HTML body's text nodes and attribute values (not style/script code), for the placeholder check. */
function htmlTextAndAttributes(html: string): string {
  const doc = parseDocument(html);
  const parts: string[] = [];
  for (const node of descendants(doc)) {
    if (DomUtils.isTag(node)) {
      // "<insert link>" written raw parses as an element.
      if (node.name === 'insert') parts.push('<insert>');
      for (const [name, value] of Object.entries(node.attribs)) if (name !== 'style') parts.push(value);
    } else if (node.type === 'text' && !isCode(node.parent)) {
      parts.push(node.data);
    }
  }
  return sanitizeText(parts.join('\n'));
}

function isCode(parent: ReturnType<typeof parseDocument>['parent']): boolean {
  return parent !== null && DomUtils.isTag(parent) && (parent.name === 'style' || parent.name === 'script');
}

// --- Placeholders ----------------------------------------------------------------------------

/** Bracketed words that are subject tags added by mail gateways, not placeholders. */
const BRACKET_TAGS = /^(external|ext|caution|warning|spam|suspected spam|secure|encrypt|encrypted|confidential|fwd|fw)$/i;
/** Words that make a bracketed phrase a placeholder even when it is not capitalised ("[first name]"). */
const PLACEHOLDER_WORDS =
  /\b(name|first|last|company|insert|link|url|date|time|title|email|phone|placeholder|your|their|prospect|contact|calendar|here|tbd)\b/i;

const PLACEHOLDER_PATTERNS: RegExp[] = [
  /\{\{[^{}\n]*\}\}/g, // {{first_name}}
  /\$?\{[A-Za-z_][\w.-]{0,40}\}/g, // {first_name}, ${company} (no spaces: "{ return x; }" is code)
  /\{[A-Z][\w-]*(?: [A-Z][\w-]*){0,4}\}/g, // {Company Name}
  /<\s*insert\b[^<>\n]*>/gi, // <insert link>
  /\bINSERT_[A-Z0-9_]+\b/g,
  /\b(?:FIRST|LAST|FULL|COMPANY|CONTACT|PROSPECT|SENDER|YOUR|CALENDAR|MEETING)_[A-Z0-9_]+\b/g, // FIRST_NAME
  /\bTODO\b/g,
  /\bXXX+\b/g,
];

/** Unresolved template text in a field, each distinct token once (the writer checks model output with it too). */
export function placeholders(value: string): string[] {
  const found = new Set<string>();
  let rest = value;
  for (const re of PLACEHOLDER_PATTERNS) {
    // A match is blanked out so "{{x}}" is not found again as "{x}".
    rest = rest.replace(re, (m) => {
      found.add(m);
      return ' '.repeat(m.length);
    });
  }
  // [First Name], [Company], [Insert link]: 1–5 words, the first capitalised or one a placeholder
  // word; not "[1]", not a markdown link "[see docs](https://…)", not a gateway tag "[EXTERNAL]".
  for (const m of rest.matchAll(/\[([\p{L}][\p{L}'’_-]*(?: [\p{L}][\p{L}'’_-]*){0,4})\](?!\()/gu)) {
    const inner = m[1];
    if (BRACKET_TAGS.test(inner)) continue;
    if (/^\p{Lu}/u.test(inner) || PLACEHOLDER_WORDS.test(inner)) found.add(m[0]);
  }
  return [...found];
}

// --- Warning lists ---------------------------------------------------------------------------

interface Phrase {
  phrase: string;
  re: RegExp;
}

/** A phrase and how to find it (by default: its words, any whitespace between, case-insensitive). */
const term = (p: string, re?: RegExp): Phrase => ({ phrase: p, re: re ?? new RegExp(`\\b${p.replace(/ /g, '\\s+')}\\b`, 'i') });

/** Phrases that read as written by a language model. */
const AI_TELLS: Phrase[] = [
  term('I hope this email finds you well', /\bI\s+(?:hope|trust)\s+(?:this|my)\s+(?:(?:e-?mail|message|note)\s+)?finds\s+you\s+well\b/i),
  term('as an AI', /\bas\s+an\s+AI\b/i),
  term('as a language model', /\bas\s+a\s+(?:large\s+)?language\s+model\b/i),
  term('delve', /\bdelv(?:e|es|ed|ing)\b/i),
  term("I'd be happy to help", /\bI(?:'|’)?d\s+be\s+(?:happy|glad|delighted)\s+to\s+help\b/i),
  term("don't hesitate to reach out", /\bdo(?:n't|n’t|\s+not)\s+hesitate\s+to\s+(?:reach\s+out|contact)\b/i),
  term("in today's fast-paced", /\bin\s+today(?:'|’)?s\s+fast[-\s]paced\b/i),
  term('I wanted to reach out', /\bI\s+wanted\s+to\s+reach\s+out\b/i),
  term('Certainly!', /\bcertainly!/i),
  term('Great question', /\bgreat\s+question\b/i),
  term('ever-evolving', /\bever[-\s]evolving\b/i),
  term('navigate the complexities'),
  term('unlock the potential', /\bunlock\s+the\s+(?:full\s+)?potential\b/i),
  term('rest assured'),
  term('tapestry'),
];

/** Phrases that spam filters and readers associate with spam. */
const SPAM_PHRASES: Phrase[] = [
  term('act now'),
  term('100% free', /\b100\s*%\s*free\b/i),
  term('risk-free', /\brisk[-\s]free\b/i),
  term('guaranteed'),
  term('limited time'),
  term('click here'),
  term('no obligation'),
  term('buy now'),
  term('winner'),
  term('urgent'),
];

function matches(list: Phrase[], value: string): Phrase[] {
  const normalized = value.replace(/’/g, "'");
  return list.filter((p) => p.re.test(normalized));
}

const MAX_EXCLAMATIONS = 3;
const MIN_SHOUTED_WORDS = 3;

/** Acronyms that are not shouting (only words of 4+ letters are counted, the short ones are for the reader). */
const ACRONYMS = new Set([
  'HTML', 'HTTP', 'HTTPS', 'JSON', 'YAML', 'REST', 'SAML', 'OAUTH', 'SAAS', 'PAAS', 'IAAS', 'API', 'APIS', 'SDK', 'SDKS', 'CEO',
  'CTO', 'CFO', 'COO', 'CMO', 'CRO', 'CISO', 'GDPR', 'CCPA', 'HIPAA', 'FERPA', 'SOC2', 'ISO', 'USA', 'EMEA', 'APAC', 'LATAM',
  'DACH', 'NYSE', 'NASDAQ', 'NASA', 'NATO', 'ASAP', 'FAQ', 'FAQS', 'KPIS', 'OKRS', 'SLAS', 'CRMS', 'SMTP', 'IMAP', 'DMARC',
  'DKIM', 'BIMI', 'CEST', 'AEST', 'AWST', 'USPS', 'UTC', 'GMT', 'PST', 'EST', 'AWS', 'GCP', 'SQL', 'NOSQL', 'LLMS', 'GPTS',
  'SSO', 'SCIM', 'MSSP', 'SIEM', 'SOAR', 'CSAT', 'NPS', 'ARR', 'MRR', 'SMB', 'SMBS',
]);

/** Distinct words of 4+ capital letters that are not known acronyms. */
function shoutedWords(text: string): string[] {
  const words = Array.from(text.matchAll(/(?<![\p{L}\p{N}])\p{Lu}{4,}(?![\p{L}\p{N}])/gu), (m) => m[0]);
  return [...new Set(words.filter((w) => !ACRONYMS.has(w)))];
}

/** No lower-case letter, at least 6 letters, and a word of 4+ letters that is not an acronym ("Re:" prefixes aside). */
function allCapsSubject(subject: string): boolean {
  const s = subject.replace(/^(?:\s*(?:re|fwd?|aw|wg|rv|tr|sv)\s*:)+/i, '');
  return !/\p{Ll}/u.test(s) && (s.match(/\p{L}/gu)?.length ?? 0) >= 6 && shoutedWords(s).length > 0;
}
