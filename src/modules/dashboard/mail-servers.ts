import { z } from 'zod';

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
