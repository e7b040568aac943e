import nodemailer, { type Transporter } from 'nodemailer';
import { parseMailUrl } from './mailurl.ts';
import { rawMessage, type OutgoingMail, type RawMessage } from './mime.ts';
import { PassThrough, Readable } from 'node:stream';
import { Socket } from 'node:net';
import { storableText } from '../shared/text.ts';

export type { OutgoingMail };

export type SendOutcome =
  | { kind: 'accepted'; response: string }
  | { kind: 'rejected'; code: number; response: string }
  | { kind: 'temporary'; code?: number; response: string }
  | { kind: 'auth_failed'; response: string }
  /** The server could not be reached: connection refused, DNS failure, timeout. The account's fault, not the message's. */
  | { kind: 'unreachable'; response: string }
  /**
   * The provider throttles the account (421, a 4.7.x rate answer, 452 too many, a 5xx about its
   * sending quota). `tooManyConnections`: the refusal of a connection being set up, saying the
   * server has too many connections from us (the dispatcher decides whether that is the account's
   * failure: it is not while the account's other connections work).
   */
  | { kind: 'rate_limited'; code: number; response: string; tooManyConnections?: true };

/** nodemailer's codes (and the socket's) for a server that could not be reached or answered in time. */
const UNREACHABLE_CODES = new Set(['ECONNECTION', 'ESOCKET', 'ETIMEDOUT', 'EDNS', 'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE']);

/**
 * A provider's throttling answer: 421 (service not available, closing the channel: always the
 * connection, never one recipient), a 4.7.x answer that speaks of rates or limits, or 452 "too
 * many" (connections, messages) other than too many recipients (that one is the message's).
 */
function throttled(code: number, response: string): boolean {
  if (code === 421) return true;
  if (code >= 400 && code < 500 && /\b4\.7\.\d{1,3}\b/.test(response) && /rate|limit|too many|throttl|exceeded/i.test(response)) return true;
  if (code >= 500 && code < 600 && sendingQuotaUsedUp(response)) return true;
  return code === 452 && /too many/i.test(response) && !/recipient/i.test(response);
}

/**
 * The answer was to a connection being set up, before any message's transaction: the greeting
 * (nodemailer's `EPROTOCOL` "Invalid greeting" at `CONN`), EHLO/HELO, STARTTLS, AUTH and MAIL
 * FROM (the first command a server that limits connections per account can refuse after the
 * login names the account). A 421 to RCPT TO or DATA also comes back as `CONN`, but as
 * `ECONNECTION` ("Server closed the connection"): a transaction's, not the setup's.
 */
function settingUp(code: string, command: string): boolean {
  if (command === 'CONN') return code === 'EPROTOCOL';
  return command === 'EHLO' || command === 'HELO' || command === 'LHLO' || command === 'STARTTLS' || command === 'MAIL FROM' || command.startsWith('AUTH');
}

/**
 * A refusal saying the server already has too many connections from us (per account or per
 * client): Microsoft 365's "421 4.3.2 The maximum number of concurrent server connections has
 * exceeded a limit, closing transmission channel", smtp-server's "421 ... Too many connected
 * clients, try again in a moment", Postfix's "421 4.7.0 ... Error: too many connections from
 * 192.0.2.7", "connection limit". Only a temporary answer to a connection being set up: the
 * same words later in a transaction (RCPT TO, DATA) come from a connection the server took, and
 * stay a throttle. A generic throttle that mentions the connection it closes (Gmail's "421 4.7.0
 * Try again later, closing connection", 4.3.2's "Service shutting down, closing connection") is
 * not this: it says nothing about how many connections we have.
 */
function connectionLimitReached(e: { code?: string; command?: string }, code: number, response: string): boolean {
  if (code < 400 || code >= 500 || !settingUp(e.code ?? '', e.command ?? '')) return false;
  if (/\bconcurrent\b|too many connect|too many (?:open |simultaneous |parallel |smtp )?connections\b|\bconnections? limit\b/i.test(response)) return true;
  return /\b4\.3\.2\b/.test(response) && /connection/i.test(response.replace(/closing (?:the )?(?:connection|transmission channel)/gi, ''));
}

/**
 * A permanent answer that is about the sending account's own quota, not the recipient: Gmail's
 * "550 5.4.5 Daily user sending limit exceeded", Microsoft 365's "554 5.2.0
 * ...SubmissionQuotaExceededException" and "550 5.1.90 ... reached your daily limit for message
 * recipients", and the same words elsewhere ("sending quota/limit exceeded"). Taken as a hard
 * bounce, each lead the account was given was bounced and suppressed until the quota reset. A
 * recipient's full mailbox ("552 5.2.2 ... over quota") stays the message's.
 */
function sendingQuotaUsedUp(response: string): boolean {
  if (/\b5\.2\.2\b/.test(response) || /mailbox/i.test(response)) return false;
  if (/\b5\.4\.5\b/.test(response) || /\b5\.1\.90\b/.test(response) || /SubmissionQuotaExceeded/i.test(response)) return true;
  // The recipient's side ("the recipient has exceeded their daily message limit", "receiving
  // limit"): the message's, or it would come back without an attempt counted, for ever.
  if (/recipient|receiv|inbound|incoming/i.test(response)) return false;
  return /\b(?:daily|sending|submission|outbound)(?: user)?(?: sending| send| message| recipient)?\s+(?:quota|limit)s?\b.{0,40}\b(?:exceeded|reached)\b/i.test(response);
}

/**
 * A refusal to relay (Postfix's "554 5.7.1 <x>: Relay access denied", Exchange's "550 5.7.54
 * Unable to relay recipient in non-accepted domain", "5.7.64 TenantAttribution; Relay Access
 * Denied", Google Workspace's "550 5.7.1 Invalid credentials for relay"), a demand to log in
 * first ("530 5.7.0 Authentication required"), or Postfix's client, HELO and sender
 * restrictions, which it answers at RCPT TO by default (smtpd_delay_reject: "553 5.7.1
 * <alice@acme.example>: Sender address rejected: not owned by user alice", "450 4.7.1 Client
 * host rejected: cannot find your hostname"), answered to a recipient or to the message's data;
 * and a refusal of the From itself after the data (Microsoft 365's "554 5.2.0
 * STOREDRV.Submission.Exception:SendAsDeniedException...", "550 5.7.60 SMTP; Client does not
 * have permissions to send as this sender"): mailgate hands every message to the account's own
 * server, so it is that server refusing the account (no credentials in its URL, a login the
 * server did not take as one, a From it may not use), never the lead's address.
 */
function accountRefused(response: string): boolean {
  return (
    /SendAsDenied|\b5\.7\.60\b|\bnot (?:allowed|authori[sz]ed|permitted) to send (?:as|on behalf)\b|\bpermissions? to send as\b/i.test(response) ||
    /\brelay(?:ing)?\b.{0,30}\b(?:denied|not permitted|not allowed|prohibited|refused)\b/i.test(response) ||
    /\b(?:unable|not permitted|not allowed) to relay\b|\bwe do not relay\b|\bcredentials for relay\b|\b5\.7\.(?:54|64)\b/i.test(response) ||
    /\bauthentication (?:is )?required\b/i.test(response) ||
    /\b(?:client host|helo command|sender address) rejected\b/i.test(response)
  );
}

export interface MailAccount {
  id: string;
  smtpUrl: string;
  /**
   * The most connections to the account's server now, when fewer than the messenger's
   * `maxConnections`: its server refused one as one too many (sending/in-flight.ts ConnectionLimits).
   */
  connections?: number;
}

/**
 * Pushes mail through an account's SMTP server (listmonk's "messenger"). Every transport failure
 * is an outcome; `send` throws only for a failure of the mail itself (it cannot be composed).
 */
export interface Messenger {
  /**
   * `beforeEnd`, when given, is awaited before the end of the message's data (the CRLF.CRLF
   * after which the server may accept it): until it resolves the server cannot have the
   * message, so the caller can bound how many accepted messages wait for their outcome, and
   * answer the message's guard meanwhile. When it rejects, the data is never ended: the
   * message's stream fails, nodemailer drops the connection, and the server discards the
   * transaction (RFC 5321 3.8); the send answers with a failure outcome.
   */
  send(account: MailAccount, mail: OutgoingMail, beforeEnd?: () => Promise<void>): Promise<SendOutcome>;
  /**
   * Closes every connection. A connection in the middle of a delivery finishes it first, unless
   * `force`: then it is closed too and its send answers with a failure outcome at once (a
   * shutdown whose deadline has passed).
   */
  close(opts?: { force?: boolean }): Promise<void>;
}

/**
 * The commands whose refusal is the account's server refusing the account, never the recipient:
 * the greeting (nodemailer's `CONN` with a reply code), EHLO/HELO, STARTTLS and MAIL FROM.
 */
const ACCOUNT_COMMANDS = new Set(['CONN', 'EHLO', 'HELO', 'LHLO', 'STARTTLS', 'MAIL FROM']);

/**
 * Maps a nodemailer error to what the sending engine does with it. `dataEnded`: the message's
 * data had been handed over to its end when the connection failed, so the server may have it.
 */
export function classifySmtpError(err: unknown, dataEnded = false): Exclude<SendOutcome, { kind: 'accepted' }> {
  const e = err as { code?: string; responseCode?: number; response?: string; message?: string; command?: string };
  // A server's answer is stored in text columns: made storable here, at the one place it enters.
  const response = storableText((e.response ?? e.message ?? String(err)).slice(0, 1000));
  const code = e.responseCode;
  // One connection too many (a server limiting the account's concurrent connections): a
  // throttle when it is the account's only connection; the dispatcher decides (dispatcher.ts).
  // Before the login's own answers, so a 421 to AUTH saying so is not taken for a failed login.
  if (code && connectionLimitReached(e, code, response)) return { kind: 'rate_limited', code, response, tooManyConnections: true };
  // 454 "temporary authentication failure" (RFC 4954): the credentials may be right; backed off
  // and tried again, not stopped until an operator resumes the account.
  if (e.code === 'EAUTH' && code && code >= 400 && code < 500) return { kind: 'unreachable', response };
  // No SMTP reply to AUTH at all (a peer answering garbage or HTTP: nodemailer's EAUTH with no
  // code): nothing refused the credentials, so the account is backed off as unreachable, not
  // stopped as `auth_failed` until an operator resumes it.
  if (e.code === 'EAUTH' && !code) return { kind: 'unreachable', response };
  if (e.code === 'EAUTH' || e.code === 'ENOAUTH') return { kind: 'auth_failed', response };
  if (code && throttled(code, response)) return { kind: 'rate_limited', code, response };
  // "554 no SMTP service here" or "550 sender rejected": the account cannot send, whoever the
  // lead is; the message goes to another account, and no lead is bounced or suppressed for it.
  // A size refusal at MAIL FROM (552, or nodemailer's own EMESSAGE) is the message's.
  if (code && code >= 400 && ACCOUNT_COMMANDS.has(e.command ?? '') && e.code !== 'EMESSAGE' && !(e.command === 'MAIL FROM' && code === 552))
    return { kind: 'unreachable', response };
  if (code && code >= 400 && (e.command === 'RCPT TO' || e.command === 'DATA') && accountRefused(response)) return { kind: 'unreachable', response };
  if (code && code >= 500 && code < 600) return { kind: 'rejected', code, response };
  // A peer that does not speak SMTP to us (the URL names a POP3, IMAP or HTTP port; a greeting
  // or reply that is no SMTP reply, or one too long to be one) or a TLS upgrade that fails:
  // the account's server, like a connection that cannot be made. It counted as an attempt of
  // each message the account was given, so after the retries every such lead soft-bounced and
  // its sequence ended, while the account's health never left `unknown`.
  const noSmtpReply = (e.code === 'EPROTOCOL' || e.code === 'ETLS') && !(code && code >= 400);
  if ((!code && e.code && UNREACHABLE_CODES.has(e.code)) || noSmtpReply) {
    // Lost after the whole message went out: the server may have taken it, so this is an
    // attempt of the message (retried on the delays, then a soft bounce), not the account's
    // failure, which counts none and repeated the message without end.
    return dataEnded ? { kind: 'temporary', response } : { kind: 'unreachable', response };
  }
  return { kind: 'temporary', code, response };
}

/** nodemailer's message options for one of our mails. */
function messageOptions(mail: OutgoingMail) {
  return {
    from: mail.from,
    to: mail.to,
    cc: mail.cc,
    subject: mail.subject,
    html: mail.html,
    text: mail.text,
    messageId: mail.messageId,
    inReplyTo: mail.inReplyTo,
    references: mail.references,
    headers: mail.headers,
    attachments: mail.attachments,
  };
}

/** Host, port, TLS mode and credentials from an smtp(s):// URL, plus timeouts. */
export function connectionOptions(smtpUrl: string, timeoutMs: number) {
  const s = parseMailUrl(smtpUrl, 'smtp');
  return {
    host: s.host,
    port: s.port,
    secure: s.secure,
    auth: s.user ? { user: s.user, pass: s.pass ?? '' } : undefined,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  };
}

/**
 * Hands finished message bytes to the pooled transport itself, past nodemailer's Mail layer: for
 * a raw message that layer only runs its plugin chain, wraps the bytes in a MIME node (random
 * bytes for a boundary it never uses, a stream pipeline with its abort signal, a trailing-newline
 * transform) and parses the envelope again; in a bare pooled loop that was ~0.1 of 0.18 ms of CPU
 * per message. The transport's interface is nodemailer's documented one for transports,
 * `send(mail, callback)`, reading `mail.data` and the message's envelope, Message-ID and stream
 * from `mail.message`; the callback's error and info are what sendMail would have given.
 */
function sendRaw(transport: Transporter, raw: RawMessage, messageId: string, wholeMaxBytes: number, beforeEnd?: () => Promise<void>, progress?: Progress): Promise<{ response?: string }> {
  const message = {
    // A new object each time, as nodemailer's own message gives: the connection writes its
    // state into the envelope it is handed (a refused MAIL FROM's `mailError`, the recipients'
    // queue, `rejected`), so a message requeued to a new connection with the same object failed
    // there with the first connection's 421 although the new server had accepted its MAIL FROM.
    getEnvelope: () => ({ from: raw.envelope.from, to: [...raw.envelope.to] }),
    messageId: () => messageId,
    getHeader: (key: string) => (key.toLowerCase() === 'message-id' ? messageId : undefined),
    createReadStream: () => {
      const stream = beforeEnd ? heldEnd(raw.raw, beforeEnd, wholeMaxBytes) : new PassThrough().end(raw.raw);
      if (progress) markEnd(stream, progress);
      return stream;
    },
  };
  const pool = poolOf(transport);
  return new Promise((resolve, reject) => pool.send({ data: {}, message }, (err, info) => (err ? reject(err) : resolve(info))));
}

/** nodemailer's pooled transport behind the Mail layer: its `send` and its live options. */
interface SmtpPool {
  send(mail: unknown, cb: (err: Error | null, info: { response?: string }) => void): void;
  options: { maxConnections: number };
}

function poolOf(transport: Transporter): SmtpPool {
  return (transport as unknown as { transporter: SmtpPool }).transporter;
}

/**
 * A message of at most this many bytes goes to the server in one write with its end: it fits in
 * a new TCP connection's first window (10 segments of 1,460 bytes, RFC 6928), so holding it
 * until its end may go costs no round trip. A larger one crosses the wire while `beforeEnd` is
 * awaited, as all did before (its end a write of its own).
 */
export const WHOLE_WRITE_MAX_BYTES = 12 * 1024;

/**
 * The message's bytes and their end (which makes nodemailer write the terminating CRLF.CRLF),
 * the end only once `beforeEnd` resolves; when it rejects, the data is never ended (the
 * connection is dropped, the server discards the transaction). A message of at most
 * WHOLE_WRITE_MAX_BYTES waits whole and goes to the connection in one write with its end, so
 * a refused one reaches the server not at all; handed over before the wait, its bytes went out
 * in one write and their end in another: two system calls, and two wake-ups of the server, per
 * message, where on these machines a write to a local peer costs about 0.1 ms of CPU on each
 * side (docs/benchmarks.md, session 42). A larger message crosses the wire while the caller
 * waits. Either way the server's answer waits for the same thing: the end of the data.
 */
function heldEnd(bytes: Buffer, beforeEnd: () => Promise<void>, wholeMaxBytes: number): Readable {
  const whole = bytes.length <= wholeMaxBytes;
  let started = false;
  return new Readable({
    read() {
      if (started) return;
      started = true;
      if (!whole) this.push(bytes);
      beforeEnd().then(
        () => {
          if (!whole) return void this.push(null);
          // nodemailer pipes this stream through its dot-stuffing stream into the socket; the
          // bytes and the terminator it adds at the end are separate writes unless the socket
          // is corked meanwhile. Uncorked on the next turn of the event loop, once the end has
          // travelled through both streams (their hand-offs are process.nextTick callbacks).
          const socket = socketOf(this);
          socket?.cork();
          this.push(bytes);
          this.push(null);
          if (socket) setImmediate(() => socket.uncork());
        },
        (err: Error) => this.destroy(err),
      );
    },
  });
}

/**
 * The socket a message stream ends in: the stream it is piped to (nodemailer's dot-stuffing
 * stream) pipes into the connection's socket. Found through the streams' pipe lists (Node's
 * `_readableState.pipes`); null if they are not there, and then nothing is corked (two writes,
 * as before).
 */
function socketOf(stream: Readable): Socket | null {
  const pipesOf = (s: unknown): unknown[] => {
    const pipes = (s as { _readableState?: { pipes?: unknown } })._readableState?.pipes;
    return Array.isArray(pipes) ? pipes : pipes ? [pipes] : [];
  };
  for (const next of pipesOf(stream)) for (const dest of pipesOf(next)) if (dest instanceof Socket) return dest;
  return null;
}

/** How far a message got: its data handed over to its end (the server may have it). */
interface Progress {
  dataEnded: boolean;
}

/** Marks the end of a message's data: its stream's last stage, read to its end by the connection. */
function markEnd(stream: Readable, progress: Progress): void {
  stream.once('end', () => (progress.dataEnded = true));
}

/** The key of a composed message's data under which its `dataEnded` progress rides (the 'stream' plugin). */
const PROGRESS = 'mailgateProgress';

interface PooledTransport {
  transport: Transporter;
  /** The URL the transport was made from (its credentials are in the transport's options too): a changed URL makes a new one. */
  smtpUrl: string;
  lastUsed: number;
  inFlight: number;
}

/**
 * One pooled nodemailer transport per sender account: connections are reused across
 * messages (maxMessages unlimited, instead of a reconnect every 100), closed after
 * `idleTimeoutMs` idle. nodemailer requeues a message on a dropped connection only when the
 * connection had carried messages before and the server dropped it (or answered 421) before a
 * byte of this message's data was read (its pool-resource checks `readableDidRead`): the
 * server cannot have it. `maxRequeues` 1 lets that one message go once over a new connection:
 * a server limiting messages per connection (Exim's "421 too many messages in this
 * connection" at MAIL FROM) or closing an idle connection as it is reused. With 0 the message
 * failed as `unreachable` and the account was backed off, each batch longer (1, 5, 15, 60
 * min: the same batch also had successes, which never reset it). Every other failure comes
 * back as an outcome and our own retry schedule handles it: a message whose data began is
 * never requeued here (it could be sent twice). The price: a reused connection whose server
 * stops answering before the data times out twice (there, then on the new connection).
 */
export class SmtpMessenger implements Messenger {
  private readonly pools = new Map<string, PooledTransport>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly opts: {
      maxConnections: number;
      idleTimeoutMs?: number;
      timeoutMs?: number;
      /** The largest message held whole until its end may go (default WHOLE_WRITE_MAX_BYTES; 0: every message crosses the wire before, its end a write of its own). */
      wholeWriteMaxBytes?: number;
    },
  ) {
    this.sweeper = setInterval(() => this.sweep(), 15_000);
    this.sweeper.unref();
  }

  private transportFor(account: MailAccount): PooledTransport {
    const existing = this.pools.get(account.id);
    if (existing && existing.smtpUrl === account.smtpUrl) return existing;
    if (existing) existing.transport.close();
    const transport = nodemailer.createTransport({
      ...connectionOptions(account.smtpUrl, this.opts.timeoutMs ?? 60_000),
      pool: true,
      maxConnections: this.opts.maxConnections,
      maxMessages: Infinity,
      maxRequeues: 1,
      idleTimeout: this.opts.idleTimeoutMs ?? 30_000,
    } as Parameters<typeof nodemailer.createTransport>[0]);
    // A composed message's end is marked as a raw one's is (sendRaw): its progress rides in the
    // mail's data, and the last stage of its stream (what the connection reads) sets it.
    transport.use('stream', (m, done) => {
      const progress = (m.data as { [PROGRESS]?: Progress })[PROGRESS];
      if (progress)
        m.message.processFunc((input: Readable) => {
          markEnd(input, progress);
          return input;
        });
      done();
    });
    const pooled = { transport, smtpUrl: account.smtpUrl, lastUsed: Date.now(), inFlight: 0 };
    this.pools.set(account.id, pooled);
    return pooled;
  }

  async send(account: MailAccount, mail: OutgoingMail, beforeEnd?: () => Promise<void>): Promise<SendOutcome> {
    // A campaign message goes as the finished bytes (adapters/mime.ts: what the composer would
    // write, without its per-node streams); anything else through the composer. Composing is
    // not transport: what it throws is the message's own failure, thrown, never retried.
    const raw = rawMessage(mail);
    const pooled = this.transportFor(account);
    // The pool reads its maxConnections (a live option of nodemailer's pool) each time it looks
    // for a connection, so a lower limit holds at once; open connections above it stay until
    // they close. The dispatcher's slots alone do not bound the connections: a connection that
    // has just ended a message is made available on a later turn of the event loop, and a
    // message handed to the pool meanwhile opened a new one (in a probe, a server allowing 2
    // refused a new connection every 10 to 25 messages at 2 slots).
    poolOf(pooled.transport).options.maxConnections = Math.min(account.connections ?? this.opts.maxConnections, this.opts.maxConnections);
    pooled.lastUsed = Date.now();
    pooled.inFlight++;
    const progress: Progress = { dataEnded: false };
    try {
      // The composer's stream is its own: its messages (attachments, an address that is not a
      // plain ASCII addr-spec such as a lead at an `xn--` domain, a body without text) wait
      // before their whole transaction instead of before its end.
      if (!raw && beforeEnd) await beforeEnd();
      const info = raw
        ? await sendRaw(pooled.transport, raw, mail.messageId, this.opts.wholeWriteMaxBytes ?? WHOLE_WRITE_MAX_BYTES, beforeEnd, progress)
        : await pooled.transport.sendMail({ ...messageOptions(mail), [PROGRESS]: progress } as Parameters<Transporter['sendMail']>[0]);
      return { kind: 'accepted', response: storableText(String(info.response ?? '250 OK')) };
    } catch (err) {
      return classifySmtpError(err, progress.dataEnded);
    } finally {
      pooled.inFlight--;
      pooled.lastUsed = Date.now();
    }
  }

  private sweep() {
    const idle = (this.opts.idleTimeoutMs ?? 30_000) * 2;
    for (const [id, p] of this.pools) {
      if (p.inFlight === 0 && Date.now() - p.lastUsed > idle) {
        p.transport.close();
        this.pools.delete(id);
      }
    }
  }

  async close(opts: { force?: boolean } = {}): Promise<void> {
    clearInterval(this.sweeper);
    for (const p of this.pools.values()) (p.transport.close as (o?: { force?: boolean }) => void)(opts);
    this.pools.clear();
  }
}

/**
 * One message through a short-lived (unpooled) connection: for the rare sends made inside an
 * API request, such as forwarding a reply to an SDR.
 */
export async function sendOnce(smtpUrl: string, mail: OutgoingMail, timeoutMs = 30_000): Promise<SendOutcome> {
  const transport = nodemailer.createTransport(connectionOptions(smtpUrl, timeoutMs));
  try {
    const info = await transport.sendMail(messageOptions(mail));
    return { kind: 'accepted', response: storableText(String(info.response ?? '250 OK')) };
  } catch (err) {
    return classifySmtpError(err);
  } finally {
    transport.close();
  }
}
