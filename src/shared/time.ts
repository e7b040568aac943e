import { z } from 'zod';

/**
 * Timestamps from hand-written SQL arrive as PostgreSQL text (MikroORM sets the driver to
 * return dates as strings); from the ORM as Date. Both become ISO 8601 UTC with milliseconds.
 */
export function toDate(value: Date | string): Date {
  if (value instanceof Date) return value;
  // "2026-04-01 08:00:00.123+00" -> "2026-04-01T08:00:00.123+00:00"
  const normalized = value.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00');
  const d = new Date(normalized);
  if (Number.isNaN(d.getTime())) throw new Error(`unparseable timestamp: ${value}`);
  return d;
}

// PostgreSQL's text of a timestamptz in a UTC session (every session of the ORM's pool is one,
// db/orm.ts): "2026-04-01 08:00:00.123456+00".
const PG_UTC = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;

/**
 * ISO 8601 UTC with milliseconds, as `toDate(value).toISOString()` gives (extra fraction digits
 * truncated). PostgreSQL's UTC text is rewritten without parsing a Date (a page of 50 threads
 * has 150 timestamps); anything else takes the general path.
 */
export function toIso(value: Date | string): string {
  if (typeof value === 'string') {
    const m = PG_UTC.exec(value);
    if (m) return `${m[1]}T${m[2]}.${m[3] === undefined ? '000' : m[3].length >= 3 ? m[3].slice(0, 3) : m[3].padEnd(3, '0')}Z`;
  }
  return toDate(value).toISOString();
}

export function isoOrNull(value: Date | string | null | undefined): string | null {
  return value == null ? null : toIso(value);
}

/**
 * A date-time whose offset's `+` became a space: in a query string `+` means a space, so
 * `?since=2026-05-04T10:00:00+02:00` sent unencoded arrives as `...10:00:00 02:00`. Refused
 * like any malformed value, but saying why (until 2026-11-29 the answer asked for a time zone
 * the client had written).
 */
const SPACED_OFFSET = /^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)? \d\d(?::?\d\d)?$/;
const SPACED_OFFSET_MESSAGE =
  'must be an ISO 8601 date-time with a time zone; the + of its offset arrived as a space (in a URL query, + means a space): write it as %2B (2025-01-31T09:00:00%2B02:00) or give the time in UTC (2025-01-31T07:00:00Z)';

/** The first and last instants an API date-time may name (UTC): years 0001 to 9999. */
export const EARLIEST_INSTANT_MS = Date.parse('0001-01-01T00:00:00.000Z');
export const LATEST_INSTANT_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An ISO 8601 date-time with a time zone, as the API takes one, within years 0001 to 9999 once
 * in UTC. PostgreSQL keeps later and earlier instants (`10000-01-01 ...`, `... BC`), but they
 * have no ISO 8601 text of the contract's form, so they are refused at the door: a snooze until
 * 9999-12-31T23:00:00-14:00 (10000-01-01 in UTC) is 400, not a stored value every later read
 * of the thread would fail on.
 */
export function isoDateTimeInput() {
  // abort: a value that is no date-time is that one problem, without the range check's too.
  return z.iso.datetime({ offset: true, abort: true, error: (iss) => (typeof iss.input === 'string' && SPACED_OFFSET.test(iss.input) ? SPACED_OFFSET_MESSAGE : undefined) }).refine(
    (s) => {
      const t = Date.parse(s);
      return t >= EARLIEST_INSTANT_MS && t <= LATEST_INSTANT_MS;
    },
    { error: 'must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once in UTC' },
  );
}
