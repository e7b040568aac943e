import http from 'node:http';
import type { Logger } from '../adapters/logger.ts';
import type { Metrics } from '../adapters/metrics.ts';
import { StartupError } from '../shared/errors.ts';

/**
 * The metrics listener (MAILGATE_METRICS_ADDRESS): `GET /metrics` in Prometheus text format,
 * unauthenticated, and nothing else. A listener of its own, not a route of the API: the API
 * port faces the internet (tracking and unsubscribe links), while metrics name sender accounts
 * and volumes and belong on an address only the scraper reaches (docs/decisions.md).
 */
export async function startMetricsServer(address: string, metrics: Metrics, log: Logger): Promise<{ server: http.Server; port: number }> {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(at + 1));
  metrics.onDatabaseReadFailure = (err) =>
    log.warn({ err }, 'metrics: the database cannot be read; its gauges are left out of the scrapes until it can (mailgate_database_up 0)');
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    req.resume();
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify({ error: { code: 'not_found', message: 'this listener answers GET /metrics only' } }));
      return;
    }
    metrics.text().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.contentType() });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        log.error({ err }, 'collecting metrics failed');
        res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify({ error: { code: 'internal_error', message: 'collecting the metrics failed; see the log' } }));
      },
    );
  });
  server.keepAliveTimeout = 5_000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.removeListener('error', reject);
        resolve();
      });
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new StartupError(
      code === 'EADDRINUSE'
        ? `cannot listen on ${address} for metrics: the port is already in use: set MAILGATE_METRICS_ADDRESS to a free port`
        : `cannot listen on ${address} for metrics: ${(err as Error).message}: check MAILGATE_METRICS_ADDRESS`,
    );
  }
  return { server, port: (server.address() as { port: number }).port };
}
