import assert from 'node:assert/strict';
import pg from 'pg';
import { createTestDatabase, LogSink } from '../support/harness.ts';
import { createLogger } from '../../src/adapters/logger.ts';
import { JobRunner } from '../../src/jobs/agenda.ts';
import { waitFor } from '../support/wait.ts';
import { freezingProxy } from '../support/freezing-proxy.ts';

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

  it('with the database down, its notification channel reconnects every few seconds, logged once, and is back after; Agenda\'s failures logged once', async () => {
    // Found by a review (2026-11-29): Agenda's channel tried again 100 ms after every failed
    // try, each failure logged twice at warn: 20 lines a second for as long as the database was
    // down; and each job's look for its next round logged an error every second.
    const proxy = await freezingProxy(new URL(database.url));
    const url = new URL(database.url);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const sink = new LogSink();
    const runner = new JobRunner(url.toString(), [{ name: 'quiet', every: '1 hour', run: async () => {} }], createLogger('info', sink), { processEvery: '1 second' });
    await runner.start();
    try {
      const channelLines = () => sink.text.split('\n').filter((l) => l.includes('notification channel')).length;
      proxy.down();
      await waitFor('the channel failing', async () => channelLines() > 0);
      // Three seconds of outage: Agenda's own tries (one a 100 ms) would have logged ~60 lines.
      await new Promise((r) => setTimeout(r, 3_000));
      assert.equal(channelLines(), 1, sink.text);
      // Agenda's look for the job's next round failing every second: one error line, not one a second.
      assert.equal(sink.text.split('\n').filter((l) => l.includes('"agenda error')).length, 1, sink.text);
      proxy.up();
      await waitFor('the channel back', async () => /the job notification channel is back/.test(sink.text), 10_000);
    } finally {
      await runner.stop(1_000);
      await proxy.close();
    }
  });
});
