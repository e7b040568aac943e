import assert from 'node:assert/strict';
import pg from 'pg';
import { toDate, toIso } from '../../src/shared/time.ts';

describe('toIso: timestamps to ISO 8601 UTC with milliseconds', () => {
  it('rewrites PostgreSQL UTC text exactly as parsing it into a Date would', () => {
    const cases: [string, string][] = [
      ['2026-04-01 08:00:00+00', '2026-04-01T08:00:00.000Z'],
      ['2026-04-01 08:00:00.1+00', '2026-04-01T08:00:00.100Z'],
      ['2026-04-01 08:00:00.12+00', '2026-04-01T08:00:00.120Z'],
      ['2026-04-01 08:00:00.123+00', '2026-04-01T08:00:00.123Z'],
      ['2026-04-01 23:59:59.999999+00', '2026-04-01T23:59:59.999Z'],
      ['0099-12-31 00:00:00.5+00', '0099-12-31T00:00:00.500Z'],
    ];
    for (const [pgText, iso] of cases) {
      assert.equal(toIso(pgText), iso, pgText);
      assert.equal(toIso(pgText), toDate(pgText).toISOString(), pgText);
    }
  });

  it('takes the general path for other offsets, Dates, and answers an error for garbage', () => {
    assert.equal(toIso('2026-04-01 10:00:00.25+02'), '2026-04-01T08:00:00.250Z');
    assert.equal(toIso('2026-04-01 08:00:00+05:30'), '2026-04-01T02:30:00.000Z');
    assert.equal(toIso(new Date('2026-04-01T08:00:00.123Z')), '2026-04-01T08:00:00.123Z');
    assert.throws(() => toIso('yesterday'), /unparseable timestamp/);
  });

  it('matches what PostgreSQL prints for timestamps across fractions and years', async () => {
    const db = new pg.Client({ connectionString: process.env.MAILGATE_TEST_ADMIN_URL });
    await db.connect();
    try {
      // Text as a UTC session prints it (the ORM's sessions are UTC: test/db/sql.test.ts), and the instant as epoch ms.
      await db.query(`set timezone = 'UTC'`);
      const { rows } = await db.query(
        `select t::text as text, floor(extract(epoch from t) * 1000)::bigint::text as ms
           from (select timestamptz '2026-01-01 00:00:00+00' + (i * 7919.123457 || ' seconds')::interval + (i || ' years')::interval as t
                   from generate_series(-1900, 7000, 37) i) x`,
      );
      assert.ok(rows.length > 200);
      for (const r of rows) assert.equal(toIso(r.text), new Date(Number(r.ms)).toISOString(), r.text);
    } finally {
      await db.end();
    }
  });
});
