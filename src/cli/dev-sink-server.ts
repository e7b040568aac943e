// The servers of `mailgate dev-sink`. SMTP through smtp-server, a dev dependency: the dev sink is a
// tool for a clone where `npm ci` installed them, not for the image (which prunes them). Webhooks
// go over HTTPS because mailgate only delivers to https URLs; the certificate comes from a CA made
// with the openssl command on the first run and kept in the sink's directory, so the daemon can
// trust it through NODE_EXTRA_CA_CERTS (read once at its start) across restarts of the sink.
import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type { SMTPServer } from 'smtp-server';

export interface DevSink {
  smtpPort: number;
  httpsPort: number;
  close(): Promise<void>;
}

interface Options {
  dir: string;
  smtpPort: number;
  httpsPort: number;
  out: NodeJS.WritableStream;
}

export async function startDevSink(opts: Options): Promise<DevSink> {
  const { dir, out } = opts;
  mkdirSync(path.join(dir, 'mail'), { recursive: true });
  const tls = certificates(dir);
  const { SMTPServer } = await importSmtpServer();
  const { simpleParser } = await import('mailparser');
  const shown = (file: string) => {
    const rel = path.relative(process.cwd(), file);
    return rel.startsWith('..') ? file : rel;
  };
  let count = readdirSync(path.join(dir, 'mail')).filter((f) => f.endsWith('.eml')).length;

  const smtp: SMTPServer = new SMTPServer({
    // No STARTTLS: mailgate would upgrade when offered and then refuse a certificate it does not
    // trust; a sink on the loopback interface has nothing to protect.
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authOptional: true,
    logger: false,
    onAuth: (auth, _session, cb) => cb(null, { user: auth.username }),
    onData: (stream, session, cb) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        simpleParser(raw).then(
          (parsed) => {
            count += 1;
            const file = path.join(dir, 'mail', `${String(count).padStart(4, '0')}.eml`);
            writeFileSync(file, raw);
            const record = {
              receivedAt: new Date().toISOString(),
              user: (session.user as string | undefined) ?? null,
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              to: session.envelope.rcptTo.map((r) => r.address),
              subject: parsed.subject ?? '',
              messageId: parsed.messageId ?? null,
              file,
            };
            appendFileSync(path.join(dir, 'messages.jsonl'), JSON.stringify(record) + '\n');
            out.write(`mail     ${record.from} -> ${record.to.join(', ')}  "${record.subject}"  ${shown(file)}\n`);
            cb();
          },
          (err: Error) => cb(err),
        );
      });
    },
  });
  // A client dropping its connection is an 'error' of the server; the sink goes on. A failed
  // listen is an 'error' too: that one is the start's (listen() below), not a connection's.
  smtp.on('error', (err: NodeJS.ErrnoException) => {
    if (err.syscall !== 'listen') out.write(`smtp     connection error: ${err.message}\n`);
  });

  const web = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(req.method === 'GET' ? 200 : 405, { 'content-type': 'text/plain' });
      res.end('mailgate dev-sink: POST webhook deliveries to any path\n');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // Recorded as the string it was: the sink shows what arrived, it does not judge it.
      }
      const b = (body && typeof body === 'object' ? body : {}) as { id?: string; event?: string };
      const record = {
        receivedAt: new Date().toISOString(),
        path: req.url ?? '/',
        event: b.event ?? null,
        id: b.id ?? null,
        signature: req.headers['x-service-signature'] ?? null,
        attempt: req.headers['x-service-attempt'] ?? null,
        body,
        // The exact text received: a signature is checked over these bytes, not re-serialized JSON.
        raw,
      };
      appendFileSync(path.join(dir, 'events.jsonl'), JSON.stringify(record) + '\n');
      out.write(`webhook  ${record.event ?? '(not a mailgate event)'} ${record.id ?? ''}  signed ${record.signature ? 'yes' : 'no'}\n`);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"received":true}');
    });
  });

  const smtpPort = await listen((port, cb) => smtp.listen(port, '127.0.0.1', cb), smtp.server, opts.smtpPort, 'SMTP');
  let httpsPort: number;
  try {
    httpsPort = await listen((port, cb) => web.listen(port, '127.0.0.1', cb), web, opts.httpsPort, 'HTTPS');
  } catch (err) {
    await new Promise<void>((r) => smtp.close(() => r()));
    throw err;
  }
  out.write(
    `mailgate dev-sink: SMTP on 127.0.0.1:${smtpPort} (any login), webhooks on https://127.0.0.1:${httpsPort}/ ` +
      `(CA certificate ${shown(tls.caPath)}); recording into ${shown(dir)}\n`,
  );
  return {
    smtpPort,
    httpsPort,
    close: async () => {
      await Promise.all([new Promise<void>((r) => smtp.close(() => r())), new Promise<void>((r) => web.close(() => r()))]);
    },
  };
}

async function importSmtpServer(): Promise<typeof import('smtp-server')> {
  try {
    return await import('smtp-server');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') {
      throw new Error('mailgate dev-sink needs the dev dependencies (smtp-server): run `npm ci` in the clone (an image or `npm ci --omit=dev` leaves them out)');
    }
    throw err;
  }
}

function listen(start: (port: number, cb: () => void) => void, server: import('node:net').Server, port: number, what: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) =>
      reject(new Error(err.code === 'EADDRINUSE' ? `${what} port ${port} is taken: pick another with --${what === 'SMTP' ? 'smtp' : 'https'}-port` : `${what} server: ${err.message}`));
    server.once('error', onError);
    start(port, () => {
      server.off('error', onError);
      resolve((server.address() as { port: number }).port);
    });
  });
}

interface Certificates {
  caPath: string;
  key: string;
  cert: string;
}

/** The sink's CA and a server certificate for 127.0.0.1 and localhost, made once and kept. */
function certificates(dir: string): Certificates {
  const file = (f: string) => path.join(dir, f);
  if (!['ca.crt', 'server.crt', 'server.key'].every((f) => existsSync(file(f)))) {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '825', '-subj', '/CN=mailgate dev-sink CA',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
    openssl(dir, ['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost']);
    writeFileSync(file('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n');
    openssl(dir, ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '825', '-extfile', 'server.ext']);
    for (const key of ['ca.key', 'server.key']) chmodSync(file(key), 0o600);
  }
  return { caPath: file('ca.crt'), key: readFileSync(file('server.key'), 'utf8'), cert: readFileSync(file('server.crt'), 'utf8') };
}

function openssl(cwd: string, args: string[]) {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('mailgate dev-sink makes its HTTPS certificate with the openssl command, which is not installed (apt-get install openssl)');
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString().trim() ?? e.message}`);
  }
}
