import http from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * The HTTP server every mailgate process (and the test harness) listens with. Requests Node's
 * parser refuses before Koa sees them (a malformed request line, headers over the size limit, a
 * request that takes too long to arrive) are answered in the contract's envelope too, instead of
 * Node's bare status line.
 */
export function createHttpServer(listener: http.RequestListener): http.Server {
  // Node's own check of Host answers a bare 400 with an empty body: done here, in the envelope.
  const server = http.createServer({ requireHostHeader: false }, (req, res) => {
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      req.resume();
      answer(res, 400, 'invalid_request', 'an HTTP/1.1 request must have a Host header');
      return;
    }
    listener(req, res);
  });
  server.keepAliveTimeout = 5_000;
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
