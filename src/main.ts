import http from 'node:http';
import type { Config } from './config/index.ts';
import type { Logger } from './adapters/logger.ts';
import { buildApp } from './app.ts';
import { openRuntime } from './runtime.ts';
import { createServices } from './services.ts';
import { JobRunner } from './jobs/agenda.ts';
import { SendWakeup } from './modules/sending/wakeup.ts';
import { recurringJobs } from './jobs/registry.ts';
import { SmtpMessenger } from './adapters/smtp.ts';
import { Dispatcher } from './modules/sending/dispatcher.ts';
import { WebhookDispatcher } from './modules/webhooks/dispatcher.ts';
import { MailboxWatcher } from './modules/inbound/watcher.ts';
import { WorkerRegistry } from './modules/workers/registry.ts';

export type Role = 'all' | 'api' | 'worker';

export interface RunningDaemon {
  server: http.Server;
  port: number;
  shutdown(reason: string): Promise<void>;
}

/**
 * `mailgate serve`: config -> database -> HTTP + jobs; drains on SIGTERM/SIGINT.
 * Role `api` answers the /v1 API and links and runs no jobs; role `worker` runs the jobs and
 * answers only /healthz and /readyz; `all` (default) does both.
 */
export async function serve(config: Config, log: Logger, role: Role, out: NodeJS.WritableStream = process.stdout): Promise<RunningDaemon> {
  const runtime = await openRuntime(config, log);
  const { deps } = runtime;

  const key = await createServices(deps, deps.orm.em.fork()).workspaces.bootstrap();
  if (key) {
    out.write(
      `\nmailgate: first start. Created workspace "default" (${key.workspaceId}) and its admin API key.\n` +
        `mailgate: ADMIN API KEY (shown only this once; store it now): ${key.key}\n\n`,
    );
  }

  let jobs: JobRunner | undefined;
  let messenger: SmtpMessenger | undefined;
  let dispatcher: Dispatcher | undefined;
  let webhooks: WebhookDispatcher | undefined;
  let watcher: MailboxWatcher | undefined;
  let wakeup: SendWakeup | undefined;
  let registry: WorkerRegistry | undefined;
  if (role !== 'api') {
    // Registered before anything is claimed: every lease below names this worker, and the
    // others take it all over if its heartbeat stops (modules/workers/registry.ts).
    registry = new WorkerRegistry(runtime.db.url, deps.clock, log, {
      role,
      heartbeatMs: config.workerHeartbeat,
      deadAfterMs: config.workerDeadAfter,
      onReclaimed: () => {
        dispatcher?.wake();
        watcher?.nudge();
      },
    });
    await registry.start();
    messenger = new SmtpMessenger({ maxConnections: config.smtpMaxConnections });
    dispatcher = new Dispatcher(deps, messenger, {
      maxConnections: config.smtpMaxConnections,
      retryDelaysMs: config.smtpRetryDelays,
      leaseMs: config.sendLease,
      workerId: registry.id,
    });
    webhooks = new WebhookDispatcher(deps, { owner: registry.id });
    jobs = new JobRunner(runtime.db.url, recurringJobs({ dispatcher, webhooks, deps }), log);
    await jobs.start();
    // A started campaign gets a round at once instead of at the job's next tick.
    const d = dispatcher;
    wakeup = new SendWakeup(runtime.db.url, () => d.wake(), log);
    await wakeup.start();
    watcher = new MailboxWatcher(deps, { pollIntervalMs: config.imapPollInterval, owner: registry.id });
    await watcher.start();
  }

  const app = buildApp(deps, { api: role !== 'worker' });
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  log.info({ role, host: config.host, port, embedded: !!runtime.db.embedded }, 'mailgate is up');

  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string) => {
    stopping ??= (async () => {
      log.info({ reason }, 'shutting down: no new work, finishing in-flight work');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const deadline = setTimeout(() => server.closeAllConnections(), config.shutdownTimeout);
      deadline.unref();
      dispatcher?.stop();
      await wakeup?.stop();
      webhooks?.stop();
      await watcher?.stop().catch((err) => log.error({ err }, 'mailbox watcher did not stop cleanly'));
      await jobs?.stop(config.shutdownTimeout).catch((err) => log.error({ err }, 'job runner did not stop cleanly'));
      await dispatcher?.drain(config.shutdownTimeout);
      await messenger?.close();
      await dispatcher?.close();
      await webhooks?.close();
      await registry?.stop();
      await closed;
      await runtime.close();
      log.info('stopped');
    })();
    return stopping;
  };
  return { server, port, shutdown };
}
