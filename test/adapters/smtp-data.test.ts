import assert from 'node:assert/strict';
import net from 'node:net';
import { SmtpMessenger, WHOLE_WRITE_MAX_BYTES, type OutgoingMail } from '../../src/adapters/smtp.ts';

/**
 * A minimal SMTP server that keeps every read of a message's data as it came off the socket, so
 * a test sees how the client wrote it (on loopback one write arrives as one read).
 */
class RecordingServer {
  /** The reads of each transaction's data, after its DATA command was answered 354. */
  readonly reads: Buffer[][] = [];
  /** Resolved with each transaction's index as its DATA command is answered. */
  private dataWaiters: Array<(n: number) => void> = [];
  closed = 0;
  private readonly server = net.createServer((socket) => {
    let data: Buffer[] | null = null;
    let buffer = '';
    socket.write('220 rec.example ESMTP\r\n');
    socket.on('data', (chunk: Buffer) => {
      if (data) {
        data.push(chunk);
        if (Buffer.concat(data).toString('latin1').endsWith('\r\n.\r\n')) {
          data = null;
          socket.write('250 2.0.0 queued\r\n');
        }
        return;
      }
      buffer += chunk.toString('latin1');
      let i;
      while ((i = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (/^EHLO/i.test(line)) socket.write('250-rec.example\r\n250 8BITMIME\r\n');
        else if (/^DATA/i.test(line)) {
          data = [];
          this.reads.push(data);
          socket.write('354 go ahead\r\n');
          for (const w of this.dataWaiters.splice(0)) w(this.reads.length - 1);
          return;
        } else if (/^QUIT/i.test(line)) socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
    socket.on('close', () => this.closed++);
    socket.on('error', () => {});
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `smtp://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  /** The next transaction's DATA command, answered. */
  dataBegun(): Promise<number> {
    return new Promise((resolve) => this.dataWaiters.push(resolve));
  }

  bytes(n: number): number {
    return this.reads[n].reduce((sum, c) => sum + c.length, 0);
  }

  close(): void {
    this.server.close();
  }
}

const mail = (html: string, n: number): OutgoingMail => ({
  from: { name: 'Alice', address: 'alice@acme.example' },
  to: 'lead@lead.example',
  subject: 'Hi',
  html,
  text: html.replace(/<[^>]+>/g, ''),
  messageId: `<msg_data.${n}@acme.example>`,
});

/** A `beforeEnd` the test releases (or refuses) itself. */
function gate() {
  let release!: () => void;
  let refuse!: (err: Error) => void;
  const wait = new Promise<void>((resolve, reject) => {
    release = resolve;
    refuse = reject;
  });
  // Refused before the messenger asks for it: not an unhandled rejection meanwhile.
  wait.catch(() => {});
  return { beforeEnd: () => wait, release, refuse };
}

const settle = () => new Promise((r) => setTimeout(r, 150));

/**
 * What the client's sockets hand to the system, one entry per write (Node's net.Socket `_write`
 * for one chunk, `_writev` for the chunks a corked socket gathered), while `fn` runs.
 */
async function socketWrites<T>(fn: () => Promise<T>): Promise<{ result: T; writes: string[] }> {
  const proto = net.Socket.prototype as unknown as {
    _write: (chunk: Buffer, encoding: string, cb: () => void) => void;
    _writev: (chunks: Array<{ chunk: Buffer | string }>, cb: () => void) => void;
  };
  const { _write: write, _writev: writev } = proto;
  const writes: string[] = [];
  const text = (c: Buffer | string) => (typeof c === 'string' ? c : c.toString('latin1'));
  proto._write = function (chunk, encoding, cb) {
    writes.push(text(chunk));
    return write.call(this, chunk, encoding, cb);
  };
  proto._writev = function (chunks, cb) {
    writes.push(chunks.map((c) => text(c.chunk)).join(''));
    return writev.call(this, chunks, cb);
  };
  try {
    return { result: await fn(), writes };
  } finally {
    proto._write = write;
    proto._writev = writev;
  }
}

describe("SMTP: a message's data and its end (adapters/smtp.ts heldEnd)", () => {
  let server: RecordingServer;
  let url: string;
  let messenger: SmtpMessenger;
  beforeEach(async () => {
    server = new RecordingServer();
    url = await server.start();
    messenger = new SmtpMessenger({ maxConnections: 1 });
  });
  afterEach(async () => {
    await messenger.close();
    server.close();
  });

  it('a campaign-sized message waits whole for its end, then goes to the server in one write with it', async () => {
    const g = gate();
    const begun = server.dataBegun();
    const sent = messenger.send({ id: 'snd_data', smtpUrl: url }, mail('<p>Hello there</p>\n<p>.a line starting with a dot</p>', 1), g.beforeEnd);
    const n = await begun;
    await settle();
    assert.equal(server.bytes(n), 0, 'no byte of the message before its end may go');
    const { result, writes } = await socketWrites(async () => {
      g.release();
      return sent;
    });
    assert.equal(result.kind, 'accepted');
    // The client wrote the bytes and the final dot as one (a corked socket's one writev).
    const data = writes.filter((w) => w.includes('Hello there') || w.endsWith('.\r\n'));
    assert.equal(data.length, 1, `one write for the bytes and their end: ${JSON.stringify(writes.map((w) => w.slice(-20)))}`);
    assert.match(data[0], /Hello there[\s\S]*\r\n\.\r\n$/);
    assert.equal(server.reads[n].length, 1, 'the server read it at once');
    const text = server.reads[n][0].toString('latin1');
    assert.ok(text.endsWith('\r\n.\r\n'), 'ends with CRLF.CRLF');
    assert.match(text, /Hello there/);
    // The composer's dot-stuffing is still applied on the way.
    assert.match(text, /\r\n\.\.a line starting with a dot/);
    // The next message on the same connection goes the same way.
    const g2 = gate();
    const begun2 = server.dataBegun();
    const sent2 = messenger.send({ id: 'snd_data', smtpUrl: url }, mail('<p>Second</p>', 2), g2.beforeEnd);
    const n2 = await begun2;
    g2.release();
    assert.equal((await sent2).kind, 'accepted');
    assert.equal(server.reads[n2].length, 1);
    assert.match(server.reads[n2][0].toString('latin1'), /Second[\s\S]*\r\n\.\r\n$/);
  });

  it('a message whose end is refused reaches the server not at all: the connection is dropped after DATA', async () => {
    const g = gate();
    const begun = server.dataBegun();
    const sent = messenger.send({ id: 'snd_data', smtpUrl: url }, mail('<p>Never</p>', 3), g.beforeEnd);
    const n = await begun;
    g.refuse(new Error('the guard refused it'));
    const outcome = await sent;
    assert.notEqual(outcome.kind, 'accepted');
    await settle();
    assert.equal(server.bytes(n), 0, 'no byte of the refused message');
    assert.equal(server.closed, 1, 'the connection was dropped');
  });

  it(`a message over ${WHOLE_WRITE_MAX_BYTES} bytes crosses the wire while its end waits, then its end follows`, async () => {
    const g = gate();
    const begun = server.dataBegun();
    const body = `<p>${'All work and no play. '.repeat(Math.ceil((WHOLE_WRITE_MAX_BYTES * 1.5) / 22))}</p>`;
    const sent = messenger.send({ id: 'snd_data', smtpUrl: url }, mail(body, 4), g.beforeEnd);
    const n = await begun;
    const deadline = Date.now() + 5_000;
    while (server.bytes(n) <= WHOLE_WRITE_MAX_BYTES && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.ok(server.bytes(n) > WHOLE_WRITE_MAX_BYTES, `the body went before its end (${server.bytes(n)} bytes)`);
    assert.ok(!Buffer.concat(server.reads[n]).toString('latin1').endsWith('\r\n.\r\n'), 'not ended yet');
    g.release();
    assert.equal((await sent).kind, 'accepted');
    assert.ok(Buffer.concat(server.reads[n]).toString('latin1').endsWith('\r\n.\r\n'));
  });
});
