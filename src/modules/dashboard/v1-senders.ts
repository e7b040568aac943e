import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route.ts';
import { senderAccount, senderPool } from '../senders/routes.ts';
import { SENDER_LIMITS } from '../senders/limits.ts';
import { mailServerSchema, probeView } from './mail-servers.ts';
import { probeFailedFields } from '../mailboxes/probe-failure.ts';
import { NAME_MAX, NAME_TOO_LONG } from '../../shared/names.ts';

// Adding, pausing and resuming sender accounts and building and changing pools from the dashboard
// (docs/dashboard.md): the CLI's operations as API routes; an account is saved only after its
// servers accepted the login.

const senderParams = z.object({ senderAccountId: z.string().min(1).max(200).describe('a sender account id (`snd_...`)') });
const poolParams = z.object({ poolId: z.string().min(1).max(200).describe('a sender pool id (`pool_...`)') });

const addSenderBody = z.strictObject({
  email: z.string().trim().min(1, 'must not be empty').max(320, 'at most 320 characters').describe('the From address'),
  name: z.string().trim().min(1, 'must not be empty').max(NAME_MAX, NAME_TOO_LONG).describe('the display name in the From header'),
  smtp: mailServerSchema,
  imap: mailServerSchema.optional().describe('the mailbox watched for replies and bounces'),
  poolId: z.string().min(1).max(200).optional().describe('add the account to this pool'),
  dailyLimit: z.number().int().min(1).max(SENDER_LIMITS.dailyLimit).optional().describe('most messages in any 24 hours'),
  minIntervalSeconds: z.number().min(0).max(SENDER_LIMITS.minIntervalSeconds).optional().describe('least time between two sends of the account'),
});

const statusRoute = (action: 'pause' | 'resume') =>
  defineRoute({
    method: 'post',
    path: `/v1/sender-accounts/:senderAccountId/${action}`,
    access: 'admin',
    tag: 'Senders',
    operationId: action === 'pause' ? 'pauseSenderAccount' : 'resumeSenderAccount',
    summary:
      action === 'pause'
        ? 'Pause a sender account: it sends nothing until resumed (a no-op when paused)'
        : 'Resume a sender account; also clears an auth-failure or back-off so it is tried at once',
    params: senderParams,
    response: senderAccount,
    errors: { 404: 'sender_account_not_found' },
    handler: ({ params, auth, services }) => services.dashboardSenders.setStatus(auth.workspaceId, params.senderAccountId, action === 'pause' ? 'paused' : 'active'),
  });

export const senderApiRoutes: AnyRoute[] = [
  defineRoute({
    method: 'post',
    path: '/v1/sender-accounts/probe',
    access: 'admin',
    tag: 'Senders',
    operationId: 'probeSenderAccount',
    summary: 'Test SMTP (and IMAP) settings against the real servers without saving anything',
    body: z.strictObject({ smtp: mailServerSchema, imap: mailServerSchema.optional() }),
    response: z.object({ ok: z.boolean().describe('every server given accepted the login'), smtp: probeView, imap: probeView.nullable() }),
    handler: ({ body, services }) => services.dashboardSenders.probe(body),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sender-accounts',
    access: 'admin',
    tag: 'Senders',
    operationId: 'createSenderAccount',
    summary: 'Add a sender account; its SMTP (and IMAP) login is tested against the real servers before it is saved',
    description:
      'SMTP is tested first, then IMAP when given (the probe of `mailgate sdr connect-mail`). A refusal is 422 `mail_probe_failed` with `probe` (which server, why, its words) and nothing is saved. Its mailbox is watched from now on.',
    body: addSenderBody,
    response: senderAccount,
    errors: { 404: 'sender_pool_not_found', 409: 'already_exists', 422: 'mail_probe_failed' },
    errorFields: { 422: probeFailedFields },
    handler: ({ body, auth, services }) => services.dashboardSenders.add(auth.workspaceId, body),
  }),
  statusRoute('pause'),
  statusRoute('resume'),
  defineRoute({
    method: 'patch',
    path: '/v1/sender-accounts/:senderAccountId',
    access: 'admin',
    tag: 'Senders',
    operationId: 'updateSenderAccount',
    summary: "Change an account's daily limit, minimum interval or SMTP settings (a rotated password); taken at the next claim",
    description:
      'A `dailyLimit` below what the account sent in the last 24 hours stops it until the window moves on (`null`: no limit). New `smtp` settings are tested against the server first (a refusal is 422 `mail_probe_failed` with `probe`, and nothing is changed); once saved, a failing health (`auth_failed`, a back-off) is cleared to `unknown` and the account is tried with them at the next claim. Running campaigns keep going.',
    params: senderParams,
    body: z
      .strictObject({
        dailyLimit: z.number().int().min(1).max(SENDER_LIMITS.dailyLimit).nullable().optional().describe('most messages in any 24 hours (null: no limit)'),
        minIntervalSeconds: z.number().min(0).max(SENDER_LIMITS.minIntervalSeconds).optional().describe('least time between two sends of the account'),
        smtp: mailServerSchema.optional().describe('new SMTP settings, e.g. after a password change'),
      })
      .refine((b) => b.dailyLimit !== undefined || b.minIntervalSeconds !== undefined || b.smtp !== undefined, { message: 'give dailyLimit, minIntervalSeconds or smtp' }),
    response: senderAccount,
    errors: { 404: 'sender_account_not_found', 422: 'mail_probe_failed' },
    errorFields: { 422: probeFailedFields },
    handler: ({ params, body, auth, services }) => services.dashboardSenders.update(auth.workspaceId, params.senderAccountId, body),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sender-pools',
    access: 'admin',
    tag: 'Senders',
    operationId: 'createSenderPool',
    summary: 'Create a sender pool with its rolling 24-hour capacity and members',
    body: z.strictObject({
      name: z.string().trim().min(1, 'must not be empty').max(NAME_MAX, NAME_TOO_LONG),
      dailyCapacity: z.number().int().min(0).max(SENDER_LIMITS.dailyCapacity).describe('most messages through the pool in any rolling 24 hours'),
      senderAccountIds: z.array(z.string().min(1).max(200)).max(1000).optional(),
    }),
    response: senderPool,
    errors: { 404: 'sender_account_not_found' },
    handler: ({ body, auth, services }) => services.dashboardSenders.createPool(auth.workspaceId, body),
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/sender-pools/:poolId',
    access: 'admin',
    tag: 'Senders',
    operationId: 'updateSenderPool',
    summary: "Change a pool's rolling 24-hour capacity; taken at its next claim",
    description: 'A `dailyCapacity` below what the pool sent in the last 24 hours stops it until the window moves on (`remainingVolume` 0).',
    params: poolParams,
    body: z.strictObject({ dailyCapacity: z.number().int().min(0).max(SENDER_LIMITS.dailyCapacity).describe('most messages through the pool in any rolling 24 hours') }),
    response: senderPool,
    errors: { 404: 'sender_pool_not_found' },
    handler: ({ params, body, auth, services }) => services.dashboardSenders.setPoolCapacity(auth.workspaceId, params.poolId, body.dailyCapacity),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sender-pools/:poolId/members',
    access: 'admin',
    tag: 'Senders',
    operationId: 'addSenderPoolMember',
    summary: 'Add a sender account to a pool (a no-op when it is a member)',
    params: poolParams,
    body: z.strictObject({ senderAccountId: z.string().min(1).max(200) }),
    response: senderPool,
    errors: { 404: 'sender_pool_not_found | sender_account_not_found' },
    handler: ({ params, body, auth, services }) => services.dashboardSenders.addMember(auth.workspaceId, params.poolId, body.senderAccountId),
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/sender-pools/:poolId/members/:senderAccountId',
    access: 'admin',
    tag: 'Senders',
    operationId: 'removeSenderPoolMember',
    summary: 'Take a sender account out of a pool (a no-op when it is not a member)',
    description:
      "From the answer on, the pool's campaigns send nothing more through the account; messages it had already claimed finish, and everything it sent through the pool still counts in the pool's rolling 24-hour capacity. The leads whose sequences it was sending (their sticky account) get their next steps from the pool's other active accounts, threaded on the earlier messages (In-Reply-To, References), as when an account is paused; with no other active account they wait in the queue. The account itself, its other pools and its mailbox (replies to what it sent are still read) are unchanged.",
    params: poolParams.extend(senderParams.shape),
    response: senderPool,
    errors: { 404: 'sender_pool_not_found | sender_account_not_found' },
    handler: ({ params, auth, services }) => services.dashboardSenders.removeMember(auth.workspaceId, params.poolId, params.senderAccountId),
  }),
];
