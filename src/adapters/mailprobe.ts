import nodemailer from 'nodemailer';
import { connectionOptions } from './smtp.ts';
import { imapClient } from './imap.ts';

export type ProbeOutcome =
  | { ok: true }
  | { ok: false; kind: 'auth_failed' | 'rate_limited' | 'unreachable'; error: string };

/** Checks that a mailbox's SMTP and IMAP servers accept its credentials. */
export interface MailProbe {
  smtp(url: string): Promise<ProbeOutcome>;
  imap(url: string): Promise<ProbeOutcome>;
}

const TIMEOUT_MS = 15_000;

/**
 * Classifies a nodemailer/imapflow failure the way mail connection health needs it. The
 * server's own words are kept only when they are an SMTP reply (a 3-digit code) or come from
 * the IMAP client's parsing of an IMAP answer: the probe connects where its caller says (an
 * SDR's dashboard session included), and the first line of whatever listens there (an internal
 * service's banner) is nobody's business but the operator's.
 */
export function classifyMailError(err: unknown, protocol: 'smtp' | 'imap' = 'smtp'): Exclude<ProbeOutcome, { ok: true }> {
  const e = err as { code?: string; responseCode?: number; authenticationFailed?: boolean; message?: string; response?: unknown };
  const reply = typeof e.response === 'string' ? e.response : undefined;
  // imapflow's response is its parse of a tagged IMAP answer (an object for some, as a BYE);
  // nodemailer's is the raw line the server sent, an SMTP reply or anything else.
  const smtpReply = reply !== undefined && /^\d{3}(?:[ -]|$)/.test(reply.trim());
  const error = (
    reply !== undefined && (protocol === 'imap' || smtpReply) ? reply
    : reply !== undefined ? 'the server did not answer as an SMTP server (its greeting is no SMTP reply)'
    : (e.message ?? String(err))
  ).slice(0, 500);
  if (e.code === 'EAUTH' || e.authenticationFailed || e.responseCode === 535 || e.responseCode === 534) return { ok: false, kind: 'auth_failed', error };
  if (e.responseCode === 421 || e.responseCode === 454 || e.responseCode === 450 || e.responseCode === 451) return { ok: false, kind: 'rate_limited', error };
  return { ok: false, kind: 'unreachable', error };
}

export const realMailProbe: MailProbe = {
  async smtp(url) {
    const transport = nodemailer.createTransport(connectionOptions(url, TIMEOUT_MS));
    try {
      await transport.verify();
      return { ok: true };
    } catch (err) {
      return classifyMailError(err);
    } finally {
      transport.close();
    }
  },
  async imap(url) {
    const client = imapClient(url, { connectionTimeout: TIMEOUT_MS, greetingTimeout: TIMEOUT_MS, socketTimeout: TIMEOUT_MS });
    try {
      await client.connect();
      await client.logout();
      return { ok: true };
    } catch (err) {
      client.close();
      return classifyMailError(err, 'imap');
    }
  },
};
