// Mail server URLs (contract §2): smtp://user:pass@host:port (plain, STARTTLS when offered),
// smtps:// (implicit TLS), imap://, imaps://; user and password percent-encoded.
export interface MailServer {
  protocol: 'smtp' | 'imap';
  secure: boolean;
  host: string;
  port: number;
  user?: string;
  pass?: string;
}

const DEFAULT_PORTS = { smtp: 587, smtps: 465, imap: 143, imaps: 993 } as const;

export function parseMailUrl(raw: string, expected: 'smtp' | 'imap'): MailServer {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`not a valid ${expected} URL`);
  }
  const scheme = url.protocol.replace(/:$/, '') as keyof typeof DEFAULT_PORTS;
  if (scheme !== expected && scheme !== `${expected}s`) throw new Error(`must start with ${expected}:// or ${expected}s://`);
  if (!url.hostname) throw new Error('has no host');
  if (url.pathname && url.pathname !== '/' && url.pathname !== '') throw new Error('must not have a path');
  const port = url.port ? Number(url.port) : DEFAULT_PORTS[scheme];
  return {
    protocol: expected,
    secure: scheme.endsWith('s'),
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port,
    user: url.username ? decodeURIComponent(url.username) : undefined,
    pass: url.password ? decodeURIComponent(url.password) : undefined,
  };
}

/**
 * Whether two IMAP URLs name the same mailbox: the same host and user (both compared without
 * case); the scheme, port and password may differ. A URL that does not parse names no mailbox.
 */
export function sameMailbox(a: string, b: string): boolean {
  try {
    const x = parseMailUrl(a, 'imap');
    const y = parseMailUrl(b, 'imap');
    return x.host.toLowerCase() === y.host.toLowerCase() && (x.user ?? '').toLowerCase() === (y.user ?? '').toLowerCase();
  } catch {
    return false;
  }
}

/** host:port without credentials, safe to show and log. */
export function describeServer(s: MailServer): string {
  return `${s.protocol}${s.secure ? 's' : ''}://${s.host}:${s.port}`;
}
