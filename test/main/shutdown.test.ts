import assert from 'node:assert/strict';
import net from 'node:net';
import pg from 'pg';
import { serve } from '../../src/main.ts';
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/adapters/logger.ts';
import { createTestDatabase, startTestApp, seedWorkspace, LogSink } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';

const SECRET = 'c3'.repeat(32);

/**
 * An SMTP server that takes a whole message and then never answers its final dot: the send
 * hangs until the client's socket timeout (60 s), far past any shutdown deadline here.
 */
async function hangingSmtpServer() {
  const sockets = new Set<net.Socket>();
  let hung = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffer = '';
    let inData = false;
    socket.write('220 hang.example ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      let nl: number;
      while ((nl = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            hung++;
          }
          continue;
        }
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') socket.write('250-hang.example\r\n250 AUTH PLAIN LOGIN\r\n');
        else if (verb === 'AUTH') socket.write('235 ok\r\n');
        else if (verb === 'DATA') (socket.write('354 go on\r\n'), (inData = true));
        else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as net.AddressInfo).port,
    hung: () => hung,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A TCP server that takes connections and never says a word: a TLS handshake with it hangs. */
async function tarpit() {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  let seen = 0;
  server.on('connection', () => seen++);
  return {
    port: (server.address() as net.AddressInfo).port,
    seen: () => seen,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('graceful shutdown', function () {
  this.timeout(90_000);

  it('MAILGATE_SHUTDOWN_TIMEOUT bounds the whole drain: a webhook round and a send, each hanging on its server, are waited for once together, and the message stays in the queue', async () => {
    const database = await createTestDatabase();
    const smtp = await hangingSmtpServer();
    const receiver = await tarpit();
    const seeder = await startTestApp({ database: { url: database.url, drop: async () => {} }, secretKey: Buffer.from(SECRET, 'hex'), config: { webhookAllowPrivate: true } });
    const db = new pg.Client({ connectionString: database.url });
    await db.connect();
    try {
      const { adminKey: key, workspace } = await seedWorkspace(seeder);
      const s = seeder.services();
      const account = await s.senders.add({ workspaceId: workspace.id, email: 'slow@acme.example', name: 'Slow', smtpUrl: `smtp://slow:pw@127.0.0.1:${smtp.port}` });
      const pool = await s.senders.createPool(workspace.id, 'slow pool', 1000, [account.id]);
      const created = await seeder.request('POST', '/v1/campaigns', { key, body: { name: 'Hangs', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const campaignId = created.body.id;
      // campaign.started goes to a receiver that never answers: the webhook round (a job) hangs too.
      const hook = await seeder.request('POST', '/v1/webhooks', { key, body: { url: `https://127.0.0.1:${receiver.port}/hook`, events: ['campaign.started'] } });
      assert.equal(hook.status, 201, JSON.stringify(hook.body));
      assert.equal((await seeder.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: [{ email: 'lead@prospect.example' }] } })).status, 200);

      const config = loadConfig({}, { databaseUrl: database.url, port: 0, dataDir: '.tmp/test-data', secretKey: SECRET, shutdownTimeout: '1500ms', webhookAllowPrivate: true, webhookTimeout: '60s' });
      const quiet = { write: () => true, isTTY: false };
      const daemon = await serve(config, createLogger('warn', new LogSink()), 'all', { stdout: quiet, stderr: quiet } as never);
      // Started while the daemon runs: its notification wakes a sending round outside the job
      // runner (the dispatcher's own drain waits for that one), while the webhook round hangs
      // inside it (the job runner's drain).
      assert.equal((await seeder.request('POST', `/v1/campaigns/${campaignId}/start`, { key })).status, 200);
      await waitFor('the daemon sent the message to the hanging server', async () => smtp.hung() > 0, 30_000);
      await waitFor('the webhook round reached the silent receiver', async () => receiver.seen() > 0, 30_000);

      const t0 = Date.now();
      await daemon.shutdown('test');
      const took = Date.now() - t0;
      // The job runner's drain (the webhook round) and the dispatcher's (the send) used to wait
      // 1.5 s each, one after the other (3 s and more); with one deadline the drain ends at 1.5 s.
      assert.ok(took >= 1400, `shut down in ${took} ms: the drain did not wait for the round`);
      assert.ok(took < 2700, `shut down in ${took} ms with a 1,500 ms timeout`);

      // Nothing lost: the message handed back to the queue, held by no worker.
      const { rows } = await db.query(`select state, claimed_by from outbound_messages where campaign_id = $1`, [campaignId]);
      assert.equal(rows.length, 1);
      assert.notEqual(rows[0].state, 'sending');
      assert.equal(rows[0].claimed_by, null);
    } finally {
      await db.end();
      await seeder.close();
      await smtp.close();
      await receiver.close();
      await database.drop();
    }
  });

  it('a request under way when the shutdown begins is answered with Connection: close, and the drain ends with it, not at the deadline (the connections are kept 65 s)', async () => {
    const database = await createTestDatabase();
    const config = loadConfig({}, { databaseUrl: database.url, port: 0, dataDir: '.tmp/test-data', secretKey: SECRET, shutdownTimeout: '20s' });
    assert.equal(config.httpKeepAliveTimeout, 65_000);
    const quiet = { write: () => true, isTTY: false };
    const daemon = await serve(config, createLogger('warn', new LogSink()), 'api', { stdout: quiet, stderr: quiet } as never);
    const socket = net.connect(daemon.port, '127.0.0.1');
    try {
      let answer = '';
      socket.setEncoding('utf8');
      socket.on('data', (c: string) => (answer += c));
      const ended = new Promise<void>((resolve) => socket.once('end', () => resolve()));
      // A request begun (its headers not yet whole) is under way: the shutdown keeps its connection.
      await new Promise<void>((resolve) => socket.write('GET /healthz HTTP/1.1\r\nHost: mailgate.test\r\n', () => resolve()));
      await new Promise((r) => setTimeout(r, 200));
      const t0 = Date.now();
      const stopped = daemon.shutdown('test');
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(answer, '', 'nothing answered yet');
      socket.write('\r\n');
      await ended;
      assert.match(answer, /^HTTP\/1\.1 \d{3} /);
      assert.match(answer, /\r\nConnection: close\r\n/i);
      await stopped;
      const took = Date.now() - t0;
      assert.ok(took < 10_000, `shut down in ${took} ms: the drain waited for the kept connection (deadline 20 s)`);
    } finally {
      socket.destroy();
      await daemon.shutdown('test');
      await database.drop();
    }
  });
});
