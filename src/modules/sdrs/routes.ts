import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';

const sdrProfile = z.object({
  id: z.string(),
  name: z.string(),
  email: z.string(),
  mailConnected: z.boolean(),
  mailEmail: z.string().nullable(),
});

export const sdrRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/sdrs',
    access: 'sdr',
    tag: 'SDR desk',
    summary: 'List the active SDRs of the workspace',
    response: z.object({ data: z.array(sdrProfile) }),
    errors: { 401: 'authentication_failed', 403: 'forbidden', 404: 'workspace_not_found' },
    async handler({ auth, services }) {
      return { data: await services.sdrs.listActive(auth.workspaceId) };
    },
  }),
];
