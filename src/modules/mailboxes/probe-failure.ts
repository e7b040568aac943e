import { z } from 'zod';
import { ApiError } from '../../shared/errors.ts';
import type { ProbeOutcome } from '../../adapters/mailprobe.ts';

// A mail server that refused the live test of an account or a mailbox (the sender form, an
// SDR's mail connection): 422 mail_probe_failed with the server's own words and what to do.
// Here, beside the mailboxes, so that the SDR service and the dashboard both depend on it and
// not on each other.

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
