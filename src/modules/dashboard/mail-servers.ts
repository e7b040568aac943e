import { isIPv6 } from 'node:net';
import { z } from 'zod';

// The dashboard's forms take a mail server as fields, not as the CLI's URL (contract §2): they
// become the same smtp(s):// / imap(s):// URL, so storage, the probe and the workers are shared.

const HOST_NAME = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/**
 * A host name (or IPv4 address), or an IPv6 address with or without its brackets, that also
 * makes a valid URL (a zone such as `%eth0` does not). A pattern of hex digits and colons took
 * `1:2` or `::::::::::` for IPv6; the URL made of it failed to parse and the request was a 500.
 */
function isMailHost(host: string): boolean {
  if (HOST_NAME.test(host)) return true;
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return isIPv6(bare) && URL.canParse(`smtp://u@[${bare}]:25`);
}

export const mailServerSchema = z
  .strictObject({
    host: z.string().trim().min(1, 'must not be empty').max(253, 'at most 253 characters').refine(isMailHost, 'must be a host name or an IP address'),
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
