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

export function isoOrNull(value: Date | string | null | undefined): string | null {
  return value == null ? null : toDate(value).toISOString();
}
