import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { emailText, isoTime } from '../../http/doc-schemas.ts';

const senderAccount = z.object({
  id: z.string(),
  email: emailText,
  name: z.string(),
  status: z.enum(['active', 'paused']),
  health: z.enum(['unknown', 'ok', 'auth_failed', 'unreachable', 'rate_limited']).describe('SMTP: from real sending outcomes'),
  healthError: z.string().nullable().describe("the server's answer behind a health other than ok"),
  healthRetryAt: isoTime.nullable().describe('an unreachable or rate_limited account is skipped until then, then tried again'),
  imapHealth: z.enum(['unknown', 'ok', 'auth_failed', 'unreachable', 'rate_limited']).nullable().describe('IMAP connection of the watched mailbox; null without one'),
  dailyLimit: z.number().int().nullable(),
  minIntervalSeconds: z.number().describe('least time between two sends of the account (0: none)'),
  sentLast24h: z.number().int().describe('messages sent in the rolling 24 hours (compare with dailyLimit)'),
  poolIds: z.array(z.string()).describe('the pools the account belongs to'),
}).meta({ id: 'SenderAccount' });

const senderPool = z.object({
  id: z.string(),
  name: z.string(),
  dailyCapacity: z.number().int(),
  remainingVolume: z.number().int().describe('dailyCapacity minus messages sent through the pool in the last 24 hours'),
  remainingToday: z.number().int().describe('same as remainingVolume (alternate name)'),
  senderAccountIds: z.array(z.string()),
  senderCount: z.number().int(),
}).meta({ id: 'SenderPool' });

export { senderAccount, senderPool };

export const senderRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/sender-accounts',
    access: 'admin',
    tag: 'Senders',
    operationId: 'listSenderAccounts',
    summary: 'List sender accounts',
    response: z.array(senderAccount),
    async handler({ auth, services }) {
      return services.dashboardSenders.list(auth.workspaceId);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sender-pools',
    access: 'admin',
    tag: 'Senders',
    operationId: 'listSenderPools',
    summary: 'List sender pools with their rolling 24-hour remaining volume',
    response: z.array(senderPool),
    async handler({ auth, services }) {
      return services.senders.listPools(auth.workspaceId);
    },
  }),
];
