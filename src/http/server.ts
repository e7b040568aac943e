import http from 'node:http';
import type { Duplex } from 'node:stream';

/** Node's own keep-alive timeout, which a server gets when its caller names none. */
const NODE_KEEPALIVE_MS = 5_000;

/** The responses a server has under way, and whether it is closing (closeGracefully). */
interface ServerState {
  closing: boolean;
  responses: Set<http.ServerResponse>;
}
const states = new WeakMap<http.Server, ServerState>();

/**
 * The HTTP server every mailgate process (and the test harness) listens with. Requests Node's
 * parser refuses before Koa sees them (a malformed request line, headers over the size limit, a
 * request that takes too long to arrive) are answered in the contract's envelope too, instead of
 * Node's bare status line.
 *
 * `keepAliveTimeoutMs` (the daemon's MAILGATE_HTTP_KEEPALIVE_TIMEOUT, 65 s): how long an idle
 * keep-alive connection stays open. Node's 5 s was shorter than a reverse proxy keeps its idle
 * connections to an upstream (nginx's upstream keepalive_timeout and AWS ALB: 60 s), so the
 * proxy could send a request on a connection mailgate was closing and answer it 502; and a
 * desk polling every 10 s opened a new connection for each poll (docs/decisions.md). Closing,
 * the server stops keeping connections at once (closeGracefully).
 */
export function createHttpServer(listener: http.RequestListener, opts: { keepAliveTimeoutMs?: number } = {}): http.Server {
  const state: ServerState = { closing: false, responses: new Set() };
  // Node's own check of Host answers a bare 400 with an empty body: done here, in the envelope.
  const server = http.createServer({ requireHostHeader: false }, (req, res) => {
    if (state.closing) res.shouldKeepAlive = false;
    state.responses.add(res);
    res.once('close', () => state.responses.delete(res));
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      req.resume();
      answer(res, 400, 'invalid_request', 'an HTTP/1.1 request must have a Host header');
      return;
    }
    listener(req, res);
  });
  states.set(server, state);
  server.keepAliveTimeout = opts.keepAliveTimeoutMs ?? NODE_KEEPALIVE_MS;
  server.on('clientError', answerClientError);
  // CONNECT (a proxy tunnel) is no method of this server: without a listener Node closed the
  // socket without a word.
  server.on('connect', (req: http.IncomingMessage, socket: Duplex) => {
    const body = JSON.stringify({ error: { code: 'method_not_allowed', message: 'CONNECT is not supported: this is no proxy' } });
    socket.on('error', () => {});
    socket.end(`HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
  // An `Expect` other than 100-continue: Node answers a bare 417 unless told otherwise.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    req.resume();
    answer(res, 417, 'expectation_failed', `Expect: ${String(req.headers.expect).slice(0, 100)} is not supported (only 100-continue)`);
  });
  return server;
}

/**
 * Stops the server taking connections and ends the ones it has as soon as each is idle,
 * without cutting a request short: idle connections close now; a response under way whose
 * headers have not gone says `Connection: close` and its connection closes after it (as does
 * one of a request that arrives meanwhile on a kept connection); a response whose headers went
 * out with keep-alive has its connection closed once it has finished. Node's `close` alone
 * left such a connection open for the keep-alive timeout after its last response. Resolves
 * once every connection is closed (`closeAllConnections` cuts what is left).
 */
export function closeGracefully(server: http.Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const state = states.get(server);
  if (state && !state.closing) {
    state.closing = true;
    // Node makes a connection idle after its response's 'finish' listeners have run.
    const closeIdleSoon = () => setImmediate(() => server.closeIdleConnections());
    for (const res of state.responses) {
      if (!res.headersSent) res.shouldKeepAlive = false;
      else if (res.writableFinished) closeIdleSoon();
      else res.once('finish', closeIdleSoon);
    }
  }
  server.closeIdleConnections();
  return closed;
}

function answer(res: http.ServerResponse, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { code, message } });
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
  res.end(body);
}

function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // A peer that went away has nobody to read an answer.
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, reason, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large', 'headers_too_large', 'the request headers exceed the 16 KB limit']
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Request Timeout', 'request_timeout', 'the request did not arrive in time']
    : [400, 'Bad Request', 'invalid_request', 'the request is not valid HTTP/1.1'];
  const body = JSON.stringify({ error: { code, message } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
