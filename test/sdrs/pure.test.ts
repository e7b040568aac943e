import assert from 'node:assert/strict';
import { checkIcp, employeeCountBucket, normalizeEmployeeCount, parseIcpList, SENIORITY_VALUES, EMPLOYEE_COUNT_VALUES } from '../../src/modules/sdrs/icp.ts';
import { allowedTransitions, canTransition, THREAD_STATUSES, type ThreadStatus } from '../../src/modules/sdrs/threads-state.ts';
import { priorityScore } from '../../src/modules/sdrs/priority.ts';

describe('SDR desk: ICP check (pure)', () => {
  it('has the canonical value lists', () => {
    assert.deepEqual([...SENIORITY_VALUES], ['unpaid', 'training', 'entry', 'senior', 'manager', 'director', 'vp', 'cxo', 'partner', 'owner']);
    assert.deepEqual([...EMPLOYEE_COUNT_VALUES], ['1-10', '11-50', '51-200', '201-500', '501-1000', '1001-5000', '5001-10000', '10001+']);
  });

  it('puts whole numbers into their bucket at every boundary', () => {
    const cases: [number, string | null][] = [
      [0, null], [1, '1-10'], [10, '1-10'], [11, '11-50'], [50, '11-50'], [51, '51-200'], [200, '51-200'], [201, '201-500'],
      [500, '201-500'], [501, '501-1000'], [1000, '501-1000'], [1001, '1001-5000'], [5000, '1001-5000'], [5001, '5001-10000'],
      [10000, '5001-10000'], [10001, '10001+'], [2_000_000, '10001+'], [12.5, null], [-3, null],
    ];
    for (const [n, bucket] of cases) assert.equal(employeeCountBucket(n), bucket, String(n));
    assert.equal(normalizeEmployeeCount('250'), '201-500');
    assert.equal(normalizeEmployeeCount(' 51-200 '), '51-200');
    assert.equal(normalizeEmployeeCount('lots'), null);
  });

  it('no criteria: every known value passes; unknown values are unknown_value regardless', () => {
    assert.equal(checkIcp(null, { seniority: 'vp', employeeCount: 42 }), 'ok');
    assert.equal(checkIcp({ seniority: null, employeeCounts: [] }, { seniority: 'owner', employeeCount: '10001+' }), 'ok');
    assert.equal(checkIcp(null, { seniority: 'ceo' }), 'unknown_value');
    assert.equal(checkIcp(null, { employeeCount: '12-40' }), 'unknown_value');
    assert.equal(checkIcp({ seniority: ['vp'], employeeCounts: null }, { seniority: 'emperor' }), 'unknown_value');
    assert.equal(checkIcp(null, { employeeCount: 0 }), 'unknown_value');
  });

  it('restricted dimensions: a known value outside fails, inside passes, missing passes', () => {
    const c = { seniority: ['vp', 'cxo'], employeeCounts: ['51-200', '201-500'] };
    assert.equal(checkIcp(c, { seniority: 'vp', employeeCount: '51-200' }), 'ok');
    assert.equal(checkIcp(c, { seniority: 'CXO', employeeCount: 300 }), 'ok');
    assert.equal(checkIcp(c, { seniority: 'manager', employeeCount: 300 }), 'failed');
    assert.equal(checkIcp(c, { seniority: 'vp', employeeCount: 20 }), 'failed');
    assert.equal(checkIcp(c, { seniority: 'vp', employeeCount: '5001-10000' }), 'failed');
    assert.equal(checkIcp(c, {}), 'ok');
    assert.equal(checkIcp(c, { seniority: null, employeeCount: '' }), 'ok');
    assert.equal(checkIcp({ seniority: null, employeeCounts: ['1-10'] }, { seniority: 'intern-ish', employeeCount: 5 }), 'unknown_value');
  });

  it('parses operator lists, rejecting unknown values and dropping duplicates', () => {
    assert.deepEqual(parseIcpList('seniority', 'VP, cxo,vp'), ['vp', 'cxo']);
    assert.deepEqual(parseIcpList('employeeCount', '51-200,10001+'), ['51-200', '10001+']);
    assert.equal(parseIcpList('seniority', ' , '), null);
    assert.throws(() => parseIcpList('seniority', 'vp,ceo'), /"ceo" is not one of/);
    assert.throws(() => parseIcpList('employeeCount', '50'), /"50" is not one of/);
  });
});

describe('SDR desk: thread state machine (pure)', () => {
  const open: ThreadStatus[] = ['new', 'awaiting_reply', 'needs_followup', 'replied'];
  const lost: ThreadStatus[] = ['lost_not_interested', 'lost_timing', 'lost_competitor'];
  const expected: Record<ThreadStatus, ThreadStatus[]> = {
    new: ['meeting_booked', ...lost, 'archived'],
    awaiting_reply: ['meeting_booked', ...lost, 'archived'],
    needs_followup: ['meeting_booked', ...lost, 'archived'],
    replied: ['meeting_booked', ...lost, 'archived'],
    meeting_booked: ['won', ...lost, 'archived'],
    won: ['archived'],
    lost_not_interested: ['archived', 'new'],
    lost_timing: ['archived', 'new'],
    lost_competitor: ['archived', 'new'],
    archived: ['new'],
  };

  it('matches the contract table for every pair of statuses', () => {
    assert.equal(THREAD_STATUSES.length, 10);
    for (const from of THREAD_STATUSES) {
      assert.deepEqual(allowedTransitions(from).sort(), [...expected[from]].sort(), from);
      for (const to of THREAD_STATUSES) assert.equal(canTransition(from, to), expected[from].includes(to), `${from} -> ${to}`);
    }
    for (const s of open) assert.equal(canTransition(s, s), false);
  });

  it('returns a copy', () => {
    const a = allowedTransitions('won');
    a.push('new');
    assert.deepEqual(allowedTransitions('won'), ['archived']);
  });
});

describe('SDR desk: priorityScore (pure)', () => {
  const now = new Date('2026-04-01T12:00:00.000Z');
  const base = { category: 'B' as const, classification: 'interested', lastMessageAt: now, overdueFollowups: 0, now };

  it('adds category, classification, recency and overdue follow-ups', () => {
    assert.equal(priorityScore(base), 30 + 20 + 20);
    assert.equal(priorityScore({ ...base, category: 'A' }), 50 + 20 + 20);
    assert.equal(priorityScore({ ...base, category: 'C' }), 10 + 20 + 20);
    assert.equal(priorityScore({ ...base, classification: 'meeting_booked' }), 30 + 25 + 20);
    assert.equal(priorityScore({ ...base, classification: 'out_of_office' }), 30 + 5 + 20);
    assert.equal(priorityScore({ ...base, classification: 'not_interested' }), 30 + 0 + 20);
    assert.equal(priorityScore({ ...base, classification: null }), 30 + 10 + 20);
    assert.equal(priorityScore({ ...base, classification: 'something_else' }), 30 + 10 + 20);
  });

  it('recency halves every 24 hours; a future lastMessageAt counts as now', () => {
    assert.equal(priorityScore({ ...base, lastMessageAt: new Date(now.getTime() - 24 * 3_600_000) }), 30 + 20 + 10);
    assert.equal(priorityScore({ ...base, lastMessageAt: new Date(now.getTime() - 48 * 3_600_000) }), 30 + 20 + 5);
    assert.equal(priorityScore({ ...base, lastMessageAt: new Date(now.getTime() + 3_600_000) }), 70);
    const older = priorityScore({ ...base, lastMessageAt: new Date(now.getTime() - 5 * 3_600_000) });
    const newer = priorityScore({ ...base, lastMessageAt: new Date(now.getTime() - 4 * 3_600_000) });
    assert.ok(newer > older);
  });

  it('counts overdue follow-ups, 10 each, at most 3', () => {
    assert.equal(priorityScore({ ...base, overdueFollowups: 1 }), 80);
    assert.equal(priorityScore({ ...base, overdueFollowups: 3 }), 100);
    assert.equal(priorityScore({ ...base, overdueFollowups: 9 }), 100);
    assert.equal(priorityScore({ ...base, category: 'A', classification: 'meeting_booked', overdueFollowups: 5 }), 125);
  });

  it('an A thread outranks a C thread with the same activity', () => {
    assert.ok(priorityScore({ ...base, category: 'A' }) > priorityScore({ ...base, category: 'C', overdueFollowups: 1 }));
  });
});
