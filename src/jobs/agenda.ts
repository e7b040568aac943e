import { Agenda, type Job } from 'agenda';
import { PostgresBackend } from '@agendajs/postgres-backend';
import pg from 'pg';
import type { Logger } from '../adapters/logger.ts';
import type { Metrics } from '../adapters/metrics.ts';
import { databaseUnreachable } from '../db/sql.ts';

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

/** How long Agenda's job notification channel waits before it reconnects. */
const NOTIFY_RETRY_MS = 5_000;

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
    // pg-pool hangs the failed client on the error (`err.client`): logged whole, it made one line
    // of several kilobytes (its parameters, type parsers and buffers).
    this.pool.on('error', (err) => log.warn({ err: { type: err.name, message: err.message, code: (err as { code?: string }).code } }, 'job runner: a database connection failed (it is replaced)'));
    const backend = new PostgresBackend({ pool: this.pool, ensureSchema: false });
    const channel = backend.notificationChannel;
    if (channel) {
      // Agenda's channel tries again 100 ms after each failed try (its back-off starts over at
      // every try), and reports each failure twice: with the database down, 10 connections a
      // second and 20 warn lines, 600 in a 30 s outage (2026-11-29). Its reconnect takes
      // NOTIFY_RETRY_MS instead, as the other LISTEN sessions do (db/listener.ts); the first
      // failure is logged at warn, the rest until it is back at debug, and its return at info.
      // The channel only hastens rounds: Agenda looks for due jobs every second regardless.
      const reconnect = (channel as unknown as { config?: { reconnect?: { initialDelayMs: number } } }).config?.reconnect;
      if (reconnect) reconnect.initialDelayMs = NOTIFY_RETRY_MS;
      let failing = false;
      channel.on('error', (err: unknown) => {
        if (failing) return void log.debug({ err }, 'job runner: the job notification channel failed again');
        failing = true;
        log.warn({ err }, `job runner: the job notification channel failed (it reconnects every ${NOTIFY_RETRY_MS / 1000} s)`);
      });
      channel.on('stateChange', (state) => {
        if (state !== 'connected' || !failing) return;
        failing = false;
        log.info('job runner: the job notification channel is back');
      });
    }
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
      else if (!databaseUnreachable(err)) log.error({ err }, 'agenda error');
      // The database down: Agenda fails to look for each job's next round every second (one
      // error a second per job, 75 lines in a 15 s outage). Logged once, until a round has run.
      else if (this.unreachable) log.debug({ err }, 'agenda error (the database still cannot be reached)');
      else {
        this.unreachable = true;
        log.error({ err }, 'agenda error: the database cannot be reached (logged again once a job round has run)');
      }
    });
    this.metrics = opts.metrics;
  }

  private readonly metrics?: Metrics;
  /** Agenda has failed to reach the database since the last round that ran. */
  private unreachable = false;

  async start(): Promise<void> {
    for (const job of this.jobs) {
      this.agenda.define(
        job.name,
        async (j: Job) => {
          this.metrics?.jobRuns.inc({ job: job.name });
          try {
            const handled = await job.run(j);
            if (this.unreachable) {
              this.unreachable = false;
              this.log.info({ job: job.name }, 'job runner: a job round ran again after the database could not be reached');
            }
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
