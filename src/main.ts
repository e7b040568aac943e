import http from 'node:http';
import { publicUrlWarning, type Config } from './config/index.ts';
import type { Logger } from './adapters/logger.ts';
import { buildApp } from './app.ts';
import { closeGracefully, createHttpServer } from './http/server.ts';
import { openRuntime, type Runtime } from './runtime.ts';
import { StartupError } from './shared/errors.ts';
import { announceAdminKey, remindOfAdminKeyFile, type TerminalIO } from './admin-key.ts';
import { createServices } from './services.ts';
import { JobRunner } from './jobs/agenda.ts';
import { SendWakeup } from './modules/sending/wakeup.ts';
import { recurringJobs } from './jobs/registry.ts';
import { SmtpMessenger } from './adapters/smtp.ts';
import { SendDispatcher } from './modules/sending/dispatcher.ts';
import { replayUnrecorded } from './modules/sending/unrecorded.ts';
import { WebhookDispatcher } from './modules/webhooks/dispatcher.ts';
import { MailboxWatcher } from './modules/inbound/watcher.ts';
import { WorkerRegistry } from './modules/workers/registry.ts';
import { startMetricsServer } from './http/metrics-server.ts';

export type Role = 'all' | 'api' | 'worker';

export interface RunningDaemon {
  server: http.Server;
  port: number;
  /** The metrics listener's port, when MAILGATE_METRICS_ADDRESS is set. */
  metricsPort?: number;
  shutdown(reason: string): Promise<void>;
}

export type ServeIO = TerminalIO;

/** A stop asked for (SIGTERM, SIGINT) while starting: what had started is stopped again. */
export class StartAborted extends Error {}

/**
 * `mailgate serve`: HTTP port -> database -> first-start key -> workers; drains on
 * SIGTERM/SIGINT. Role `api` answers the /v1 API and links and runs no jobs; role `worker` runs
 * the jobs and answers only /healthz and /readyz; `all` (default) does both.
 *
 * The port is bound first, so a taken port or a bad HOST stops the start before anything else
 * (no database started, no key created, no job run). Any later failure stops everything started
 * so far, embedded PostgreSQL included, and rethrows: the CLI prints it as one line and exits 1.
 */
export async function serve(config: Config, log: Logger, role: Role, io: ServeIO = process, abort?: AbortSignal): Promise<RunningDaemon> {
  let handler: http.RequestListener | undefined;
  const server = createHttpServer((req, res) => (handler ? handler(req, res) : answerStarting(req, res)), { keepAliveTimeoutMs: config.httpKeepAliveTimeout });
  await listen(server, config);
  const port = (server.address() as { port: number }).port;

  let runtime: Runtime | undefined;
  let jobs: JobRunner | undefined;
  let messenger: SmtpMessenger | undefined;
  let dispatcher: SendDispatcher | undefined;
  let webhooks: WebhookDispatcher | undefined;
  let watcher: MailboxWatcher | undefined;
  let wakeup: SendWakeup | undefined;
  let registry: WorkerRegistry | undefined;
  let metricsServer: http.Server | undefined;
  let metricsPort: number | undefined;

  let up = false;
  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string) => {
    stopping ??= (async () => {
      log.info({ reason }, up ? 'shutting down: no new work, finishing in-flight work' : 'stopping what had started');
      const closed = closeGracefully(server);
      // One deadline for the whole drain: each wait below gets what is left of it, so a round
      // stuck on a slow server is waited for once, not once by the job runner and again here.
      const endsAt = Date.now() + config.shutdownTimeout;
      const left = () => Math.max(0, endsAt - Date.now());
      const deadline = setTimeout(() => server.closeAllConnections(), config.shutdownTimeout);
      deadline.unref();
      // Accepted messages whose outcome the database cannot take yet are retried until the
      // deadline, then journaled in the data directory (dispatcher.close).
      dispatcher?.stop(endsAt);
      await wakeup?.stop();
      webhooks?.stop();
      await watcher?.stop().catch((err) => log.error({ err }, 'mailbox watcher did not stop cleanly'));
      await jobs?.stop(left()).catch((err) => log.error({ err }, 'job runner did not stop cleanly'));
      await dispatcher?.drain(left());
      // Past the deadline (or with nothing left in flight): a send still waiting on its server
      // is cut off, its message goes back to the queue (or counts the attempt when its data had
      // ended), and the round that sent it ends, instead of waiting out the SMTP timeout.
      await messenger?.close({ force: true });
      await dispatcher?.close();
      await webhooks?.close();
      await registry?.stop();
      await closed;
      if (metricsServer) {
        const m = metricsServer;
        m.closeAllConnections();
        await new Promise<void>((resolve) => m.close(() => resolve()));
      }
      await runtime?.close();
      log.info('stopped');
    })();
    return stopping;
  };
  const step = () => {
    if (abort?.aborted) throw new StartAborted('stopped while starting');
  };

  try {
    step();
    runtime = await openRuntime(config, log);
    step();
    const { deps } = runtime;
    deps.metrics.collectProcessMetrics();
    if (config.metricsAddress) ({ server: metricsServer, port: metricsPort } = await startMetricsServer(config.metricsAddress, deps.metrics, log));
    step();
    const key = await createServices(deps, deps.orm.em.fork()).workspaces.bootstrap();
    if (key) announceAdminKey(key, config, log, io);
    else remindOfAdminKeyFile(config, log);

    if (role !== 'api') {
      // Accepted messages a worker with this data directory could not record before it stopped
      // (the database unreachable until its deadline) are recorded sent before anything is
      // claimed (modules/sending/unrecorded.ts).
      await replayUnrecorded(deps, config.dataDir).catch((err: unknown) => log.error({ err, dataDir: config.dataDir }, 'the unrecorded sends journal could not be replayed; the messages it names may be sent again'));
      step();
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
      step();
      messenger = new SmtpMessenger({ maxConnections: config.smtpMaxConnections });
      dispatcher = new SendDispatcher(deps, messenger, {
        maxConnections: config.smtpMaxConnections,
        retryDelaysMs: config.smtpRetryDelays,
        leaseMs: config.sendLease,
        workerId: registry.id,
        dataDir: config.dataDir,
      });
      webhooks = new WebhookDispatcher(deps, { owner: registry.id });
      // Before any round: a webhook disabled, deleted or moved through the API (this process or
      // an api-only one) stops its attempts waiting here at once.
      await webhooks.listen();
      step();
      jobs = new JobRunner(runtime.db.url, recurringJobs({ dispatcher, webhooks, deps }), log, { metrics: deps.metrics });
      await jobs.start();
      step();
      // A started campaign gets a round at once instead of at the job's next tick.
      const d = dispatcher;
      wakeup = new SendWakeup(runtime.db.url, () => d.wake(), log);
      await wakeup.start();
      step();
      watcher = new MailboxWatcher(deps, () => createServices(deps, deps.orm.em.fork()).inbound, { pollIntervalMs: config.imapPollInterval, answerTimeoutMs: config.imapTimeout, maxMessageBytes: config.inboundMaxBytes, owner: registry.id });
      await watcher.start();
      step();
    }
    handler = buildApp(deps, { api: role !== 'worker' }).callback();
  } catch (err) {
    await shutdown(err instanceof StartAborted ? 'stop requested while starting' : 'start-up failed').catch((e) => log.error({ err: e }, 'could not stop everything after a failed start'));
    throw err;
  }
  up = true;
  log.info({ role, host: config.host, port, metricsPort, embedded: !!runtime.db.embedded }, 'mailgate is up');
  const linksWarning = publicUrlWarning(config);
  if (linksWarning) log.warn(linksWarning);
  return { server, port, metricsPort, shutdown };
}

/** Binds HOST:PORT; a failure is one line naming the setting to change. */
async function listen(server: http.Server, config: Config): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.removeListener('error', reject);
        resolve();
      });
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const where = `${config.host}:${config.port}`;
    const why =
      code === 'EADDRINUSE' ? `cannot listen on ${where}: the port is already in use: stop the process using it, or set PORT to a free port`
      : code === 'EACCES' ? `cannot listen on ${where}: this user may not bind port ${config.port}: set PORT to 1024 or above`
      : code === 'EADDRNOTAVAIL' ? `cannot listen on ${where}: ${config.host} is not an address of this machine: set HOST to one of its addresses (0.0.0.0 for all)`
      : code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? `cannot listen on ${where}: the host name ${config.host} does not resolve: set HOST to an address of this machine`
      : `cannot listen on ${where}: ${(err as Error).message}: check HOST and PORT`;
    throw new StartupError(why);
  }
}

/** Before the app is ready: alive, not ready, and every other request a 503 in the envelope. */
function answerStarting(req: http.IncomingMessage, res: http.ServerResponse): void {
  const path = (req.url ?? '/').split('?')[0];
  const [status, body] =
    path === '/healthz' ? [200, { status: 'starting' }]
    : path === '/readyz' ? [503, { status: 'starting' }]
    : [503, { error: { code: 'starting', message: 'mailgate is starting (database, migrations); retry in a few seconds' } }];
  req.resume();
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...(status === 503 ? { 'retry-after': '5' } : {}) });
  res.end(JSON.stringify(body));
}
