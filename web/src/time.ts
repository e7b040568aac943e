// Relative times as the dashboard shows them ("3 minutes ago", "tomorrow"). No Preact: tests
// import it (test/dashboard/relative-time.test.ts).

/** The browser's calendar date of an instant, as a day number (DST-proof: from its Y-M-D). */
function localDay(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getFullYear(), d.getMonth(), d.getDate()) / 86_400_000;
}

/**
 * `iso` relative to `now`: seconds, minutes and hours by the clock, days by the calendar where
 * the browser is. "tomorrow" and "yesterday" name the next and previous date: 19 hours from
 * 01:00 is "in 19 hours" (it is today), not "tomorrow" beside a "due today".
 */
export function relative(iso: string, now = Date.now()): string {
  const t = new Date(iso).getTime();
  const s = Math.round((t - now) / 1000);
  const a = Math.abs(s);
  if (a < 45) return s > 0 ? 'in a few seconds' : 'just now';
  const format = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
  if (a < 2700) return format.format(Math.round(s / 60), 'minute');
  const days = localDay(t) - localDay(now);
  if (a < 64800 || days === 0) return format.format(Math.round(s / 3600), 'hour');
  return format.format(days, 'day');
}
