import type { Schedule, Weekday } from '../campaigns/entities.ts';

const DAYS: Record<string, Weekday> = { Mon: 'mon', Tue: 'tue', Wed: 'wed', Thu: 'thu', Fri: 'fri', Sat: 'sat', Sun: 'sun' };
const ORDER: Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

function localParts(at: Date, timeZone: string): { day: Weekday; minutes: number } {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(at);
  const get = (t: string) => parts.find((p) => p.type === t)!.value;
  return { day: DAYS[get('weekday')], minutes: Number(get('hour')) * 60 + Number(get('minute')) };
}

const toMinutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/**
 * Is `at` inside the campaign's weekly window? No schedule = always. A window whose end is
 * before its start spans midnight and belongs to the day it starts on.
 */
export function inWindow(schedule: Schedule | null, at: Date): boolean {
  if (!schedule) return true;
  const { day, minutes } = localParts(at, schedule.timezone);
  const start = toMinutes(schedule.start);
  const end = toMinutes(schedule.end);
  if (start < end) return schedule.days.includes(day) && minutes >= start && minutes < end;
  // Overnight: the evening part on a listed day, or the morning part after a listed day.
  if (minutes >= start) return schedule.days.includes(day);
  if (minutes < end) {
    const previous = ORDER[(ORDER.indexOf(day) + 6) % 7];
    return schedule.days.includes(previous);
  }
  return false;
}

/** The UTC offset of `timeZone` at `at`, in minutes (local = UTC + offset). */
function offsetMinutes(at: Date, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).formatToParts(at);
  const get = (t: string) => Number(parts.find((p) => p.type === t)!.value);
  const local = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return Math.round((local - Math.floor(at.getTime() / 1000) * 1000) / 60_000);
}

/** The instant of a local wall time (calendar day given as a UTC date) in `timeZone`. */
function zonedInstant(day: Date, minutes: number, timeZone: string): Date {
  const naive = Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate()) + minutes * 60_000;
  // Twice: the offset of the guess can differ from the offset of the answer around a DST change.
  let t = naive - offsetMinutes(new Date(naive), timeZone) * 60_000;
  t = naive - offsetMinutes(new Date(t), timeZone) * 60_000;
  return new Date(t);
}

/**
 * The start of a calendar day (a date whose UTC Y-M-D names the day, as return dates are
 * stored) where the campaign sends: its schedule's time zone, UTC without a schedule.
 */
export function startOfDay(schedule: Schedule | null, day: Date): Date {
  const midnight = Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate());
  if (!schedule) return new Date(midnight);
  const t = zonedInstant(day, 0, schedule.timezone);
  // Clocks that jump forward at 00:00 (Chile, Cuba, Paraguay) skip the day's midnight, and
  // zonedInstant answers an instant of the day before (23:00). The day starts when they jump:
  // midnight at the offset before the change (the offset at that earlier instant).
  const offset = offsetMinutes(t, schedule.timezone);
  if (t.getTime() + offset * 60_000 < midnight) return new Date(midnight - offset * 60_000);
  return t;
}

/**
 * The first instant at or after `from` when the campaign may send: `from` itself when it is in
 * the window, else the next opening of the window (at most a week and a day away).
 */
export function firstSlot(schedule: Schedule | null, from: Date): Date {
  if (!schedule || inWindow(schedule, from)) return from;
  const start = toMinutes(schedule.start);
  const localDay = new Date(from.getTime() + offsetMinutes(from, schedule.timezone) * 60_000);
  for (let k = 0; k <= 8; k++) {
    const opening = openingNear(schedule, start, zonedInstant(new Date(localDay.getTime() + k * 86_400_000), start, schedule.timezone), from);
    if (opening) return opening;
  }
  // A schedule with no listed day never opens; the dispatcher would never send either.
  return from;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Whether the window opens exactly at `t`: in it, its local time the start, not in it a minute before. */
function opensAt(schedule: Schedule, start: number, t: Date): boolean {
  return inWindow(schedule, t) && localParts(t, schedule.timezone).minutes === start && !inWindow(schedule, new Date(t.getTime() - MINUTE));
}

/**
 * The window's opening after `from` near `guess` (the start's wall time on one day), or null.
 * On a day the clocks change the wall time can name no instant (the hour skipped going
 * forward: the window opens when the clocks jump past the start) or two (the hour repeated
 * going back: it opens at the first); then the first minute in the window within three hours
 * of the guess is the opening.
 */
function openingNear(schedule: Schedule, start: number, guess: Date, from: Date): Date | null {
  const g = guess.getTime();
  const shift = offsetMinutes(new Date(g - 3 * HOUR), schedule.timezone) - offsetMinutes(new Date(g + 3 * HOUR), schedule.timezone);
  // No change of the clocks near it (every day but two a year): the wall time is one instant.
  if (shift === 0) return guess > from && inWindow(schedule, guess) ? guess : null;
  if (opensAt(schedule, start, guess)) {
    // Clocks going back by `shift` minutes: the same wall time came once before.
    const first = new Date(g - shift * MINUTE);
    if (shift > 0 && first > from && opensAt(schedule, start, first)) return first;
    return guess > from ? guess : null;
  }
  for (let t = g - 3 * HOUR; t <= g + 3 * HOUR; t += MINUTE) {
    if (t > from.getTime() && inWindow(schedule, new Date(t))) return new Date(t);
  }
  return null;
}

/**
 * When a message due at `due` can go, as far as the campaign's window says (`nextSendAt` of the
 * leads' listing): its due time when that is inside the window, else the window's next opening
 * after it. A time that has come while the window is closed now (a message due on Saturday,
 * waiting past Monday's window for capacity) is the next opening after `now`.
 */
export function sendableAt(schedule: Schedule | null, due: Date, now: Date): Date {
  const at = firstSlot(schedule, due);
  return at <= now && !inWindow(schedule, now) ? firstSlot(schedule, now) : at;
}
