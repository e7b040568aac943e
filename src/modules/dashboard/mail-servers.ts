import { z } from 'zod';
import { ApiError } from '../../shared/errors.ts';
import type { ProbeOutcome } from '../../adapters/mailprobe.ts';

// The dashboard's forms take a mail server as fields, not as the CLI's URL (contract §2): they
// become the same smtp(s):// / imap(s):// URL, so storage, the probe and the workers are shared.

const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$|^\[[0-9A-Fa-f:.]+\]$|^[0-9A-Fa-f]*:[0-9A-Fa-f:.]+$/;

export const mailServerSchema = z
  .strictObject({
    host: z.string().trim().min(1, 'must not be empty').max(253, 'at most 253 characters').regex(HOST, 'must be a host name or an IP address'),
    port: z.number().int().min(1).max(65535),
    secure: z.boolean().describe('true: implicit TLS (smtps 465, imaps 993); false: plain, upgraded with STARTTLS when the server offers it (587, 143)'),
    user: z.string().min(1, 'must not be empty').max(320, 'at most 320 characters'),
    pass: z.string().min(1, 'must not be empty').max(1000, 'at most 1000 characters').describe('stored encrypted; never returned'),
  })
  .meta({ id: 'MailServerInput', description: 'one mail server and its login' });

export type MailServerInput = z.output<typeof mailServerSchema>;

export function mailUrl(protocol: 'smtp' | 'imap', s: MailServerInput): string {
  const host = s.host.includes(':') && !s.host.startsWith('[') ? `[${s.host}]` : s.host;
  return `${protocol}${s.secure ? 's' : ''}://${encodeURIComponent(s.user)}:${encodeURIComponent(s.pass)}@${host}:${s.port}`;
}

export const probeView = z
  .object({
    ok: z.boolean(),
    kind: z.enum(['auth_failed', 'rate_limited', 'unreachable']).optional().describe('why it failed'),
    error: z.string().optional().describe("the server's answer (or the network error), as given"),
  })
  .meta({ id: 'MailProbeResult' });

export const probeFailedFields = {
  probe: z
    .object({
      protocol: z.enum(['smtp', 'imap']),
      kind: z.enum(['auth_failed', 'rate_limited', 'unreachable']),
      error: z.string().describe("the server's answer (or the network error), as given"),
    })
    .describe('with 422 mail_probe_failed: which server refused and its words'),
};

const ADVICE: Record<'auth_failed' | 'rate_limited' | 'unreachable', string> = {
  auth_failed: 'check the user name and password (many providers need an app password)',
  rate_limited: 'the server asks to try again later',
  unreachable: 'check the host, port and TLS setting',
};

/** 422 mail_probe_failed: the server refused; nothing was saved. */
export function probeFailed(protocol: 'smtp' | 'imap', outcome: Exclude<ProbeOutcome, { ok: true }>): ApiError {
  const name = protocol.toUpperCase();
  return new ApiError(422, 'mail_probe_failed', `the ${name} server refused the connection (${outcome.kind.replace('_', ' ')}): ${outcome.error} -- ${ADVICE[outcome.kind]}; nothing was saved`, {
    probe: { protocol, kind: outcome.kind, error: outcome.error },
  });
}
