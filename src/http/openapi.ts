import { z } from 'zod';
import type { AnyRoute } from './route.ts';

const errorBody = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' } },
    },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        properties: { index: { type: 'integer' }, field: { type: 'string' }, value: {}, message: { type: 'string' } },
      },
    },
  },
};

function schemaOf(s: z.ZodType, io: 'input' | 'output') {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(s, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}

/** The OpenAPI 3.1 document, generated from the zod schemas the routes validate with. */
export function buildOpenApi(routes: AnyRoute[], version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, '{$1}');
    const parameters: unknown[] = [];
    for (const m of r.path.matchAll(/:(\w+)/g)) parameters.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    if (r.query) {
      const q = schemaOf(r.query, 'input') as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {}))
        parameters.push({ name, in: 'query', required: q.required?.includes(name) ?? false, schema });
    }
    const responses: Record<string, unknown> = {};
    const okStatus = String(r.status ?? 200);
    responses[okStatus] =
      r.status === 204
        ? { description: 'No content' }
        : { description: 'Success', content: { 'application/json': { schema: r.response ? schemaOf(r.response, 'output') : {} } } };
    for (const [status, code] of Object.entries(r.errors ?? {}))
      responses[status] = { description: code, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    paths[path] ??= {};
    paths[path][r.method] = {
      summary: r.summary,
      tags: [r.tag],
      ...(r.access === 'none' ? { security: [] } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: schemaOf(r.body, 'input') } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'mailgate API', version, description: 'Outbound email campaigns and the SDR reply workflow.' },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' } },
      schemas: { Error: errorBody },
    },
    paths,
  };
}
