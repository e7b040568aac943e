import { wellFormed } from '../shared/text.ts';
import { Agent, type Dispatcher } from 'undici';
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { isIpLiteral, nonPublicReason } from './http-address.ts';

// Outgoing HTTPS for webhooks. The SSRF guard sits in the socket's own DNS lookup, so the
// address that is checked is the address that is connected to: a DNS answer that changes
// between the check and the connection (rebinding) cannot slip through. IP-literal hosts skip
// DNS and are checked before the request. Redirects are never followed.

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

/** The longest webhook URL, as given and once normalized. */
export const WEBHOOK_URL_MAX = 2048;

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
  // The URL parser takes port 0, which no receiver listens on (an HTTP client would quietly use 443).
  if (url.port === '0') throw new Error('has port 0; give a port from 1 to 65535, or none for 443');
  // The stored and attempted form is the normalized one, which percent-encodes what the raw
  // string carried as is (a non-ASCII character becomes up to 12 characters).
  if (url.href.length > WEBHOOK_URL_MAX) throw new Error(`is ${url.href.length} characters once normalized (percent-encoded); at most ${WEBHOOK_URL_MAX}`);
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
  /** Connections kept per receiver origin (the dispatcher passes its concurrency). */
  maxSockets?: number;
}

/** Where a webhook URL sends its request, parsed once per URL. */
interface Target {
  origin: string;
  path: string;
  /** Set when the URL itself must be refused (not https, or a non-public IP literal). */
  refusal: string | null;
}

export interface OnceResult {
  statusCode: number | null;
  error: string | null;
  /** The connection closed under the request before any answer (worth one more try). */
  closed?: boolean;
}

/**
 * One request's handler (undici's dispatch API: no response stream, the body is read and
 * dropped). It answers at most once, with the status line or the reason there is none; a body
 * still arriving when the attempt's timer fires is cut off (the answer is known by then, but the
 * connection is not worth keeping). A class, not closures, because it runs for every delivery.
 */
class AttemptHandler implements Dispatcher.DispatchHandler {
  private settled = false;
  private controller: Dispatcher.DispatchController | null = null;

  constructor(private readonly attempt: Attempt) {}

  private settle(r: OnceResult): void {
    if (this.settled) return;
    this.settled = true;
    this.attempt.answered(this, r);
  }

  /** The attempt's time is up: answer with the timeout and drop the request. */
  abort(error: string): void {
    this.settle({ statusCode: null, error });
    this.controller?.abort(new Error(error));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.settled) controller.abort(new Error(this.attempt.timeoutError));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    // 1xx answers are interim; the body that follows a final one is read and dropped.
    if (statusCode >= 200) this.settle({ statusCode, error: null });
  }

  onResponseData(): void {}

  onResponseEnd(): void {
    this.attempt.ended(this);
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error & { code?: string; cause?: unknown }): void {
    this.failed(err);
  }

  failed(err: Error & { code?: string; cause?: unknown }): void {
    this.attempt.ended(this);
    if (this.settled) return;
    this.settle(describeRequestError(err));
  }
}

/**
 * One POST of a webhook body: up to two requests (a connection closed under the first before
 * any answer gets one more try) under one timer for the whole attempt, answered through a
 * callback once. A class, not closures or promises, because it runs for every delivery.
 */
/** How long a final answer's body may take to end after its status line before it is cut off. */
const BODY_GRACE_MS = 1_000;

class Attempt {
  private readonly started = performance.now();
  private timer: NodeJS.Timeout;
  private current: AttemptHandler;
  private tries = 0;
  private done = false;

  constructor(
    private readonly client: Dispatcher,
    private readonly target: Target,
    private readonly body: Buffer,
    private readonly headers: Record<string, string>,
    readonly timeoutError: string,
    private readonly timeoutMs: number,
    private readonly cb: (r: PostOutcome) => void,
  ) {
    this.timer = setTimeout(Attempt.timeUp, timeoutMs, this);
    this.current = this.send();
  }

  private static timeUp(a: Attempt): void {
    a.current.abort(a.timeoutError);
  }

  private send(): AttemptHandler {
    const h = new AttemptHandler(this);
    this.current = h;
    try {
      this.client.dispatch({ origin: this.target.origin, path: this.target.path, method: 'POST', headers: this.headers, body: this.body }, h);
    } catch (err) {
      // A request the client refuses outright (a header value it rejects, say) fails like any
      // other, so the caller hears of every attempt the same way.
      h.failed(err instanceof Error ? err : new Error(String(err)));
    }
    return h;
  }

  answered(h: AttemptHandler, r: OnceResult): void {
    if (h !== this.current || this.done) return;
    // A connection closed under the request before any answer (typically a keep-alive
    // connection the receiver closed while idle) is not the receiver's answer, so the request
    // goes once more, on whatever connection the pool gives next. undici does not say whether a
    // connection was reused, so this also retries a receiver that reads the request and then
    // resets: it sees the POST twice (same event id), which receivers dedupe anyway.
    const elapsed = performance.now() - this.started;
    if (r.closed && this.tries === 0 && elapsed < this.timeoutMs) {
      this.tries++;
      this.send();
      return;
    }
    this.done = true;
    if (r.statusCode === null) clearTimeout(this.timer);
    else {
      // The answer is known; the body only holds the connection. It gets BODY_GRACE_MS to end
      // (it usually came with the status line), then it is cut off: kept until the attempt's
      // timer, a body trickling in held the connection for the whole timeout, and the attempts
      // queued behind it for the same receiver timed out on their own timers.
      clearTimeout(this.timer);
      this.timer = setTimeout(Attempt.timeUp, Math.max(0, Math.min(BODY_GRACE_MS, this.timeoutMs - elapsed)), this);
    }
    this.cb({ statusCode: r.statusCode, error: r.error, durationMs: Math.round(elapsed) });
  }

  ended(h: AttemptHandler): void {
    if (h === this.current && this.done) clearTimeout(this.timer);
  }
}

/**
 * A failed request as an attempt's `error`: "CODE: message" (a refusal of the SSRF guard as
 * "refused: ..."), at most 500 characters, control characters replaced by spaces and broken
 * surrogates by U+FFFD (the error is stored, and PostgreSQL refuses a NUL or invalid Unicode).
 */
export function describeRequestError(err: Error & { code?: string; cause?: unknown }): OnceResult {
  const cause = err.cause instanceof Error ? (err.cause as Error & { code?: string }) : null;
  const refusal = err instanceof SsrfRefusal ? err : cause instanceof SsrfRefusal ? cause : null;
  const code = err.code ?? cause?.code;
  const message = refusal ? `refused: ${refusal.message}` : `${code ? `${code}: ` : ''}${err.message}`;
  // A cut through a surrogate pair, or a lone surrogate in the message, would be invalid
  // Unicode in the stored JSON (PostgreSQL refuses it, and the whole outcome batch with it).
  const text = wellFormed(message.replace(/[\u0000-\u001f\u007f]/g, ' ').slice(0, 500));
  return { statusCode: null, error: text, closed: code !== undefined && CLOSED_UNDER_US.has(code) };
}

/** Errors of a connection that closed under a request before any answer: worth one more try. */
const CLOSED_UNDER_US = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/**
 * POSTs webhook bodies over keep-alive HTTPS connections (undici: about half the CPU per
 * request of node:https, measured in docs/benchmarks.md). A 2xx answer within `timeoutMs`
 * (covering DNS, connect, TLS and the status line) is a success; the caller decides what any
 * other outcome means. Redirects are not followed (undici follows none unless asked).
 */
export class WebhookHttpClient {
  private readonly agent: Agent;
  private readonly targets = new Map<string, Target>();
  private readonly timeoutError: string;

  constructor(private readonly opts: WebhookHttpOptions) {
    this.timeoutError = `timeout: no answer within ${opts.timeoutMs} ms`;
    const resolve = opts.resolve ?? systemResolver;
    const lookup = ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
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
    this.agent = new Agent({
      connections: opts.maxSockets ?? 64,
      pipelining: 1,
      // Idle connections close after 4 s; a receiver's Keep-Alive header sets it instead (its
      // timeout less 2 s, at most 60 s).
      keepAliveTimeout: 4_000,
      keepAliveMaxTimeout: 60_000,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      // The socket's own DNS lookup is where the SSRF guard sits: the address checked is the
      // address connected to. Production trusts the system store plus NODE_EXTRA_CA_CERTS (read
      // by Node at start-up); `ca` exists so in-process tests can trust their own CA.
      connect: { lookup, timeout: opts.timeoutMs, ...(opts.ca ? { ca: opts.ca } : {}) },
    });
  }

  private target(rawUrl: string): Target {
    let t = this.targets.get(rawUrl);
    if (t) return t;
    let url: URL | null = null;
    try {
      url = new URL(rawUrl);
    } catch {
      // refused below
    }
    let refusal: string | null = null;
    if (!url) refusal = 'invalid URL';
    else if (url.protocol !== 'https:') refusal = 'refused: the URL is not https';
    else {
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      // An IP literal is connected to without a lookup, so it is judged here.
      const reason = !this.opts.allowPrivate && isIpLiteral(host) ? nonPublicReason(host) : null;
      if (reason) refusal = `refused: ${host} is a ${reason} address (SSRF guard)`;
    }
    t = { origin: url?.origin ?? '', path: url ? `${url.pathname}${url.search}` : '', refusal };
    if (this.targets.size >= 1_000) this.targets.clear();
    this.targets.set(rawUrl, t);
    return t;
  }

  /** POSTs `body` to `rawUrl`; resolves with the receiver's answer or why there is none. */
  post(rawUrl: string, body: Buffer, headers: Record<string, string>): Promise<PostOutcome> {
    return new Promise((resolve) => this.postThen(rawUrl, body, headers, resolve));
  }

  /**
   * post() with a callback instead of a promise (the dispatcher's hot path). `cb` runs once;
   * for a request the client refuses outright it may run before postThen returns.
   */
  postThen(rawUrl: string, body: Buffer, headers: Record<string, string>, cb: (r: PostOutcome) => void): void {
    const target = this.target(rawUrl);
    if (target.refusal) {
      const refusal = target.refusal;
      queueMicrotask(() => cb({ statusCode: null, error: refusal, durationMs: 0 }));
      return;
    }
    new Attempt(this.agent, target, body, headers, this.timeoutError, this.opts.timeoutMs, cb);
  }

  close(): void {
    void this.agent.destroy().catch(() => {});
  }
}
