import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { isoTime, emailText } from '../../http/doc-schemas.ts';
import { ApiError } from '../../shared/errors.ts';
import { checkOrigin, clearSessionCookie, readSessionToken, setSessionCookie } from '../../http/session.ts';
import { mailServerSchema } from './mail-servers.ts';
import { probeFailedFields } from '../mailboxes/probe-failure.ts';
import { NAME_MAX, NAME_TOO_LONG } from '../../shared/names.ts';

// The dashboard's own routes (docs/dashboard.md): the session, and the flows the spec keeps out
// of the API. Mounted with the dashboard authorizer (http/auth.ts dashboardAuthorizer): a
// session cookie with its CSRF token, never an API key.

const sessionView = z
  .object({
    role: z.enum(['admin', 'sdr']),
    workspaceId: z.string(),
    workspaceName: z.string(),
    sdrId: z.string().nullable().describe('the SDR of an sdr key; null for admin'),
    keyId: z.string().describe('the API key the session signed in with'),
    csrfToken: z.string().describe('send as the X-CSRF-Token header on every POST, PATCH and DELETE'),
    idleTimeoutSeconds: z.number().int().describe('the session ends after this long without a request'),
  })
  .meta({ id: 'DashboardSession' });

const setCookieHeader = {
  'Set-Cookie': {
    description: '`mailgate_session=<opaque>; path=/; samesite=strict; httponly` (+ `secure` over HTTPS)',
    schema: { type: 'string' },
    required: true,
  },
};

const keyParams = z.object({ keyId: z.string().min(1).max(200).describe('an API key id (`key_...`)') });
const sdrParams = z.object({ sdrId: z.string().min(1).max(200).describe('an SDR id (`sdr_...`)') });

const createKeyBody = z
  .strictObject({
    name: z.string().trim().min(1, 'must not be empty').max(NAME_MAX, NAME_TOO_LONG),
    role: z.enum(['admin', 'sdr']),
    sdrId: z.string().min(1).max(200).optional().describe('required for role sdr: the SDR the key acts for; refused for admin'),
  })
  .superRefine((b, ctx) => {
    if (b.role === 'sdr' && !b.sdrId) ctx.addIssue({ code: 'custom', path: ['sdrId'], message: 'is required for role sdr' });
    if (b.role === 'admin' && b.sdrId) ctx.addIssue({ code: 'custom', path: ['sdrId'], message: 'is only for role sdr' });
  });

export const dashboardRoutes = [
  defineRoute({
    method: 'post',
    path: '/dashboard/api/session',
    access: 'none',
    dashboard: 'sign-in',
    tag: 'Dashboard',
    operationId: 'signIn',
    summary: 'Sign in to the dashboard with an API key (sets the session cookie)',
    body: z.strictObject({ apiKey: z.string().trim().min(1, 'must not be empty').max(200, 'at most 200 characters') }),
    response: sessionView,
    responseHeaders: setCookieHeader,
    errors: { 401: 'authentication_failed', 403: 'forbidden | csrf_failed', 404: 'workspace_not_found' },
    async handler({ body, services, ctx }) {
      checkOrigin(ctx);
      const { token, view } = await services.dashboardSessions.signIn(body.apiKey, readSessionToken(ctx));
      setSessionCookie(ctx, token);
      return view;
    },
  }),
  defineRoute({
    method: 'get',
    path: '/dashboard/api/session',
    access: 'none',
    dashboard: 'any',
    tag: 'Dashboard',
    operationId: 'getSession',
    summary: 'The signed-in session (with its CSRF token)',
    response: sessionView,
    handler: ({ auth, services, ctx }) => services.dashboardSessions.view(readSessionToken(ctx)!, auth),
  }),
  defineRoute({
    method: 'delete',
    path: '/dashboard/api/session',
    access: 'none',
    dashboard: 'sign-out',
    tag: 'Dashboard',
    operationId: 'signOut',
    summary: 'Sign out: ends the session and clears the cookie',
    status: 204,
    async handler({ services, ctx }) {
      await services.dashboardSessions.signOut(readSessionToken(ctx)!);
      clearSessionCookie(ctx);
    },
  }),
  defineRoute({
    method: 'post',
    path: '/dashboard/api/api-keys',
    access: 'none',
    dashboard: 'admin',
    tag: 'Dashboard',
    operationId: 'createApiKey',
    summary: 'Create an API key (the key is in this answer only)',
    body: createKeyBody,
    status: 201,
    response: z
      .object({
        id: z.string(),
        key: z.string().describe('the secret: shown only here, stored only as a hash'),
        keyPrefix: z.string().describe('the first characters of the key, to recognise it later'),
        name: z.string().nullable(),
        role: z.enum(['admin', 'sdr']),
        sdrId: z.string().nullable(),
        createdAt: isoTime,
      })
      .meta({ id: 'CreatedApiKey' }),
    errors: { 404: 'sdr_not_found' },
    handler: ({ body, auth, services }) => services.dashboard.createKey(auth.workspaceId, body),
  }),
  defineRoute({
    method: 'post',
    path: '/dashboard/api/api-keys/:keyId/revoke',
    access: 'none',
    dashboard: 'admin',
    tag: 'Dashboard',
    operationId: 'revokeApiKey',
    summary: 'Revoke an API key (its dashboard sessions end too)',
    params: keyParams,
    response: z.object({ id: z.string(), revoked: z.literal(true), revokedAt: isoTime }),
    errors: { 404: 'key_not_found' },
    handler: ({ params, auth, services }) => services.dashboard.revokeKey(auth.workspaceId, params.keyId),
  }),
  defineRoute({
    method: 'delete',
    path: '/dashboard/api/suppression-list/:email',
    access: 'none',
    dashboard: 'admin',
    tag: 'Dashboard',
    operationId: 'removeSuppression',
    summary: 'Remove an address from the suppression list (the spec\u2019s dashboard-only removal)',
    params: z.object({ email: z.string().min(1).max(320).describe('the suppressed address, percent-encoded (any case)') }),
    response: z.object({ removed: z.literal(1) }),
    errors: { 404: 'suppression_not_found' },
    handler: ({ params, auth, services }) => services.dashboard.removeSuppression(auth.workspaceId, params.email),
  }),
  defineRoute({
    method: 'post',
    path: '/dashboard/api/sdrs/:sdrId/mail-connection',
    access: 'none',
    dashboard: 'any',
    tag: 'Dashboard',
    operationId: 'connectSdrMail',
    summary: "Connect (or reconnect) an SDR's mailbox: tested live against its SMTP and IMAP servers, stored only when both accept",
    description:
      'An admin session connects any SDR of the workspace; an SDR session only its own SDR. On a refusal the answer is 422 `mail_probe_failed` with `probe` (which server, why, its words) and nothing is saved.',
    params: sdrParams,
    body: z.strictObject({
      email: z.string().trim().max(320).optional().describe('the mailbox address (default: the SDR email)'),
      smtp: mailServerSchema,
      imap: mailServerSchema,
    }),
    response: z
      .object({
        id: z.string(),
        mailConnected: z.literal(true),
        mailEmail: emailText,
        healthState: z.literal('active'),
        lastSyncedAt: isoTime.nullable(),
      })
      .meta({ id: 'MailConnection' }),
    errors: { 404: 'sdr_not_found', 422: 'mail_probe_failed' },
    errorFields: { 422: probeFailedFields },
    async handler({ params, body, auth, services }) {
      if (auth.role === 'sdr' && auth.sdrId !== params.sdrId) throw new ApiError(403, 'forbidden', "an SDR session connects only its own SDR's mailbox");
      return services.dashboard.connectSdrMail(auth.workspaceId, params.sdrId, body);
    },
  }),
];
