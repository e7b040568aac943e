// The dashboard's relative times (web/src/time.ts) where the browser is: a Berlin operator's
// "tomorrow" is the next date, across the clocks' changes too.
import assert from 'node:assert/strict';
import { relative } from '../../web/src/time.ts';

describe('dashboard relative times', () => {
  const tz = process.env.TZ;
  before(() => {
    process.env.TZ = 'Europe/Berlin';
  });
  after(() => {
    if (tz === undefined) delete process.env.TZ;
    else process.env.TZ = tz;
  });
  const at = (iso: string, now: string) => relative(iso, Date.parse(now));

  it('more than 18 hours away on the same date is hours, not "tomorrow" or "yesterday"', () => {
    // 01:00 -> 20:00 in Berlin on Monday 30 November: due today (the follow-ups page says so beside it).
    assert.equal(at('2026-11-30T19:00:00Z', '2026-11-30T00:00:00Z'), 'in 19 hours');
    assert.equal(at('2026-11-30T00:00:00Z', '2026-11-30T19:00:00Z'), '19 hours ago');
  });

  it('days are calendar dates: the next one is "tomorrow" however many hours away', () => {
    assert.equal(at('2026-12-01T22:30:00Z', '2026-11-29T23:30:00Z'), 'tomorrow', 'Monday 00:30 -> Tuesday 23:30 (47 hours)');
    assert.equal(at('2026-12-01T04:00:00Z', '2026-11-30T09:00:00Z'), 'tomorrow');
    assert.equal(at('2026-12-02T04:00:00Z', '2026-11-30T22:00:00Z'), 'in 2 days', 'Monday 23:00 -> Wednesday 05:00 (30 hours)');
    assert.equal(at('2026-11-29T04:00:00Z', '2026-11-30T09:00:00Z'), 'yesterday');
    // Across the spring-forward night (Sunday 29 March 2026): Saturday 09:00 -> Monday 09:00 is two dates on.
    assert.equal(at('2026-03-30T07:00:00Z', '2026-03-28T08:00:00Z'), 'in 2 days');
  });

  it('seconds, minutes and hours by the clock', () => {
    const now = '2026-11-30T09:00:00Z';
    assert.equal(at('2026-11-30T09:00:30Z', now), 'in a few seconds');
    assert.equal(at('2026-11-30T08:59:30Z', now), 'just now');
    assert.equal(at('2026-11-30T09:20:00Z', now), 'in 20 minutes');
    assert.equal(at('2026-11-30T06:00:00Z', now), '3 hours ago');
    // 22:00 -> 03:00 the next date, 5 hours on: hours, as before.
    assert.equal(at('2026-12-01T02:00:00Z', '2026-11-30T21:00:00Z'), 'in 5 hours');
  });
});
