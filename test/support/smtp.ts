// The SMTP peer of the tests: smtp-server in process. It records what it accepted and can be
// told to answer per recipient (5xx, 4xx) or to refuse a login.
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { simpleParser, type ParsedMail } from 'mailparser';

export interface Received {
  from: string;
  to: string[];
  raw: Buffer;
  parsed: ParsedMail;
  user?: string;
}

export class SmtpSink {
  readonly received: Received[] = [];
  /** Per-recipient answers: an SMTP code and text, e.g. [550, '5.1.1 no such user']. */
  readonly rcptAnswers = new Map<string, [number, string]>();
  users = new Map<string, string>([['user', 'pass']]);
  /** Answers to MAIL FROM by the logged-in user: the account's own server refusing it. */
  readonly mailFromAnswers = new Map<string, [number, string]>();
  /** Answers to the end of a message's data, by its first recipient: an SMTP code and text. */
  readonly dataAnswers = new Map<string, [number, string]>();
  /** Messages one connection may carry (0: no limit); past it MAIL FROM is answered 421, as Exim's smtp_accept_max_per_connection does. */
  messagesPerConnection = 0;
  /** Delay before accepting each message's data (a slow server). */
  delayMs = 0;
  port = 0;
  /** The recipients of every transaction that reached its data, whether or not it ended (a client may drop it mid-DATA). */
  readonly dataBegun: string[][] = [];
  /** The recipients of every transaction whose data ended (the client sent its final CRLF.CRLF), before it is answered. */
  readonly dataEnded: string[][] = [];
  /** While set, the answer to the end of each message's data waits for it (after `delayMs`): the test decides when the server accepts. */
  hold?: Promise<void>;
  /** Errors of client connections (e.g. ECONNRESET from a killed client). */
  readonly connectionErrors: Error[] = [];
  private server?: SMTPServer;

  /** `port` 0 picks a free one; a port this sink had before (stopped meanwhile) brings it back there. */
  async start(opts: Partial<SMTPServerOptions> = {}, port = 0): Promise<void> {
    this.server = new SMTPServer({
      // smtp-server's built-in certificate has expired: no STARTTLS in tests.
      disabledCommands: ['STARTTLS'],
      authOptional: true,
      logger: false,
      onAuth: (auth, _session, cb) => {
        if (this.users.get(auth.username ?? '') === auth.password) return cb(null, { user: auth.username });
        const err = new Error('Invalid username or password') as Error & { responseCode: number };
        err.responseCode = 535;
        cb(err);
      },
      onMailFrom: (_address, session, cb) => {
        if (this.messagesPerConnection && session.transaction > this.messagesPerConnection) {
          const err = new Error('too many messages in this connection') as Error & { responseCode: number };
          err.responseCode = 421;
          return cb(err);
        }
        const answer = this.mailFromAnswers.get(String(session.user ?? ''));
        if (answer) {
          const err = new Error(answer[1]) as Error & { responseCode: number };
          err.responseCode = answer[0];
          return cb(err);
        }
        cb();
      },
      onRcptTo: (address, _session, cb) => {
        const answer = this.rcptAnswers.get(address.address.toLowerCase());
        if (answer) {
          const err = new Error(answer[1]) as Error & { responseCode: number };
          err.responseCode = answer[0];
          return cb(err);
        }
        cb();
      },
      onData: (stream, session, cb) => {
        this.dataBegun.push(session.envelope.rcptTo.map((r) => r.address));
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', async () => {
          this.dataEnded.push(session.envelope.rcptTo.map((r) => r.address));
          if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
          if (this.hold) await this.hold;
          const answer = this.dataAnswers.get(session.envelope.rcptTo[0]?.address.toLowerCase() ?? '');
          if (answer) {
            const err = new Error(answer[1]) as Error & { responseCode: number };
            err.responseCode = answer[0];
            return cb(err);
          }
          const raw = Buffer.concat(chunks);
          this.received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            raw,
            parsed: await simpleParser(raw),
            user: session.user as string | undefined,
          });
          cb();
        });
      },
      ...opts,
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => {
        this.server!.off('error', reject);
        resolve();
      });
    });
    // A client's connection error (a worker killed mid-transaction resets its sockets) is an
    // 'error' event of the server; a real SMTP server drops that connection and goes on.
    this.server.on('error', (err) => this.connectionErrors.push(err));
    this.port = (this.server.server.address() as { port: number }).port;
  }

  url(user = 'user', pass = 'pass'): string {
    return `smtp://${encodeURIComponent(user)}:${encodeURIComponent(pass)}@127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}
