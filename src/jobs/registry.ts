import type { RecurringJob } from './agenda.ts';
import type { SendDispatcher } from '../modules/sending/dispatcher.ts';
import { webhookDispatchJob, type WebhookDispatcher } from '../modules/webhooks/dispatcher.ts';
import { pruneWebhookLog } from '../modules/maintenance/retention.ts';
import { pruneTallies } from '../modules/messages/tallies.ts';
import { createServices } from '../services.ts';
import type { Deps } from '../deps.ts';

export interface Workers {
  dispatcher: SendDispatcher;
  webhooks: WebhookDispatcher;
  deps: Deps;
}

/**
 * The job-name -> handler map of the worker role. Each job is a thin wrapper calling one
 * service method (the services of services.ts, on a fresh EntityManager per run); the work
 * itself is claimed from our tables, so any number of workers can run it.
 */
export function recurringJobs(workers: Workers): RecurringJob[] {
  const services = () => createServices(workers.deps, workers.deps.orm.em.fork());
  return [
    {
      name: 'sending.dispatch',
      every: '1 second',
      // Two lanes: two rounds can run at once (in one worker or two), each claiming its own
      // batches, so one slow SMTP server does not hold up every pool.
      lanes: 2,
      // A dead worker's Agenda lock holds its lane this long; a live round keeps touching it.
      lockLifetimeMs: 10_000,
      async run(job) {
        const touching = setInterval(() => job.touch().catch(() => {}), 3_000);
        try {
          const r = await workers.dispatcher.runRound();
          return r.claimed + r.promoted + r.released;
        } finally {
          clearInterval(touching);
        }
      },
    },
    webhookDispatchJob(workers.webhooks),
    {
      name: 'followups.schedule',
      every: '1 minute',
      async run() {
        const r = await services().followups.scheduleDue();
        return r.created + r.due;
      },
    },
    {
      // The lifecycle's last log line: a running campaign whose every enrollment has ended.
      name: 'campaigns.finish',
      every: '1 minute',
      run: () => services().campaigns.noteFinished(),
    },
    {
      // Recency decays: stored priority scores of recent threads are brought up to date.
      name: 'priority.refresh',
      every: '10 minutes',
      async run() {
        return services().sdrThreads.refreshPriorities();
      },
    },
    {
      // The webhook log does not grow without end (MAILGATE_EVENT_RETENTION; 0 keeps it all).
      name: 'retention.prune',
      every: '1 hour',
      lockLifetimeMs: 60_000,
      async run(job) {
        const keepMs = workers.deps.config.eventRetention;
        if (keepMs === 0) return 0;
        const cutoff = new Date(workers.deps.clock.now().getTime() - keepMs);
        const r = await pruneWebhookLog(workers.deps.orm.em.fork(), cutoff, () => job.touch());
        if (r.events || r.deliveries) workers.deps.log.info({ ...r, cutoff }, 'pruned the webhook log');
        return r.events + r.deliveries;
      },
    },
    {
      // The pools' and accounts' sent tallies (messages/tallies.ts) of buckets no claim's
      // 24-hour window reaches any more: a day's rows per owner and writer is all there is.
      name: 'tallies.prune',
      every: '1 hour',
      async run() {
        const before = new Date(workers.deps.clock.now().getTime() - 86_400_000);
        return pruneTallies(workers.deps.orm.em.fork(), before);
      },
    },
  ];
}
