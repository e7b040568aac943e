import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { checkedByService } from '../../http/doc-schemas.ts';

const MAX_EMAILS = 1000;

const body = z.strictObject({
  // Each address is checked by the service (addFromApi), so that a bad one is a 422 naming its index.
  emails: z.array(checkedByService({ type: 'string', format: 'email', description: 'an address to suppress (case-insensitive); whole addresses only: a domain or a wildcard such as *@acme.com is a 422' })).min(1, 'must contain at least one address').max(MAX_EMAILS, `at most ${MAX_EMAILS} addresses per request`),
});

export const suppressionRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/suppression-list',
    access: 'admin',
    tag: 'Suppression',
    operationId: 'suppressEmails',
    summary: 'Suppress email addresses workspace-wide',
    body,
    response: z.object({ suppressed: z.number().int().describe('addresses newly added') }),
    errors: { 422: 'validation_failed' },
    async handler({ body, auth, services }) {
      return { suppressed: await services.suppression.addFromApi(auth.workspaceId, body.emails) };
    },
  }),
];
