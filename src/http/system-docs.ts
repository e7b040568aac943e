import { errorResponse, type StaticOperation } from './openapi.ts';

// The endpoints app.ts mounts itself, documented by hand: they have no API key, no route
// declaration and (but for readiness) one answer. Every path the API's router mounts must be in
// the document (test/http/openapi.test.ts checks it), so an endpoint added to app.ts is listed here.

const status = (values: string[], extra: Record<string, unknown> = {}) => ({
  type: 'object',
  required: ['status', ...Object.keys(extra)],
  properties: { status: { enum: values }, ...extra },
  additionalProperties: false,
});

const json = (description: string, schema: Record<string, unknown>) => ({ description, content: { 'application/json': { schema } } });

const common = { tags: ['Operations'], security: [], 'x-mailgate-role': 'none' };

export const systemOperations: StaticOperation[] = [
  {
    method: 'get',
    path: '/healthz',
    operation: {
      ...common,
      operationId: 'getHealth',
      summary: 'Liveness: the process answers',
      description: 'Role: none; no API key. Served by API and worker processes alike; it touches no database.',
      responses: { '200': json('The process is up', status(['ok'])), '500': errorResponse(['internal_error']) },
    },
  },
  {
    method: 'get',
    path: '/readyz',
    operation: {
      ...common,
      operationId: 'getReadiness',
      summary: 'Readiness: the database answers and every migration is applied',
      description: 'Role: none; no API key. Served by API and worker processes alike. A 503 is a probe answer, not an error: its body says what is missing.',
      responses: {
        '200': json('Ready to take requests and work', status(['ready'])),
        '503': json('Not ready', {
          oneOf: [status(['migrations_pending'], { pending: { type: 'array', items: { type: 'string' }, description: 'migrations not yet applied' } }), status(['database_unreachable'])],
        }),
        '500': errorResponse(['internal_error']),
      },
    },
  },
  {
    method: 'get',
    path: '/v1/openapi.json',
    operation: {
      ...common,
      operationId: 'getOpenApiDocument',
      summary: 'This OpenAPI 3.1 document',
      description: 'Role: none; no API key. Generated at start from the route declarations.',
      responses: {
        '200': json('The document', {
          type: 'object',
          required: ['openapi', 'info', 'paths'],
          properties: { openapi: { const: '3.1.0' }, info: { type: 'object', required: ['title', 'version'], properties: { title: { type: 'string' }, version: { type: 'string' } } }, paths: { type: 'object' }, components: { type: 'object' } },
        }),
        '500': errorResponse(['internal_error']),
      },
    },
  },
  {
    // Not a route of the API port: the metrics listener (src/http/metrics-server.ts) answers it,
    // hence the operation's own server.
    method: 'get',
    path: '/metrics',
    operation: {
      ...common,
      operationId: 'getMetrics',
      summary: 'Prometheus metrics of this process',
      description:
        'Role: none; no API key. Served only on the separate metrics listener at MAILGATE_METRICS_ADDRESS (host:port; unset = no metrics), never on the API port, by API and worker processes alike. Metric names and labels: docs/operating.md.',
      servers: [{ url: 'http://{metricsAddress}', description: 'the metrics listener', variables: { metricsAddress: { default: '127.0.0.1:9464', description: 'MAILGATE_METRICS_ADDRESS' } } }],
      responses: {
        '200': { description: 'Prometheus text exposition format 0.0.4', content: { 'text/plain; version=0.0.4; charset=utf-8': { schema: { type: 'string' } } } },
        // Asked of the API port (or of a process without MAILGATE_METRICS_ADDRESS): not here.
        '404': { ...errorResponse(['not_found']), description: '`not_found`: asked of the API port, which never serves metrics' },
        '500': errorResponse(['internal_error']),
      },
    },
  },
];
