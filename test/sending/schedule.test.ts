import assert from 'node:assert/strict';
import { firstSlot, startOfDay } from '../../src/modules/sending/schedule.ts';
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

  it('across a DST change and in an overnight window', () => {
    // New York leaves DST on Sunday 1 November 2026: Friday 30 October 09:00 is UTC-4, Monday 2 November 09:00 is UTC-5.
    assert.equal(iso(firstSlot(weekdays, new Date('2026-10-30T22:00:00Z'))), '2026-11-02T14:00:00.000Z');
    const night: Schedule = { timezone: 'Europe/Berlin', days: ['fri'], start: '22:00', end: '02:00' };
    assert.equal(iso(firstSlot(night, new Date('2026-11-09T00:00:00Z'))), '2026-11-13T21:00:00.000Z');
    assert.equal(iso(firstSlot(night, new Date('2026-11-14T00:30:00Z'))), '2026-11-14T00:30:00.000Z', "Saturday 01:30 is Friday's window");
  });
});
