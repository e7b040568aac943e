import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { isEmail } from '../../shared/email.ts';
import { ApiError } from '../../shared/errors.ts';
import { THREAD_STATUSES } from './threads-state.ts';

/**
 * The optional `Idempotency-Key` header of send-manual: 1 to 255 visible ASCII characters
 * (docs/sdr-desk.md). Absent (or empty) is no key.
 */
function idempotencyKey(value: string): string | undefined {
  if (value === '') return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(value)) {
    const message = 'must be 1 to 255 visible ASCII characters';
    throw ApiError.invalid(`header Idempotency-Key: ${message}`, { errors: [{ field: 'Idempotency-Key', message }] });
  }
  return value;
}

export const deskMailRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/sdr/threads/:threadId/send-manual',
    access: 'sdr',
    tag: 'SDR desk',
    operationId: 'sendManualReply',
    summary: "Reply in the prospect's thread through the SDR's own mailbox",
    params: z.object({ threadId: z.string().describe('a prospect thread id') }),
    body: z.strictObject({
      bodyText: z.string().trim().min(1, 'must not be empty').max(100_000),
      bodyHtml: z.string().min(1).max(256 * 1024).optional(),
      // Trimmed as isEmail checks it: the mail goes to the trimmed address, and the thread keeps
      // what it was sent to (a line break after an address was stored with it).
      cc: z.array(z.string().trim().refine(isEmail, 'must be a valid email address')).max(20).optional(),
    }),
    response: z.object({
      data: z.object({ messageId: z.string(), threadId: z.string(), status: z.enum(THREAD_STATUSES).describe('the thread status after the send') }).meta({ id: 'ManualSend' }),
    }),
    errors: { 404: 'thread_not_found', 409: 'mail_not_connected | recipient_suppressed', 502: 'send_failed' },
    errorFields: { 409: { suppressed: z.array(z.string()).optional().describe('recipient_suppressed: the recipients on the suppression list') } },
    requestHeaders: {
      'Idempotency-Key': {
        description:
          'Optional. A repeat with the same key (for this SDR and thread) sends nothing and answers the first send again (docs/sdr-desk.md). Empty is no key.',
        schema: { type: 'string', maxLength: 255, pattern: '^[!-~]*$' },
      },
    },
    handler: ({ params, body, auth, services, ctx }) =>
      services.deskMail.sendManual(auth.sdrId!, auth.workspaceId, params.threadId, body, idempotencyKey(ctx.get('idempotency-key'))),
  }),
];
