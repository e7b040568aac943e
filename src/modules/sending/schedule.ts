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
