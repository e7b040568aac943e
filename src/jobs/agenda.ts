import { Agenda, type Job } from 'agenda';
import { PostgresBackend } from '@agendajs/postgres-backend';
import pg from 'pg';
import type { Logger } from '../adapters/logger.ts';
import type { Metrics } from '../adapters/metrics.ts';

/**
 * A recurring job: Agenda only decides *when* it runs; the work itself (claiming a batch of
 * messages, deliveries, mailboxes) is claimed from our own tables with row locks, so a job is
 * never one email and any number of workers can run the same job.
 */
export interface RecurringJob {
  name: string;
  every: string;
  /** Runs one round; returns how many items it handled (for the logs). */
  run(job: Job): Promise<number | void>;
  /**
   * How long a round's lock holds without touch() (default 60 s). Keep it several times the
   * 1 s processEvery: Agenda locks a round up to processEvery before it is due, and a locked
   * round whose lock has aged past its lifetime before it starts is dropped from Agenda's queue
   * while still counted as locked, so that job never runs again in the process
   * (test/workers/job-runner.test.ts saw it at 1 s).
   */
  lockLifetimeMs?: number;
  /** How many rounds of this job may run at once across the deployment (default 1). */
  lanes?: number;
}

export class JobRunner {
  private readonly agenda: Agenda;
  private readonly pool: pg.Pool;

  constructor(
    databaseUrl: string,
    private readonly jobs: RecurringJob[],
    private readonly log: Logger,
    opts: { processEvery?: string; workerName?: string; metrics?: Metrics } = {},
  ) {
    // Our own pool, with an 'error' listener: a connection the server ends while it idles (a
    // PostgreSQL restart, a terminated backend) is an 'error' event on the pool, and the
    // backend's own pool has no listener for it, so the event ended the worker process. The
    // notification channel's LISTEN session re-emits its errors too, before it reconnects.
    this.pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
    this.pool.on('error', (err) => log.warn({ err }, 'job runner: a database connection failed (it is replaced)'));
    const backend = new PostgresBackend({ pool: this.pool, ensureSchema: false });
    backend.notificationChannel?.on('error', (err: unknown) => log.warn({ err }, 'job runner: the job notification channel failed (it reconnects)'));
    this.agenda = new Agenda({
      // The table is created by our migrations: several processes starting at once would race.
      backend,
      name: opts.workerName,
      processEvery: opts.processEvery ?? '1 second',
      defaultLockLifetime: 60_000,
      maxConcurrency: 20,
    });
    this.agenda.on('error', (err: unknown) => {
      // Agenda checks a running job every half lock lifetime and "cancels" it when its lockedAt
      // is unset; Agenda itself unsets it as the job finishes, before saving it, so a check in
      // that window reports a round that has already ended (its work and its next run are
      // unaffected). Nothing else unsets it while a job runs (touch() sets it).
      if (err instanceof Error && /canceled, no lockedAt date found/.test(err.message)) log.debug({ err }, 'job runner: a round that had just finished was checked as it saved (harmless)');
      else log.error({ err }, 'agenda error');
    });
    this.metrics = opts.metrics;
  }

  private readonly metrics?: Metrics;

  async start(): Promise<void> {
    for (const job of this.jobs) {
      this.agenda.define(
        job.name,
        async (j: Job) => {
          this.metrics?.jobRuns.inc({ job: job.name });
          try {
            const handled = await job.run(j);
            if (handled) this.log.debug({ job: job.name, handled }, 'job round done');
          } catch (err) {
            this.metrics?.jobErrors.inc({ job: job.name });
            this.log.error({ err, job: job.name }, 'job failed');
            throw err;
          }
        },
        // A recurring job is one Agenda row, locked by one worker per round; what it works on
        // is claimed with row locks, so a round taken over after a crash resumes cleanly.
        { concurrency: job.lanes ?? 1, lockLimit: job.lanes ?? 1, lockLifetime: job.lockLifetimeMs ?? 60_000 },
      );
    }
    await this.agenda.start();
    for (const job of this.jobs) {
      // One repeating Agenda row per lane, unique by lane: every process saves the same rows.
      for (let lane = 0; lane < (job.lanes ?? 1); lane++) {
        await this.agenda.create(job.name, { lane }).unique({ name: job.name, 'data.lane': lane }).repeatEvery(job.every, { skipImmediate: false }).save();
      }
    }
  }

  /** Stops taking jobs and waits (up to timeoutMs) for running ones, releasing their locks. */
  async stop(timeoutMs: number): Promise<void> {
    const result = await this.agenda.drain({ timeout: timeoutMs, closeConnection: true });
    // A pool passed in is not the backend's to close.
    await this.pool.end().catch((err: unknown) => this.log.warn({ err }, 'job runner: closing its database pool failed'));
    this.log.info({ result }, 'job runner drained');
  }
}
