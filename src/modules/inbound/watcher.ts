import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { ImapFlow } from 'imapflow';
import type { Deps } from '../../deps.ts';
import { imapClient } from '../../adapters/imap.ts';
import { toDate } from '../../shared/time.ts';
import { sqlState } from '../../db/sql.ts';
import type { IncomingMail, InboundService } from './service.ts';
import { INBOUND_MAX_BYTES_DEFAULT } from './limits.ts';
import { leaseWatches, releaseWatches, setWatchStatus, resetCursor, touchWatch, watchCursor, type WatchRow, type WatchStatus } from '../mailboxes/repository.ts';

export interface WatcherOptions {
  /** Fallback poll when a server has no IDLE (MAILGATE_IMAP_POLL_INTERVAL). */
  pollIntervalMs: number;
  /**
   * How long the server may send nothing while a command waits on it (MAILGATE_IMAP_TIMEOUT):
   * the check of the connection after each poll interval, and every command of a sync; silent
   * for longer, the connection is taken for dead.
   */
  answerTimeoutMs?: number;
  /** Use IDLE when the server offers it (tests turn it off to exercise polling). */
  useIdle?: boolean;
  /** How long a mailbox lease lasts without renewal; another worker takes over after it. */
  leaseMs?: number;
  /** How often leases are renewed and new mailboxes picked up (CLI changes show up within it). */
  tickMs?: number;
  maxMailboxes?: number;
  /**
   * The most bytes of one message fetched and read (MAILGATE_INBOUND_MAX_BYTES): a larger one
   * is fetched up to this many bytes, which hold its headers and text; the rest (attachments)
   * is never downloaded, stored or parsed.
   */
  maxMessageBytes?: number;
  /** The registered worker's id (WorkerRegistry): the owner named by this watcher's leases. */
  owner?: string;
  /**
   * How many times one message is fetched on its own, the FETCH failing each time (an error, or
   * the server dropping the connection), before it is skipped with an error naming it.
   */
  messageFetchAttempts?: number;
}

const BACKOFF_MS = [1_000, 2_000, 5_000, 10_000, 30_000, 60_000];

/**
 * A message whose FETCH failed this many times on its own, each time while the server handed
 * over another message (MailboxSession.confirm), is skipped. With the back-off between
 * reconnects (1, 2, 5, 10, then 30 s) that is about 50 s after its first failure; a server
 * failing for a moment, or failing every FETCH for a while, costs no mail.
 */
const MESSAGE_FETCH_ATTEMPTS = 5;

/**
 * How long a session's LOGOUT may wait for the server. A server gone silent mid-IDLE answered
 * neither the IDLE's end nor the LOGOUT, and imapflow waited about 10 s before it gave up: a
 * stop (a shutdown, a lease handed over) waited as long.
 */
const LOGOUT_MS = 2_000;

/** MAILGATE_IMAP_TIMEOUT's default (config/index.ts). */
const ANSWER_TIMEOUT_MS = 30_000;

/**
 * The server sent nothing for too long while a command of ours waited on it: it went silent
 * without closing the connection (a hung server, a NAT mapping or firewall state dropped on the
 * way). Not our side's failure: the mailbox is unreachable (an SDR's disconnected) until a
 * reconnect works.
 */
class SilentServer extends Error {
  constructor(what: string, ms: number) {
    super(`the IMAP server did not answer ${what} within ${ms / 1000} s (the connection went silent)`);
  }
}

/**
 * Waits for `work`, a command of `client`, for as long as the server is seen answering: when no
 * byte at all has come from it for `ms` (imapflow's count of bytes read), SilentServer is thrown
 * (the command's own failure is thrown as it is). Silence, not the command's length, is bounded:
 * a FETCH of large messages takes as long as its bytes keep coming. Every command of a session
 * goes through here, the check of the connection between two waits (a NOOP, which ends an IDLE
 * first) as much as the SELECT, SEARCH and FETCHes of a sync: only the NOOP was bounded, and a
 * server that went silent under a SEARCH kept its watch waiting, the mailbox `ok`, for imapflow's
 * socket timeout (5 minutes without traffic, then 5 more for a NOOP of its own) while no reply
 * was read.
 */
async function answered<T>(client: ImapFlow, ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const step = Math.min(1_000, Math.max(50, Math.floor(ms / 10)));
  const silent = new Promise<never>((_, reject) => {
    let seen = client.stats().received;
    let quietSince = performance.now();
    const check = () => {
      const read = client.stats().received;
      if (read !== seen) {
        seen = read;
        quietSince = performance.now();
      } else if (performance.now() - quietSince >= ms) {
        return reject(new SilentServer(what, ms));
      }
      timer = setTimeout(check, step);
    };
    timer = setTimeout(check, step);
  });
  try {
    // race subscribes to `work`: its failure once the connection is cut is not left unhandled.
    return await Promise.race([work, silent]);
  } finally {
    clearTimeout(timer);
  }
}

/** Logs out, or cuts the connection when the server has not answered within `ms`. */
async function logoutWithin(client: ImapFlow, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  try {
    await Promise.race([client.logout(), late]);
  } catch {
    // A logout that fails leaves the connection to be closed below.
  } finally {
    clearTimeout(timer);
  }
  cut(client);
}

/** Closes the connection without a word to the server. */
function cut(client: ImapFlow): void {
  try {
    client.close();
  } catch {
    // already closed
  }
}

/**
 * What a failed IMAP connection says about the mailbox: a refused login; the server limiting
 * us (RFC 5530's [LIMIT] / [UNAVAILABLE], or "too many connections" in words); otherwise it
 * could not be reached or dropped us.
 */
export function imapFailure(err: unknown): Exclude<WatchStatus, 'ok'> {
  const e = err as { authenticationFailed?: boolean; serverResponseCode?: string; responseText?: string; message?: string };
  if (e.authenticationFailed) return 'auth_failed';
  if (e.serverResponseCode === 'LIMIT' || e.serverResponseCode === 'UNAVAILABLE') return 'rate_limited';
  if (/too many (simultaneous |concurrent )?(connections|logins|sessions)|rate limit/i.test(`${e.responseText ?? ''} ${e.message ?? ''}`)) return 'rate_limited';
  return 'unreachable';
}
const FETCH_CHUNK = 25;
/** Messages whose fetched bytes add up to at most this are fetched by one FETCH (at least one). */
const FETCH_BATCH_BYTES = 8 * 1024 * 1024;

/**
 * Splits a chunk's messages (uid and RFC822.SIZE, in uid order) into FETCH batches whose bytes,
 * each message counted up to `maxBytes`, add up to at most FETCH_BATCH_BYTES: a session holds
 * one batch of sources at a time, whatever the mailbox holds.
 */
export function fetchBatches(messages: Array<{ uid: number; size: number }>, maxBytes: number): number[][] {
  const batches: number[][] = [];
  let batch: number[] = [];
  let bytes = 0;
  for (const m of messages) {
    const n = Math.min(m.size, maxBytes);
    if (batch.length && bytes + n > FETCH_BATCH_BYTES) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(m.uid);
    bytes += n;
  }
  if (batch.length) batches.push(batch);
  return batches;
}

/** One watched mailbox: a connection that syncs, then waits (IDLE or poll), reconnecting. */
class MailboxSession {
  private client?: ImapFlow;
  private stopped = false;
  private wake?: () => void;
  private failures = 0;
  private finished = false;
  readonly done: Promise<void>;
  /**
   * Messages in a FETCH that failed: fetched one at a time from then on, until each was read,
   * so the one the server cannot hand over is found. Kept across this session's reconnects.
   */
  private readonly suspects = new Set<number>();
  /** Failed FETCHes of one message on its own, and the last failure, by uid. */
  private readonly unreadable = new Map<number, { attempts: number; error: string }>();
  /**
   * The message whose FETCH on its own failed last, not yet counted: it counts only once the
   * server has handed over another message (probe), so a server failing every FETCH for a
   * while (a storage outage, Gmail's passing "Some messages could not be FETCHed") costs none.
   */
  private unconfirmed: { uid: number; error: string } | null = null;

  constructor(
    private readonly watch: WatchRow,
    private readonly deps: Deps,
    private readonly owner: string,
    private readonly inbound: () => InboundService,
    private readonly opts: Required<Omit<WatcherOptions, 'maxMailboxes' | 'owner'>>,
  ) {
    this.done = this.run().finally(() => (this.finished = true));
  }

  /**
   * The session is over without having been told to stop: it lost the mailbox's lease (another
   * worker took it, or this one was taken for dead). The watcher forgets it, so that when the
   * lease is this worker's again a new session starts from the cursor as committed.
   */
  get ended(): boolean {
    return this.finished;
  }

  /** The credentials this session connects with (encrypted), to notice when they change. */
  get imapUrlEnc(): string | null {
    return this.watch.imap_url_enc;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.notify();
    if (this.client) await logoutWithin(this.client, LOGOUT_MS);
    await this.done;
  }

  private log() {
    return this.deps.log.child({ watchId: this.watch.id, senderAccountId: this.watch.sender_account_id ?? undefined, sdrId: this.watch.sdr_id ?? undefined });
  }

  /** Stores a connection outcome; a change of the mailbox's health is logged once, at warn. */
  private async record(status: WatchStatus, answer: string | null): Promise<void> {
    try {
      const t = await setWatchStatus(this.deps.orm.em.fork(), this.watch.id, status, answer, this.deps.clock.now());
      if (!t) return;
      // The mailbox's ids come from the child logger (log()), once each.
      const line = { from: t.from, to: t.to, response: t.error };
      const msg = `${t.sdrId ? 'SDR mailbox' : 'sender account IMAP'} health ${t.from} -> ${t.to}`;
      // A first successful login is good news; every other change is for the operator.
      if (t.from === (t.sdrId ? 'disconnected' : 'unknown') && (t.to === 'ok' || t.to === 'active')) this.log().info(line, msg);
      else this.log().warn(line, msg);
    } catch (err) {
      this.log().error({ err }, 'recording the mailbox health failed');
    }
  }

  /** Set when the server reported new mail while we were not waiting (mid-sync). */
  private pending = false;

  private notify(): void {
    if (this.wake) this.wake();
    else this.pending = true;
  }

  private async sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
    this.wake = undefined;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.session();
        this.failures = 0;
      } catch (err) {
        if (this.stopped) break;
        const e = err as { message?: string; responseText?: string };
        const status = imapFailure(err);
        const delay = BACKOFF_MS[Math.min(this.failures++, BACKOFF_MS.length - 1)] * (status === 'auth_failed' ? 5 : 1);
        if (isDatabaseError(err)) {
          // Our side failed, not the mail server: the mailbox's health stays as it is.
          this.log().error({ err, retryInMs: delay }, 'mailbox sync failed in the database');
        } else {
          await this.record(status, (e.responseText ?? e.message ?? String(err)).slice(0, 500));
          // The change of state was logged once (at warn) by record; each retry is a detail.
          this.log().debug({ err: e.message, retryInMs: delay }, 'mailbox connection failed');
        }
        // The closed connection's 'close' event marked a wake-up: it must not cut the back-off
        // short (it did, and a refused login was retried in a tight loop).
        this.pending = false;
        if (this.stopped) break;
        await this.sleep(delay);
      }
    }
  }

  private async session(): Promise<void> {
    const client = imapClient(this.deps.crypto.decrypt(this.watch.imap_url_enc), {
      // We decide when to IDLE (after each sync), not a timer.
      disableAutoIdle: true,
      connectionTimeout: 30_000,
      greetingTimeout: 30_000,
    });
    this.client = client;
    let closed = false;
    client.on('close', () => {
      closed = true;
      this.notify();
    });
    client.on('exists', () => this.notify());
    await client.connect();
    try {
      const cursor = await ours(watchCursor(this.deps.orm.em.fork(), this.watch.id));
      if (!cursor) {
        // The watch is gone (its account or mailbox removed): the next lease round agrees.
        this.stopped = true;
        return;
      }
      this.watch.uid_validity = cursor.uid_validity;
      this.watch.last_uid = cursor.last_uid;
      const mailbox = await this.ask(client, 'a SELECT', client.mailboxOpen(this.watch.mailbox));
      await this.record('ok', null);
      const idle = this.opts.useIdle && client.capabilities.has('IDLE');
      let uidValidity = mailbox.uidValidity;
      if (this.watch.uid_validity === null || BigInt(this.watch.uid_validity) !== uidValidity) {
        await ours(resetCursor(this.deps.orm.em.fork(), this.watch.id, uidValidity));
        this.watch.uid_validity = String(uidValidity);
        this.watch.last_uid = '0';
        this.suspects.clear();
        this.unreadable.clear();
        this.unconfirmed = null;
      }
      while (!this.stopped && !closed) {
        if (client.mailbox && client.mailbox.uidValidity !== uidValidity) {
          uidValidity = client.mailbox.uidValidity;
          this.suspects.clear();
          this.unreadable.clear();
          this.unconfirmed = null;
          await ours(resetCursor(this.deps.orm.em.fork(), this.watch.id, uidValidity));
          this.watch.uid_validity = String(uidValidity);
          this.watch.last_uid = '0';
        }
        await this.sync(client, uidValidity);
        // Back-off starts over once a sync went through, not at login: a failure after the
        // login (a mailbox that cannot be opened or read) keeps backing off.
        this.failures = 0;
        if (this.stopped || closed) break;
        await ours(touchWatch(this.deps.orm.em.fork(), this.watch.id, this.deps.clock.now()));
        if (idle) {
          // IDLE until the server reports new mail (the 'exists' event) or a poll interval
          // passes (a safety net against silently dropped connections: the check below must be
          // answered within answerTimeoutMs).
          const idling = client.idle().catch(() => {});
          await this.sleep(this.opts.pollIntervalMs);
          // A failed NOOP is left to the 'close' event (the connection dropped), as before.
          if (!closed && !this.stopped) await this.ask(client, 'a NOOP', client.noop()).catch((err: unknown) => {
            if (err instanceof SilentServer) throw err;
          });
          await idling;
        } else {
          await this.sleep(this.opts.pollIntervalMs);
          if (!closed && !this.stopped) await this.ask(client, 'a NOOP', client.noop());
        }
      }
    } catch (err) {
      // A silent server answers no LOGOUT either: the connection is cut at once.
      if (err instanceof SilentServer) {
        cut(client);
        closed = true;
      }
      throw err;
    } finally {
      if (!closed) await logoutWithin(client, LOGOUT_MS);
    }
    if (!this.stopped) throw new Error('IMAP connection closed');
  }

  /** A command of this session, given up when the server goes silent under it (answered). */
  private ask<T>(client: ImapFlow, what: string, work: Promise<T>): Promise<T> {
    return answered(client, this.opts.answerTimeoutMs, what, work);
  }

  /**
   * A FETCH of these messages' sources failed. Several: each is fetched on its own from now on.
   * One: an attempt of that message, counted once the server is seen handing over another one
   * (confirm). The connection is closed either way, and the session reconnects with its back-off.
   */
  private fetchFailed(uids: number[], err: unknown): void {
    if (uids.length > 1) {
      for (const uid of uids) this.suspects.add(uid);
      return;
    }
    if (uids.length === 0) return;
    const e = err as { responseText?: string; message?: string };
    this.unconfirmed = { uid: uids[0], error: String(e.responseText ?? e.message ?? err).slice(0, 500) };
  }

  /**
   * Is the last lone failure this message's own? The server is asked for one byte of another
   * message (the next one after it, else the last one read): handed over, the failure counts
   * as an attempt of that message; refused (the FETCH throws: the session reconnects), or no
   * other message to ask for, it does not, and the message is tried again as before.
   */
  private async confirm(client: ImapFlow, todo: number[], last: number): Promise<void> {
    const failed = this.unconfirmed;
    if (!failed) return;
    // Read or skipped meanwhile (by another session of this mailbox): nothing to count.
    if (failed.uid <= last) return void (this.unconfirmed = null);
    const other = todo.find((u) => u > failed.uid) ?? (last > 0 ? last : undefined);
    if (other !== undefined) {
      const got = await this.ask(client, 'a FETCH', client.fetchAll(String(other), { uid: true, source: { start: 0, maxLength: 1 } }, { uid: true }));
      if (got.length > 0) {
        const seen = this.unreadable.get(failed.uid);
        this.unreadable.set(failed.uid, { attempts: (seen?.attempts ?? 0) + 1, error: failed.error });
      }
    }
    this.unconfirmed = null;
  }

  private forget(uid: number): void {
    this.suspects.delete(uid);
    this.unreadable.delete(uid);
    if (this.unconfirmed?.uid === uid) this.unconfirmed = null;
  }

  /**
   * Ingests one message. When PostgreSQL refuses the message's own data, the message is
   * skipped (the cursor moves past it, logged at error with its uid) instead of stopping the
   * mailbox at it for ever; any other failure (the database unreachable) propagates and the
   * session retries, losing nothing.
   */
  private async ingestOrSkip(inbound: InboundService, uid: number, uidValidity: bigint, mail: IncomingMail): Promise<string> {
    try {
      return await inbound.ingest(mail);
    } catch (err) {
      if (!refusesTheData(err)) throw err;
      this.log().error({ err, uid, size: mail.raw.length }, 'inbound message refused by the database: skipped');
      this.deps.metrics.inboundSkipped.inc({ reason: 'database_refused' });
      return inbound.skip(this.watch.id, this.owner, uidValidity, uid);
    }
  }

  /** Fetches and ingests everything after the cursor (since the watch began, on first sync). */
  private async sync(client: ImapFlow, uidValidity: bigint): Promise<void> {
    // INTERNALDATE has whole seconds: compare at that precision, or mail arriving in the same
    // second the account was added would look older than it.
    const since = new Date(Math.floor(toDate(this.watch.since).getTime() / 1000) * 1000);
    const last = Number(this.watch.last_uid);
    for (const uid of [...this.suspects, ...this.unreadable.keys()]) if (uid <= last) this.forget(uid);
    const uids = (await this.ask(client, 'a SEARCH', client.search(last > 0 ? { uid: `${last + 1}:*` } : { since: new Date(since.getTime() - 86_400_000) }, { uid: true }))) || [];
    const todo = uids.filter((u) => u > last).sort((a, b) => a - b);
    await this.confirm(client, todo, last);
    const inbound = this.inbound();
    const maxBytes = this.opts.maxMessageBytes;
    for (let i = 0; i < todo.length && !this.stopped; i += FETCH_CHUNK) {
      // Date and size first; then the sources in batches of bounded bytes, each only up to
      // maxBytes (BODY.PEEK[]<0.maxBytes>), so a mailbox of large attachments costs neither
      // their download nor the memory. Mail older than the watch is never downloaded.
      const heads = await this.ask(client, 'a FETCH', client.fetchAll(todo.slice(i, i + FETCH_CHUNK).join(','), { uid: true, size: true, internalDate: true }, { uid: true }));
      heads.sort((a, b) => a.uid - b.uid);
      const byUid = new Map(heads.map((m) => {
        const receivedAt = m.internalDate ? new Date(m.internalDate) : this.deps.clock.now();
        return [m.uid, { receivedAt, size: m.size ?? 0, old: last === 0 && receivedAt < since }] as const;
      }));
      // A batch holding a message of a failed FETCH is fetched one message at a time.
      const batches = fetchBatches(heads.map((m) => ({ uid: m.uid, size: byUid.get(m.uid)!.old ? 0 : byUid.get(m.uid)!.size })), maxBytes).flatMap((b) =>
        b.some((uid) => this.suspects.has(uid)) ? b.map((uid) => [uid]) : [b],
      );
      for (const batch of batches) {
        if (this.stopped) return;
        const wanted = batch.filter((uid) => !byUid.get(uid)!.old);
        const given = this.unreadable.get(wanted[0]);
        if (wanted.length === 1 && given && given.attempts >= this.opts.messageFetchAttempts) {
          // The server failed to hand this message over every time it was asked for it alone
          // (Dovecot cannot read its file and drops the connection; Gmail answers "Some messages
          // could not be FETCHed"): skipped, as loudly as mail the database refuses, so that it
          // no longer stops every message after it.
          const uid = wanted[0];
          this.log().error({ uid, uidValidity: String(uidValidity), size: byUid.get(uid)!.size, attempts: given.attempts, response: given.error }, 'inbound message the IMAP server would not hand over: skipped');
          this.deps.metrics.inboundSkipped.inc({ reason: 'server_refused' });
          const result = await ours(inbound.skip(this.watch.id, this.owner, uidValidity, uid));
          if (result === 'lost_lease') {
            this.stopped = true;
            return;
          }
          this.forget(uid);
          this.watch.last_uid = String(uid);
          continue;
        }
        let fetched: Awaited<ReturnType<ImapFlow['fetchAll']>>;
        try {
          fetched = wanted.length ? await this.ask(client, 'a FETCH', client.fetchAll(wanted.join(','), { uid: true, source: { start: 0, maxLength: maxBytes } }, { uid: true })) : [];
        } catch (err) {
          if (!this.stopped) this.fetchFailed(wanted, err);
          throw err;
        }
        const sources = new Map(fetched.map((m) => [m.uid, m.source]));
        for (const uid of batch) {
          // Told to stop: the cursor is committed message by message, so the next session
          // starts right after the last one ingested.
          if (this.stopped) return;
          const head = byUid.get(uid)!;
          let result: string;
          if (head.old) {
            // Older than the watch: skipped, but the cursor moves past it.
            result = await ours(inbound.skip(this.watch.id, this.owner, uidValidity, uid));
          } else {
            const raw = sources.get(uid);
            this.forget(uid);
            // Expunged between the two fetches: gone, like mail deleted before any fetch.
            if (!raw) continue;
            if (head.size > raw.length) this.log().info({ uid, size: head.size, read: raw.length }, 'inbound message larger than MAILGATE_INBOUND_MAX_BYTES: its first bytes were read');
            result = await ours(this.ingestOrSkip(inbound, uid, uidValidity, {
              watchId: this.watch.id,
              workspaceId: this.watch.workspace_id,
              senderAccountId: this.watch.sender_account_id,
              sdrId: this.watch.sdr_id,
              owner: this.owner,
              uidValidity,
              uid,
              raw,
              receivedAt: head.receivedAt,
              truncated: head.size > raw.length,
            }));
          }
          if (result === 'lost_lease') {
            this.stopped = true;
            return;
          }
          this.watch.last_uid = String(uid);
          this.log().debug({ uid, result }, 'inbound message');
        }
      }
    }
  }
}

/** Marks an error as thrown by our side of a session (ours). */
const OURS = Symbol('mailgate.watcher.ours');

/**
 * A session's call to the database (or to the ingest, which only parses and writes): whatever it
 * throws is our side's failure, never the mail server's. PostgreSQL's own errors carry a
 * SQLSTATE, but a connection refused or cut under a statement does not ("connect ECONNREFUSED",
 * "Connection terminated unexpectedly"), and was taken for the IMAP server's: the mailbox's
 * health went to `unreachable` (an SDR's to `disconnected`) with the database's error as the
 * server's answer, when the database answered again by the time it was recorded (a failover).
 */
async function ours<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err !== null && typeof err === 'object') (err as { [OURS]?: true })[OURS] = true;
    throw err;
  }
}

/** A failure of the database (or of our own side), not of the mail server: a PostgreSQL error, or one from a database call of the session. */
export function isDatabaseError(err: unknown): boolean {
  return sqlState(err) !== null || (err !== null && typeof err === 'object' && OURS in err);
}

/**
 * PostgreSQL refused this message's data itself (SQLSTATE classes 22 data exception, 23
 * integrity, 54 program limit): storing it again fails again, and would stop its mailbox.
 */
function refusesTheData(err: unknown): boolean {
  return /^(22|23|54)/.test(sqlState(err) ?? '');
}

/**
 * Watches every mailbox with an IMAP URL: leases them in the database (one worker per
 * mailbox; another takes over when the holder dies), runs a session per leased mailbox.
 */
export class MailboxWatcher {
  readonly owner: string;
  private readonly sessions = new Map<string, MailboxSession>();
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private stopped = false;
  private readonly opts: Required<Omit<WatcherOptions, 'owner'>>;

  /**
   * `inbound` makes the service that ingests a mailbox's mail on a fresh EntityManager, wired
   * with its reactions (services.ts: an SDR mailbox's answers join prospect threads).
   */
  constructor(
    private readonly deps: Deps,
    private readonly inbound: () => InboundService,
    { owner, ...opts }: WatcherOptions,
  ) {
    this.owner = owner ?? `${os.hostname()}.${process.pid}.${randomBytes(3).toString('hex')}`;
    this.opts = { useIdle: true, answerTimeoutMs: ANSWER_TIMEOUT_MS, leaseMs: 30_000, tickMs: 5_000, maxMailboxes: 500, maxMessageBytes: INBOUND_MAX_BYTES_DEFAULT, messageFetchAttempts: MESSAGE_FETCH_ATTEMPTS, ...opts };
  }

  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => this.nudge(), this.opts.tickMs);
  }

  /** A lease round now (mailboxes were freed: a dead worker's), unless one is running. */
  nudge(): void {
    if (this.stopped) return;
    this.ticking ??= this.tick().finally(() => (this.ticking = undefined));
  }

  /** Renews this worker's leases, takes free or expired ones, starts and stops sessions. */
  async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      const now = this.deps.clock.now();
      // Sessions that ended on their own (a lost lease) are forgotten: one is started again
      // below if the lease is (again) this worker's. Kept, such a session left its mailbox
      // unread while this worker went on renewing the lease, so no other took it over.
      for (const [id, session] of this.sessions) if (session.ended) this.sessions.delete(id);
      const leased = await leaseWatches(this.deps.orm.em.fork(), this.owner, now, new Date(now.getTime() + this.opts.leaseMs), this.opts.maxMailboxes);
      // A mailbox whose credentials changed (a reconnect through the CLI or the dashboard) gets
      // a new session with them within a lease round, as any CLI change must (contract §7).
      const keep = new Set(leased.filter((w) => w.imap_url_enc && w.imap_url_enc === (this.sessions.get(w.id)?.imapUrlEnc ?? w.imap_url_enc)).map((w) => w.id));
      for (const [id, session] of this.sessions) {
        if (!keep.has(id)) {
          this.sessions.delete(id);
          await session.stop();
        }
      }
      for (const w of leased) {
        if (!w.imap_url_enc || this.sessions.has(w.id)) continue;
        this.sessions.set(w.id, new MailboxSession(w, this.deps, this.owner, this.inbound, this.opts));
      }
    } catch (err) {
      this.deps.log.error({ err }, 'mailbox lease round failed');
    }
  }

  /** Stops every session and hands the leases back so another worker can take over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.ticking;
    await Promise.all([...this.sessions.values()].map((s) => s.stop()));
    this.sessions.clear();
    await releaseWatches(this.deps.orm.em.fork(), this.owner).catch(() => {});
  }
}
