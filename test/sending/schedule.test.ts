import assert from 'node:assert/strict';
import { firstSlot, inWindow, sendableAt, startOfDay } from '../../src/modules/sending/schedule.ts';
import type { Schedule } from '../../src/modules/campaigns/entities.ts';

// The first sending slot after an out-of-office return date (issue 19 §3).
describe('schedule: first sending slot', () => {
  const weekdays: Schedule = { timezone: 'America/New_York', days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '17:00' };
  const iso = (d: Date) => d.toISOString();

  it('a return day starts at local midnight; the slot is the window opening that day, or the next listed day', () => {
    const tue = startOfDay(weekdays, new Date('2026-11-10T00:00:00Z'));
    assert.equal(iso(tue), '2026-11-10T05:00:00.000Z');
    assert.equal(iso(firstSlot(weekdays, tue)), '2026-11-10T14:00:00.000Z');
    const sat = startOfDay(weekdays, new Date('2026-11-14T00:00:00Z'));
    assert.equal(iso(firstSlot(weekdays, sat)), '2026-11-16T14:00:00.000Z', 'Saturday -> Monday 09:00');
    assert.equal(iso(firstSlot(weekdays, new Date('2026-11-10T15:00:00Z'))), '2026-11-10T15:00:00.000Z', 'inside the window: now');
    assert.equal(iso(firstSlot(null, new Date('2026-11-10T00:00:00Z'))), '2026-11-10T00:00:00.000Z', 'no schedule: any time');
  });

  it("when a message can go (a lead's nextSendAt): its due time inside the window, else the next opening; a due time passed while the window is closed now, the next opening after now", () => {
    const at = (due: string, now: string, schedule: Schedule | null = weekdays) => iso(sendableAt(schedule, new Date(due), new Date(now)));
    // Tuesday 10 November: 15:00Z is 10:00 in New York, inside 09:00-17:00.
    assert.equal(at('2026-11-10T15:00:00Z', '2026-11-10T12:00:00Z'), '2026-11-10T15:00:00.000Z', 'due inside the window');
    assert.equal(at('2026-11-14T15:00:00Z', '2026-11-10T12:00:00Z'), '2026-11-16T14:00:00.000Z', 'due on Saturday: Monday 09:00');
    assert.equal(at('2026-11-10T15:00:00Z', '2026-11-10T16:00:00Z'), '2026-11-10T15:00:00.000Z', 'overdue, the window open now: its due time');
    assert.equal(at('2026-11-10T15:00:00Z', '2026-11-10T23:00:00Z'), '2026-11-11T14:00:00.000Z', 'overdue, the window closed now: the next opening');
    assert.equal(at('2026-11-14T15:00:00Z', '2026-11-10T12:00:00Z', null), '2026-11-14T15:00:00.000Z', 'no schedule: the due time');
  });

  it('across a DST change and in an overnight window', () => {
    // New York leaves DST on Sunday 1 November 2026: Friday 30 October 09:00 is UTC-4, Monday 2 November 09:00 is UTC-5.
    assert.equal(iso(firstSlot(weekdays, new Date('2026-10-30T22:00:00Z'))), '2026-11-02T14:00:00.000Z');
    const night: Schedule = { timezone: 'Europe/Berlin', days: ['fri'], start: '22:00', end: '02:00' };
    assert.equal(iso(firstSlot(night, new Date('2026-11-09T00:00:00Z'))), '2026-11-13T21:00:00.000Z');
    assert.equal(iso(firstSlot(night, new Date('2026-11-14T00:30:00Z'))), '2026-11-14T00:30:00.000Z', "Saturday 01:30 is Friday's window");
  });

  it('a window opening in the hour the clocks skip or repeat: the first minute inWindow allows, as a minute-by-minute scan finds it', () => {
    // Before: Berlin 02:30 on 29 March gave 03:30 (inWindow opens at 03:00), New York 02:30 on
    // 8 March gave the next Sunday, and Berlin 02:30 on 25 October gave the repeated hour's
    // second 02:30 instead of its first.
    const days: Array<[string, string, string]> = [
      ['Europe/Berlin', 'sun', '2026-03-28T18:00:00Z'],
      ['Europe/Berlin', 'sun', '2026-10-24T18:00:00Z'],
      ['America/New_York', 'sun', '2026-03-07T18:00:00Z'],
      ['America/New_York', 'sun', '2026-10-31T18:00:00Z'],
      ['Australia/Lord_Howe', 'sun', '2026-04-04T06:00:00Z'], // clocks go back 30 minutes
    ];
    let checked = 0;
    for (const [timezone, day, from] of days) {
      for (let m = 0; m <= 4 * 60; m += 15) {
        const start = `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
        const schedule: Schedule = { timezone, days: [day as Schedule['days'][number]], start, end: '06:00' };
        if (start === schedule.end) continue;
        let t = new Date(from).getTime();
        while (!inWindow(schedule, new Date(t))) t += 60_000;
        assert.equal(iso(firstSlot(schedule, new Date(from))), new Date(t).toISOString(), `${timezone} ${start} from ${from}`);
        checked++;
      }
    }
    assert.equal(checked, 85);
  });
  it('a return day whose midnight the clocks skip starts when they jump (01:00), not at 23:00 the day before', () => {
    // Chile and Cuba move their clocks forward at 00:00: on Sunday 6 September 2026 Santiago goes
    // from Saturday 23:59:59 (UTC-4) to Sunday 01:00 (UTC-3); Havana on Sunday 8 March 2026.
    const allWeek: Schedule['days'] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
    const santiago: Schedule = { timezone: 'America/Santiago', days: allWeek, start: '06:00', end: '23:59' };
    assert.equal(iso(startOfDay(santiago, new Date('2026-09-06T00:00:00Z'))), '2026-09-06T04:00:00.000Z');
    // A window open late on Saturday: the lead back on Sunday got the step on Saturday at 23:00.
    assert.equal(iso(firstSlot(santiago, startOfDay(santiago, new Date('2026-09-06T00:00:00Z')))), '2026-09-06T09:00:00.000Z', 'Sunday 06:00 (UTC-3)');
    const havana: Schedule = { timezone: 'America/Havana', days: allWeek, start: '20:00', end: '02:00' };
    assert.equal(iso(startOfDay(havana, new Date('2026-03-08T00:00:00Z'))), '2026-03-08T05:00:00.000Z');
    // Days whose midnight exists are unchanged.
    assert.equal(iso(startOfDay(santiago, new Date('2026-09-07T00:00:00Z'))), '2026-09-07T03:00:00.000Z');
    assert.equal(iso(startOfDay(santiago, new Date('2026-04-05T00:00:00Z'))), '2026-04-05T04:00:00.000Z', 'clocks going back at 24:00 on Saturday: Sunday midnight is one instant');
  });
});
