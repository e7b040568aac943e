import https from 'node:https';
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { isIpLiteral, nonPublicReason } from './http-address.ts';

// Outgoing HTTPS for webhooks. The SSRF guard sits in the socket's own DNS lookup, so the
// address that is checked is the address that is connected to: a DNS answer that changes
// between the check and the connection (rebinding) cannot slip through. IP-literal hosts skip
// DNS and are checked before the request. Redirects are never followed (node:https does not).

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to all its addresses (injectable for tests). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

export class SsrfRefusal extends Error {
  readonly code = 'ESSRF';
}

/**
 * The SSRF verdict on a set of resolved addresses: refused when any of them is not public
 * (a host with one public and one private address could be steered to the private one).
 */
export function refuseAddresses(host: string, addresses: ResolvedAddress[]): SsrfRefusal | null {
  for (const a of addresses) {
    const reason = nonPublicReason(a.address);
    if (reason) return new SsrfRefusal(`${host} resolves to ${a.address}, a ${reason} address (SSRF guard)`);
  }
  return null;
}

/**
 * The syntax half of the registration check: https, a host, no credentials. Returns the parsed
 * URL or throws an Error whose message explains the refusal.
 */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error('is not a valid URL');
  }
  if (url.protocol !== 'https:') throw new Error('must use the https scheme');
  if (url.username || url.password) throw new Error('must not carry credentials (user:password@); receivers verify the signature instead');
  if (!url.hostname) throw new Error('has no host');
  return url;
}

/**
 * The address half: unless private addresses are allowed, the host must be a public IP literal
 * or resolve only to public addresses. Throws an Error explaining a refusal.
 */
export async function checkWebhookHost(url: URL, opts: { allowPrivate: boolean; resolve?: Resolver }): Promise<void> {
  if (opts.allowPrivate) return;
  const host = url.hostname;
  if (isIpLiteral(host)) {
    const reason = nonPublicReason(host);
    if (reason) throw new Error(`points to ${host}, a ${reason} address (SSRF guard)`);
    return;
  }
  let addresses: ResolvedAddress[];
  try {
    addresses = await (opts.resolve ?? systemResolver)(host);
  } catch (err) {
    throw new Error(`host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (!addresses.length) throw new Error(`host ${host} does not resolve`);
  const refusal = refuseAddresses(host, addresses);
  if (refusal) throw new Error(refusal.message);
}

export interface PostOutcome {
  /** The receiver's status code, or null when there was no answer. */
  statusCode: number | null;
  /** Why the attempt failed without a status (timeout, refusal, TLS, connection). */
  error: string | null;
  durationMs: number;
}

export interface WebhookHttpOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  /** Extra trusted CA certificates (PEM). Replaces the default trust store; tests only. */
  ca?: string | Buffer;
  resolve?: Resolver;
  maxSockets?: number;
}

/**
 * POSTs webhook bodies over keep-alive HTTPS connections. A 2xx answer within `timeoutMs`
 * (covering DNS, connect, TLS and the status line) is a success; the caller decides what any
 * other outcome means.
 */
export class WebhookHttpClient {
  private readonly agent: https.Agent;
  private readonly lookup: LookupFunction;

  constructor(private readonly opts: WebhookHttpOptions) {
    // Production trusts the system store plus NODE_EXTRA_CA_CERTS (read by Node at start-up);
    // `ca` exists so in-process tests can trust their own CA.
    this.agent = new https.Agent({
      keepAlive: true,
      maxSockets: opts.maxSockets ?? 64,
      scheduling: 'lifo',
      // Idle sockets close before a typical server's keep-alive timeout (Node's is 5 s).
      timeout: 4_000,
      ...(opts.ca ? { ca: opts.ca } : {}),
    });
    const resolve = opts.resolve ?? systemResolver;
    this.lookup = ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
      resolve(hostname).then(
        (addresses) => {
          if (!addresses.length) return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' }));
          if (!this.opts.allowPrivate) {
            const refusal = refuseAddresses(hostname, addresses);
            if (refusal) return callback(refusal);
          }
          if (options.all) callback(null, addresses);
          else callback(null, addresses[0].address, addresses[0].family);
        },
        (err: Error) => callback(err),
      );
    }) as unknown as LookupFunction;
  }

  async post(rawUrl: string, body: Buffer, headers: Record<string, string>): Promise<PostOutcome> {
    const started = performance.now();
    const done = (statusCode: number | null, error: string | null): PostOutcome => ({ statusCode, error, durationMs: Math.round(performance.now() - started) });
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return done(null, 'invalid URL');
    }
    if (url.protocol !== 'https:') return done(null, 'refused: the URL is not https');
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (!this.opts.allowPrivate && isIpLiteral(host)) {
      const reason = nonPublicReason(host);
      if (reason) return done(null, `refused: ${host} is a ${reason} address (SSRF guard)`);
    }
    const deadline = started + this.opts.timeoutMs;
    // A keep-alive socket the receiver closed while idle fails at once; that is not the
    // receiver's answer, so the request goes once more over a fresh connection.
    for (let tries = 0; ; tries++) {
      const r = await this.once(url, host, body, headers, deadline);
      if (r.staleSocket && tries === 0) continue;
      return done(r.statusCode, r.error);
    }
  }

  private once(url: URL, host: string, body: Buffer, headers: Record<string, string>, deadline: number) {
    return new Promise<{ statusCode: number | null; error: string | null; staleSocket?: boolean }>((resolve) => {
      let settled = false;
      const settle = (v: { statusCode: number | null; error: string | null; staleSocket?: boolean }) => {
        if (settled) return;
        settled = true;
        resolve(v);
      };
      const req = https.request({
        method: 'POST',
        host,
        port: url.port || 443,
        path: `${url.pathname}${url.search}`,
        servername: isIpLiteral(host) ? undefined : host,
        headers: { ...headers, 'content-length': String(body.length) },
        agent: this.agent,
        lookup: this.lookup,
      });
      const timer = setTimeout(() => {
        settle({ statusCode: null, error: `timeout: no answer within ${this.opts.timeoutMs} ms` });
        req.destroy();
      }, Math.max(0, deadline - performance.now()));
      req.on('response', (res) => {
        settle({ statusCode: res.statusCode ?? null, error: null });
        // The body is not needed; drain it (bounded by the same deadline) so the socket is reused.
        res.on('end', () => clearTimeout(timer));
        res.on('error', () => clearTimeout(timer));
        res.resume();
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (settled) return;
        const stale = req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE');
        const message = err instanceof SsrfRefusal ? `refused: ${err.message}` : `${err.code ? `${err.code}: ` : ''}${err.message}`;
        settle({ statusCode: null, error: message.slice(0, 500), staleSocket: stale });
      });
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
