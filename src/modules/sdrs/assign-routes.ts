import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { isEmail } from '../../shared/email.ts';

// Trimmed as isEmail checks it: the handoff keeps the address the forward went to.
const email = z.string().trim().refine(isEmail, 'must be a valid email address');

const body = z.strictObject({
  sdrId: z.string().min(1),
  to: email.optional(),
  cc: z.array(email).max(20).optional(),
  subject: z.string().min(1).max(998).optional(),
  note: z.string().max(10_000).optional(),
  category: z.enum(['A', 'B', 'C']).optional(),
  forceForward: z.boolean().optional(),
  skipIcpCheck: z.boolean().optional(),
  seniority: z.string().optional(),
  employeeCount: z.union([z.string(), z.number().int().min(0)]).optional(),
});

export const assignRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/replies/:replyId/assign',
    access: 'admin',
    tag: 'SDR desk',
    operationId: 'assignReply',
    summary: 'Assign a reply to an SDR: ICP gate, forward, handoff snapshot, prospect thread',
    params: z.object({ replyId: z.string() }),
    body,
    response: z.object({ data: z.object({ handoffId: z.string(), threadId: z.string(), messageId: z.string(), mailThreadId: z.string() }) }),
    errors: { 400: 'icp_failed', 404: 'reply_not_found', 409: 'already_forwarded | reply_not_assignable | reply_not_forwardable', 502: 'forward_failed' },
    errorFields: { 400: { icpFailed: z.literal(true).describe('with 400 icp_failed: the contact is outside the ICP criteria') } },
    handler: ({ params, body, auth, services }) => services.assignments.assign(auth.workspaceId, params.replyId, body),
  }),
];
