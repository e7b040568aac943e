// A real HTTPS receiver for webhook tests. Certificates are made at test time with the openssl
// command line: a throw-away CA and a server certificate it signs for localhost, 127.0.0.1, ::1
// and hooks.rebind.test (the name the DNS-rebinding test resolves by hand). Nothing is
// downloaded; the files live in a temp dir for the life of the process.
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestCertificates {
  dir: string;
  /** The CA certificate file (what NODE_EXTRA_CA_CERTS points at). */
  caPath: string;
  ca: string;
  key: string;
  cert: string;
}

let made: TestCertificates | undefined;

function openssl(args: string[], cwd: string) {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('the webhook tests need the openssl command to make their certificates (apt-get install openssl)');
    throw new Error(`openssl ${args.join(' ')} failed: ${e.stderr?.toString() ?? e.message}`);
  }
}

/** A CA and a server certificate signed by it, made once per process. */
export function testCertificates(): TestCertificates {
  if (made) return made;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-tls-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=mailgate test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  openssl(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost'], dir);
  writeFileSync(
    path.join(dir, 'server.ext'),
    'subjectAltName=DNS:localhost,DNS:hooks.rebind.test,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n',
  );
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext'], dir);
  const read = (f: string) => readFileSync(path.join(dir, f), 'utf8');
  made = { dir, caPath: path.join(dir, 'ca.crt'), ca: read('ca.crt'), key: read('server.key'), cert: read('server.crt') };
  return made;
}

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The exact bytes received. */
  body: Buffer;
  json: any;
  /** Wall-clock receipt time (ms). */
  at: number;
}

/**
 * What to answer: a status, a status with headers and/or a delay, 'hang' (never answer) or
 * 'drop' (close the connection without an answer, as a server closing an idle keep-alive
 * connection just as a request arrives does).
 */
export type Answer = number | { status: number; headers?: Record<string, string>; delayMs?: number } | 'hang' | 'drop';

export class HttpsReceiver {
  readonly received: ReceivedRequest[] = [];
  /** Decides the answer to each request (after it is recorded); a promise holds the answer until it settles. */
  respond: (req: ReceivedRequest) => Answer | Promise<Answer> = () => 200;
  port = 0;
  private server?: https.Server;

  async start(): Promise<void> {
    const certs = testCertificates();
    this.server = https.createServer({ key: certs.key, cert: certs.cert }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        let json: unknown;
        try {
          json = JSON.parse(body.toString('utf8'));
        } catch {
          json = undefined;
        }
        const r: ReceivedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, json, at: Date.now() };
        this.received.push(r);
        const answer = this.respond(r);
        if (answer instanceof Promise) void answer.then((a) => reply(a));
        else reply(answer);
      });
      const reply = (answer: Answer) => {
        if (answer === 'hang') return;
        if (answer === 'drop') return void req.socket.destroy();
        const { status, headers, delayMs } = typeof answer === 'number' ? { status: answer, headers: {}, delayMs: 0 } : answer;
        setTimeout(() => {
          res.writeHead(status, { 'content-type': 'text/plain', ...headers });
          res.end(`${status}\n`);
        }, delayMs ?? 0);
      };
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', () => resolve()));
    this.port = (this.server.address() as { port: number }).port;
  }

  url(p = '/hook', host = '127.0.0.1'): string {
    return `https://${host}:${this.port}${p}`;
  }

  /** Requests whose JSON body has this event id. */
  forEvent(eventId: string): ReceivedRequest[] {
    return this.received.filter((r) => r.json?.id === eventId);
  }

  async waitFor(count: number, timeoutMs = 15_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.received.length < count) {
      if (Date.now() > until) throw new Error(`expected ${count} webhook requests, got ${this.received.length}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  reset(): void {
    this.received.length = 0;
    this.respond = () => 200;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}
