import assert from 'node:assert/strict';
import pg from 'pg';
import { createTestDatabase, LogSink } from '../support/harness.ts';
import { createLogger } from '../../src/adapters/logger.ts';
import { JobRunner } from '../../src/jobs/agenda.ts';
import { waitFor } from '../support/wait.ts';

// Agenda's liveness check of a running job (every half lock lifetime) reads the job's lockedAt,
// which Agenda itself clears as the job finishes, before it saves the job. A check that falls
// in that window "cancels" a job that has already finished and emits it as an error: a
// black-box probe saw "execution ... canceled, no lockedAt date found" twice at error level in
// a healthy daemon. Here the save is held by a row lock, so the check always falls in it.
//
// The lock lifetime (4 s, so the check comes every 2 s) must stay well above processEvery:
// Agenda locks the next round up to processEvery before it is due, and when the round's timer
// fires a millisecond early it waits for the next scan; a round whose lock has aged past its
// lifetime by then is dropped from Agenda's queue but still counted as locked, and never runs
// again in that process. With a 1 s lifetime that happened about one run in six.
describe('the job runner', function () {
  this.timeout(30_000);
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: pg.Client;
  before(async () => {
    database = await createTestDatabase();
    db = new pg.Client({ connectionString: database.url });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await database.drop();
  });

  it('does not report a round that finished as it was checked as an error: the round ran once and its next run comes', async () => {
    const sink = new LogSink();
    const log = createLogger('debug', sink);
    let runs = 0;
    let held = false;
    const runner = new JobRunner(
      database.url,
      [
        {
          name: 'probe',
          every: '1 second',
          lockLifetimeMs: 4_000,
          run: async () => {
            runs++;
            if (held) return;
            held = true;
            // Holds the job's row until released: Agenda's save after the round waits for it.
            await db.query('begin');
            await db.query(`select 1 from agenda_jobs where name = 'probe' for update`);
          },
        },
      ],
      log,
      { processEvery: '1 second' },
    );
    await runner.start();
    try {
      await waitFor('the liveness check to meet the finished round', async () => /no lockedAt date found/.test(sink.text), 10_000);
      await db.query('commit');
      await waitFor('the next round', async () => runs >= 2, 10_000);
    } finally {
      await db.query('rollback').catch(() => {});
      await runner.stop(5_000);
    }
    const lines = sink.lines.flatMap((l) => l.trim().split('\n')).map((l) => JSON.parse(l) as { level: number; msg: string });
    const errors = lines.filter((l) => l.level >= 50);
    assert.deepEqual(errors.map((l) => l.msg), [], 'nothing at error level');
    assert.ok(lines.some((l) => l.level === 20 && /no lockedAt date found/.test(JSON.stringify(l))), 'the benign race is logged at debug level');
  });
});
