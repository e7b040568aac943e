import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { closeGracefully, createHttpServer } from '../../src/http/server.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';

/** A GET over `agent`; resolves with the answer, its body, and whether the request went on a kept connection. */
function get(port: number, path: string, agent: http.Agent) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string; reused: boolean }>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, reused: req.reusedSocket }));
    });
    req.on('error', reject);
  });
}

/** Counts the server's connections and how many of them have closed. */
function connectionCounter(server: http.Server) {
  const c = { opened: 0, closed: 0 };
  server.on('connection', (s) => {
    c.opened++;
    s.once('close', () => c.closed++);
  });
  return c;
}

/**
 * A server (65 s keep-alive) whose requests to /held wait for `release` before `finish` answers
 * them; `arrived` counts the ones that reached it. Any other path is answered at once.
 */
function heldServer(finish: (res: http.ServerResponse) => void, start: (res: http.ServerResponse) => void = () => {}) {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const s = { arrived: 0, release: () => release() };
  const server = createHttpServer(
    (req, res) => {
      if (req.url !== '/held') return void res.end('ok');
      s.arrived++;
      start(res);
      void held.then(() => finish(res));
    },
    { keepAliveTimeoutMs: 65_000 },
  );
  return Object.assign(s, { server });
}

describe('HTTP keep-alive (MAILGATE_HTTP_KEEPALIVE_TIMEOUT)', function () {
  this.timeout(60_000);

  describe('the API', () => {
    let app: TestApp;
    after(() => app?.close());

    it("keeps an idle connection for 65 s by default: a request 6 s after the last (past Node's 5 s) goes on the same connection", async () => {
      app = await startTestApp();
      assert.equal(app.config.httpKeepAliveTimeout, 65_000);
      const port = Number(new URL(app.url).port);
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const first = await get(port, '/healthz', agent);
        assert.equal(first.status, 200);
        assert.equal(first.reused, false);
        assert.equal(first.headers.connection, 'keep-alive');
        assert.equal(first.headers['keep-alive'], 'timeout=65');
        await new Promise((r) => setTimeout(r, 6_000));
        const second = await get(port, '/healthz', agent);
        assert.equal(second.status, 200);
        assert.equal(second.reused, true, 'the second request went on the connection kept from the first');
      } finally {
        agent.destroy();
      }
    });
  });

  describe('createHttpServer and closeGracefully', () => {
    async function listen(server: http.Server) {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      return (server.address() as AddressInfo).port;
    }

    it('closes an idle connection after the timeout it is given', async () => {
      const server = createHttpServer((_req, res) => res.end('ok'), { keepAliveTimeoutMs: 1_000 });
      const port = await listen(server);
      // A raw socket: Node's own Agent closes a kept socket itself a second before the server's hint.
      const socket = net.connect(port, '127.0.0.1');
      try {
        let answer = '';
        socket.setEncoding('utf8');
        socket.on('data', (c: string) => (answer += c));
        const ended = new Promise<number>((resolve) => socket.once('end', () => resolve(Date.now())));
        socket.write('GET / HTTP/1.1\r\nHost: mailgate.test\r\n\r\n');
        await waitFor('the answer', async () => answer.endsWith('ok'));
        const answeredAt = Date.now();
        assert.match(answer, /\r\nKeep-Alive: timeout=1\r\n/i);
        const idle = (await ended) - answeredAt;
        // Node waits a second past the timeout it announces (its buffer for clients that use the hint).
        assert.ok(idle >= 900 && idle < 5_000, `closed by the server after ${idle} ms idle`);
      } finally {
        socket.destroy();
        server.closeAllConnections();
        server.close();
      }
    });

    it('closing: a response under way says Connection: close and its connection ends with it, not after the keep-alive timeout; idle connections close at once', async () => {
      const slowOne = heldServer((res) => res.end('slow done'));
      const server = slowOne.server;
      const conns = connectionCounter(server);
      const port = await listen(server);
      const idleAgent = new http.Agent({ keepAlive: true });
      const busyAgent = new http.Agent({ keepAlive: true });
      try {
        // A kept connection, idle when the server closes.
        assert.equal((await get(port, '/', idleAgent)).status, 200);
        const slow = get(port, '/held', busyAgent);
        await waitFor('the slow request under way', async () => slowOne.arrived === 1);
        const t0 = Date.now();
        let closedAt = 0;
        const closed = closeGracefully(server).then(() => (closedAt = Date.now()));
        await waitFor('the idle connection closed', async () => conns.closed === 1);
        assert.equal(closedAt, 0, 'the server waits for the request under way');
        slowOne.release();
        const answer = await slow;
        assert.equal(answer.body, 'slow done', 'the request under way is answered whole');
        assert.equal(answer.headers.connection, 'close');
        await closed;
        await waitFor('both connections closed', async () => conns.closed === 2);
        assert.ok(closedAt - t0 < 5_000, `closed ${closedAt - t0} ms after closeGracefully, not after the 65 s keep-alive`);
      } finally {
        idleAgent.destroy();
        busyAgent.destroy();
        server.closeAllConnections();
      }
    });

    it('closing: a response whose headers went out with keep-alive has its connection closed once it has finished', async () => {
      // Headers first (keep-alive), the body later: a streamed answer.
      const streamed = heldServer(
        (res) => res.end('part two'),
        (res) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('part one, ');
        },
      );
      const server = streamed.server;
      const conns = connectionCounter(server);
      const port = await listen(server);
      const agent = new http.Agent({ keepAlive: true });
      try {
        let headers: http.IncomingHttpHeaders | undefined;
        const body = new Promise<string>((resolve, reject) => {
          http
            .get({ host: '127.0.0.1', port, path: '/held', agent }, (res) => {
              headers = res.headers;
              let b = '';
              res.setEncoding('utf8');
              res.on('data', (c: string) => (b += c));
              res.on('end', () => resolve(b));
            })
            .on('error', reject);
        });
        await waitFor('the headers', async () => headers);
        assert.equal(headers!.connection, 'keep-alive');
        const t0 = Date.now();
        const closed = closeGracefully(server);
        streamed.release();
        assert.equal(await body, 'part one, part two');
        await closed;
        await waitFor('the connection closed', async () => conns.closed === 1);
        assert.ok(Date.now() - t0 < 5_000, 'closed once the answer finished');
      } finally {
        agent.destroy();
        server.closeAllConnections();
      }
    });
  });
});
