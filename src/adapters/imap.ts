import { ImapFlow, type ImapFlowOptions } from 'imapflow';
import { parseMailUrl } from './mailurl.ts';

/** An imapflow client for an imap(s):// URL (no logging; errors are handled by the caller). */
export function imapClient(url: string, extra: Partial<ImapFlowOptions> = {}): ImapFlow {
  const s = parseMailUrl(url, 'imap');
  const client = new ImapFlow({
    host: s.host,
    port: s.port,
    secure: s.secure,
    auth: { user: s.user ?? '', pass: s.pass ?? '' },
    logger: false,
    ...extra,
  });
  client.on('error', () => {});
  return client;
}
