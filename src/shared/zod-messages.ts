import { z } from 'zod';

// The wording of every validation failure that a schema does not word itself. Installed once,
// globally (z.config), so API requests, settings and CLI options all say what is expected in
// the same words instead of zod's defaults ("Too big: expected number to be <=500",
// "Invalid input"). A message written on a schema (`.min(1, 'must not be empty')`) still wins.

type Issue = z.core.$ZodRawIssue;

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
  bigint: 'an integer',
  date: 'a date',
  null: 'null',
};

function describeInput(input: unknown): string {
  if (input === undefined) return 'nothing';
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'an array';
  if (typeof input === 'number') return Number.isFinite(input) ? `the number ${input}` : 'a number out of range';
  if (typeof input === 'string') return input.length > 40 ? 'a string' : `"${input}"`;
  return `${typeof input === 'object' ? 'an' : 'a'} ${typeof input}`;
}

function quoteAll(values: readonly unknown[]): string {
  return values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ');
}

function unit(origin: string | undefined, n: number | bigint): string {
  if (origin === 'string') return `${n} character${n === 1 ? '' : 's'}`;
  if (origin === 'array' || origin === 'set') return `${n} item${n === 1 ? '' : 's'}`;
  if (origin === 'file') return `${n} bytes`;
  return String(n);
}

const FORMATS: Record<string, string> = {
  email: 'a valid email address',
  url: 'a URL',
  datetime: 'an ISO 8601 date-time with a time zone, e.g. 2025-01-31T09:00:00Z',
  date: 'an ISO 8601 date (YYYY-MM-DD)',
  time: 'a time (HH:MM[:SS])',
  uuid: 'a UUID',
};

/** Our words for one issue; undefined lets zod's locale speak (never reached by our schemas). */
export function issueMessage(iss: Issue): string | undefined {
  switch (iss.code) {
    case 'invalid_type': {
      if (iss.input === undefined) return 'is required';
      const expected = TYPE_NAMES[iss.expected] ?? iss.expected;
      if (iss.expected === 'int' && typeof iss.input === 'number') return `must be an integer, not ${iss.input}`;
      return `must be ${expected}, not ${describeInput(iss.input)}`;
    }
    case 'too_big': {
      const max = iss.maximum as number | bigint;
      if (iss.origin === 'number' || iss.origin === 'bigint') return iss.inclusive ? `must be at most ${max}` : `must be less than ${max}`;
      if (iss.origin === 'date') return `must be at or before ${new Date(Number(max)).toISOString()}`;
      return `must have at most ${unit(iss.origin, max)}`;
    }
    case 'too_small': {
      const min = iss.minimum as number | bigint;
      if (iss.origin === 'number' || iss.origin === 'bigint') return iss.inclusive ? `must be at least ${min}` : `must be greater than ${min}`;
      if (iss.origin === 'date') return `must be at or after ${new Date(Number(min)).toISOString()}`;
      if (Number(min) === 1 && iss.origin === 'string') return 'must not be empty';
      if (Number(min) === 1 && iss.origin === 'array') return 'must have at least one item';
      return `must have at least ${unit(iss.origin, min)}`;
    }
    case 'invalid_value':
      return iss.values.length === 1
        ? `must be ${JSON.stringify(iss.values[0])}, not ${describeInput(iss.input)}`
        : `must be one of: ${quoteAll(iss.values)} (got ${describeInput(iss.input)})`;
    case 'invalid_format': {
      const f = iss.format as string;
      if (f === 'starts_with' || f === 'ends_with' || f === 'includes') return `must ${f.replace('_', ' ')} "${(iss as { prefix?: string; suffix?: string; includes?: string }).prefix ?? (iss as { suffix?: string }).suffix ?? (iss as { includes?: string }).includes}"`;
      if (f === 'regex') return `does not have the expected format (${String(iss.pattern)})`;
      return `must be ${FORMATS[f] ?? `in ${f} format`}`;
    }
    case 'not_multiple_of':
      return `must be a multiple of ${iss.divisor}`;
    case 'unrecognized_keys':
      return `unknown field${iss.keys.length === 1 ? '' : 's'}: ${iss.keys.join(', ')}`;
    case 'invalid_key':
      return 'has an invalid key';
    case 'invalid_element':
      return 'has an invalid item';
    case 'invalid_union': {
      // A union of a value and a list of it (a repeatable query parameter): the branch that
      // says which values are allowed says it best. For a list, that is the list branch's
      // issue about the failing item (`?classification=interested&classification=foo` names
      // "foo"): the single-value branch only says it got an array, which the parameter takes
      // (until 2026-11-29 that was the message).
      const branches = (iss.errors ?? []) as Array<Array<{ code: string; message: string; path?: PropertyKey[] }>>;
      const flat = branches.flat();
      const best = flat.find((i) => (i.path?.length ?? 0) > 0) ?? flat.find((i) => i.code !== 'invalid_type') ?? flat[0];
      return best?.message ?? 'does not match any accepted form';
    }
    case 'custom':
      return 'is not valid';
    default:
      return undefined;
  }
}

z.config({ customError: issueMessage });
