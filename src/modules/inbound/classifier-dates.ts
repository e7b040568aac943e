import { MONTHS } from './lexicon.ts';

// Best-effort return date of an out-of-office reply: the first date the text ties to coming
// back ("back on 12 May", "ab dem 13.05. wieder", "de retour le 12 mai") or, failing that, to
// the end of the absence ("until 12 May", "bis einschließlich 12.05." = the day after).
// Dates without a year take the first such day not long before the reference (the reply's
// Date header). A date is returned as midnight UTC of that calendar day.

const RETURN_BEFORE =
  /(back|return|returning|in the office|zurück|wieder|retour|reprendrai|regreso|regresaré|regresare|vuelta|volveré|retorno|retornarei|volta|voltarei|terug|weer)(?![\p{L}])[^.!?\n]{0,40}$/iu;
// A return word leading to the next date in the same clause ("and back on", ", de retour le"):
// RETURN_BEFORE without a comma or semicolon between the word and the date.
const RETURN_LEADS =
  /(back|return|returning|in the office|zurück|wieder|retour|reprendrai|regreso|regresaré|regresare|vuelta|volveré|retorno|retornarei|volta|voltarei|terug|weer)(?![\p{L}])[^.!?\n,;]{0,40}$/iu;
const RETURN_AFTER = /^[^.!?\n]{0,25}(?<![\p{L}])(wieder|weer|back|de retour|de volta|de vuelta)(?![\p{L}])/iu;
const UNTIL_BEFORE = /(?<![\p{L}])(until|till|through|to|bis|jusqu'au|jusqu’au|jusqu'à|jusqu'en|hasta|até|tot|t\/m|tot en met)(?![\p{L}])[^.!?\n]{0,25}$/iu;
const INCLUSIVE = /(through|einschließlich|einschl\.|inclus|inclusive|incluído|incluido|tot en met|t\/m)/iu;

interface Found {
  index: number;
  end: number;
  year: number | null;
  month: number;
  day: number;
}

const alternation = (names: string[]) =>
  names
    .sort((a, b) => b.length - a.length)
    .map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|');
const MONTH_NAMES = alternation(Object.keys(MONTHS));
// Before a day number, Portuguese "out"/"set" are far more often the English words.
const LEADING_MONTH_NAMES = alternation(Object.keys(MONTHS).filter((m) => m !== 'out' && m !== 'set'));

// "12 May 2026", "12. Mai", "12 de mayo de 2026", "12th of May", "12-mei"
const DAY_MONTH = new RegExp(`(?<![\\p{L}\\p{N}])(\\d{1,2})(?:st|nd|rd|th|er|º|°)?\\.?\\s*(?:of\\s+|de\\s+|-)?(${MONTH_NAMES})\\.?(?![\\p{L}])(?:,?\\s*(?:de\\s+)?(\\d{4}))?`, 'giu');
// "May 12", "May 12th, 2026"
const MONTH_DAY = new RegExp(`(?<![\\p{L}\\p{N}])(${LEADING_MONTH_NAMES})\\.?\\s+(\\d{1,2})(?:st|nd|rd|th)?(?![\\p{N}])(?:,?\\s*(\\d{4}))?`, 'giu');
// "March 2027" (a month without a day: its first day)
const MONTH_YEAR = new RegExp(`(?<![\\p{L}\\p{N}])(${LEADING_MONTH_NAMES})\\.?\\s+(?:de\\s+)?(\\d{4})(?![\\p{N}])`, 'giu');
// "2026-05-12"
const ISO = /(?<![\d])(\d{4})-(\d{2})-(\d{2})(?![\d])/g;
// "12.05.", "12.05.2026", "12/05/2026", "12-05-2026"
const NUMERIC = /(?<![\d./-])(\d{1,2})([./-])(\d{1,2})(?:\2(\d{4}|\d{2}))?\.?(?![\d/-])/g;

export function extractReturnDate(text: string, reference: Date | null, monthFirst = false): Date | null {
  const found = findDates(text, monthFirst);
  let best: { found: Found; rank: number; plusOne: boolean } | null = null;
  for (const [i, f] of found.entries()) {
    const before = text.slice(Math.max(0, f.index - 60), f.index);
    const after = text.slice(f.end, f.end + 40);
    // A return word after a date ties it to coming back ("ab dem 13.05. wieder") unless it is
    // the next date's ("until 11 May, back on 12 May"; "from 21 Dec through 1 Jan and back on
    // 4 Jan"): it leads to that date in the same clause. "ab dem 7. Januar wieder im Büro, vom
    // 23.12. bis ..." keeps its "wieder" for 7 January.
    const next = found[i + 1];
    const gap = next ? text.slice(f.end, next.index) : after;
    const backAfter = RETURN_AFTER.test(gap.slice(0, 40)) && !(next && RETURN_LEADS.test(gap));
    let rank = 0;
    let plusOne = false;
    if (RETURN_BEFORE.test(before) || backAfter) rank = 2;
    else if (UNTIL_BEFORE.test(before)) {
      rank = 1;
      plusOne = INCLUSIVE.test(before.slice(-30)) || INCLUSIVE.test(after.slice(0, 15));
    }
    if (rank > 0 && (!best || rank > best.rank)) best = { found: f, rank, plusOne };
  }
  if (!best) return null;
  const date = toDate(best.found, reference);
  if (!date) return null;
  if (best.plusOne) date.setUTCDate(date.getUTCDate() + 1);
  return date;
}

function findDates(text: string, monthFirst: boolean): Found[] {
  const out: Found[] = [];
  const taken = (i: number, end: number) => out.some((f) => i < f.end && end > f.index);
  for (const m of text.matchAll(ISO)) {
    out.push({ index: m.index!, end: m.index! + m[0].length, year: Number(m[1]), month: Number(m[2]), day: Number(m[3]) });
  }
  for (const m of text.matchAll(DAY_MONTH)) {
    const end = m.index! + m[0].length;
    if (taken(m.index!, end)) continue;
    out.push({ index: m.index!, end, year: m[3] ? Number(m[3]) : null, month: MONTHS[m[2].toLowerCase()], day: Number(m[1]) });
  }
  for (const m of text.matchAll(MONTH_DAY)) {
    const end = m.index! + m[0].length;
    if (taken(m.index!, end)) continue;
    out.push({ index: m.index!, end, year: m[3] ? Number(m[3]) : null, month: MONTHS[m[1].toLowerCase()], day: Number(m[2]) });
  }
  for (const m of text.matchAll(MONTH_YEAR)) {
    const end = m.index! + m[0].length;
    if (taken(m.index!, end)) continue;
    out.push({ index: m.index!, end, year: Number(m[2]), month: MONTHS[m[1].toLowerCase()], day: 1 });
  }
  for (const m of text.matchAll(NUMERIC)) {
    const end = m.index! + m[0].length;
    if (taken(m.index!, end)) continue;
    // "12.05" without a trailing dot or a year is more likely a time or a number than a date,
    // and "9-5" more likely a range.
    if (!m[4] && ((m[2] === '.' && !m[0].endsWith('.')) || m[2] === '-')) continue;
    const [a, b] = [Number(m[1]), Number(m[3])];
    let [day, month] = [a, b];
    // Slashes in English mail are month first; a part above 12 settles it either way.
    if ((b > 12 && a <= 12) || (a <= 12 && b <= 12 && monthFirst && m[2] === '/')) [day, month] = [b, a];
    const year = m[4] ? (m[4].length === 2 ? 2000 + Number(m[4]) : Number(m[4])) : null;
    out.push({ index: m.index!, end, year, month, day });
  }
  return out.filter((f) => f.month >= 1 && f.month <= 12 && f.day >= 1 && f.day <= 31).sort((a, b) => a.index - b.index);
}

function toDate(f: Found, reference: Date | null): Date | null {
  let year = f.year;
  if (year === null) {
    if (!reference) return null;
    // The first such day not well before the reply was written: "back on 5 January" in
    // December is next year, "until 31 December" read on 2 January (an auto-reply left on, or
    // written on New Year's Eve in New York, already 1 January in UTC) is last year, not a year on.
    const earliest = reference.getTime() - 14 * 86_400_000;
    year = reference.getUTCFullYear() - 1;
    while (Date.UTC(year, f.month - 1, f.day) < earliest) year += 1;
  }
  const date = new Date(Date.UTC(year, f.month - 1, f.day));
  return date.getUTCMonth() === f.month - 1 ? date : null;
}
