// The one rule for text that may reach PostgreSQL. Its text and jsonb types refuse a NUL
// character, and the driver turns a lone UTF-16 surrogate into U+FFFD in text (silently) and
// into an invalid \ud800 escape in jsonb (refused). So: what a client sends (API bodies, query
// values, path parameters, CLI arguments) is refused when it holds either; what arrives from
// outside our control (inbound mail, remote error messages) is repaired with storableText.

/** How deep a request body may nest (objects and arrays); deeper is 400 (README, "API input"). */
export const MAX_JSON_DEPTH = 32;

const NUL = /\u0000/g;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const LONE_SURROGATE_TEST = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** A NUL or any surrogate code unit: what textProblem looks at more closely. */
const SUSPECT = /[\u0000\ud800-\udfff]/;

/** Why mailgate refuses this string, in words for an error message; null when it is fine. */
export function textProblem(s: string): string | null {
  // One scan for the usual case, text with neither (a surrogate pair passes on to the full test).
  if (!SUSPECT.test(s)) return null;
  if (s.includes('\u0000')) return 'must not contain a NUL character (\\u0000)';
  if (LONE_SURROGATE_TEST.test(s)) return 'must be valid Unicode (it holds a lone UTF-16 surrogate)';
  return null;
}

/** Lone surrogates become U+FFFD (a cut through a surrogate pair included). */
export function wellFormed(s: string): string {
  return s.replace(LONE_SURROGATE, '\ufffd');
}

/** Text from outside our control made storable: NUL removed, lone surrogates replaced. */
export function storableText(s: string): string {
  return wellFormed(s.replace(NUL, ''));
}

export function storableOrNull(s: string | null | undefined): string | null {
  return s == null ? null : storableText(s);
}

/** A refused key shown in an error: NUL spelled out, lone surrogates as U+FFFD. */
function displayable(s: string): string {
  return wellFormed(s.replace(NUL, '\\u0000'));
}

/** A field path as the API names it: `name`, `leads[3].firstName`, `emails[0]`. */
export function fieldPath(segments: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else out += out ? `.${String(s)}` : String(s);
  }
  return out;
}

export interface TextViolation {
  /** The offending field's path (a key's own path when the key is the problem). */
  field: string;
  message: string;
}

/**
 * The first string (value or object key) of a JSON value that breaks the text rule, the first
 * number too large to hold, or the first place it nests deeper than `maxDepth` (`root` itself
 * sits at `rootDepth` levels inside the body). Recursive, but never deeper than `maxDepth`
 * (a body nested 10,000 levels stops at the limit), and the path is built only for what it
 * reports: a 10,000-lead request walks its 60,000 fields without an allocation each.
 */
export function findTextViolation(root: unknown, prefix: PropertyKey[] = [], maxDepth = MAX_JSON_DEPTH, rootDepth = 0): TextViolation | null {
  return visit(root, [...prefix], rootDepth, maxDepth);
}

/** findTextViolation's walk, in document order; `path` is the value's own, pushed and popped. */
function visit(value: unknown, path: PropertyKey[], depth: number, maxDepth: number): TextViolation | null {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    return problem ? { field: fieldPath(path), message: problem } : null;
  }
  // JSON.parse turns a number past double's range (1e400) into Infinity, which jsonb would
  // store as null: refused, as a string with NUL is, instead of quietly changed.
  if (typeof value === 'number') return Number.isFinite(value) ? null : { field: fieldPath(path), message: 'is a number beyond what a double holds (about ±1.8e308)' };
  if (value === null || typeof value !== 'object') return null;
  if (depth >= maxDepth) return { field: fieldPath(path), message: `nests deeper than ${maxDepth} levels of objects and arrays` };
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      path.push(i);
      const found = visit(value[i], path, depth + 1, maxDepth);
      path.pop();
      if (found) return found;
    }
    return null;
  }
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj);
  // Keys are checked before their values (a lead's custom field name lands in jsonb too).
  for (const key of keys) {
    const problem = textProblem(key);
    if (problem) return { field: displayable(fieldPath([...path, key])), message: `field name ${problem}` };
  }
  for (const key of keys) {
    path.push(key);
    const found = visit(obj[key], path, depth + 1, maxDepth);
    path.pop();
    if (found) return found;
  }
  return null;
}

/**
 * A LIKE pattern (with `escape '\\'`) matching `s` as a plain substring: its `\`, `%` and `_`
 * escaped. Case: lower-case it in SQL (`like lower(?)`) against text PostgreSQL lower-cased,
 * never in JavaScript: the two disagree (a Turkish dotted I, a Greek final sigma, any non-ASCII
 * letter in a database whose ctype is C), and a search missed names stored exactly as typed.
 */
export function likeSubstring(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
}

