import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { Logger } from '../../adapters/logger.ts';
import type { Clock } from '../../adapters/clock.ts';
import { REQUEUED } from '../messages/transitions.ts';

/** What a reclaim took over from dead workers. */
export interface Reclaimed {
  workers: string[];
  messages: number;
  /** Leased deliveries (retries) handed back. */
  deliveries: number;
  /** Events of fan-out batches handed back, whose deliveries had not been written yet. */
  fannedOutEvents: number;
  mailboxes: number;
}

export interface RegistryOptions {
  role: string;
  /** How often the heartbeat is written and dead workers looked for (MAILGATE_WORKER_HEARTBEAT). */
  heartbeatMs: number;
  /** A heartbeat older than this is a dead worker's (MAILGATE_WORKER_DEAD_AFTER). */
  deadAfterMs: number;
  /** Called after work was taken over, so this process picks it up without waiting for a tick. */
  onReclaimed?: (r: Reclaimed) => void;
}

/**
 * Hands a dead worker's work back, in one statement (one transaction): claimed messages to the
 * queue, leased webhook deliveries due at once, its webhook fan-out batches' leases run out,
 * watched mailboxes free. Each part reads only the rows the dead owners hold, through
 * outbound_claimed_by_idx and webhook_deliveries_owner_idx (partial indexes of work in flight);
 * webhook_fanouts holds only batches in flight and mailbox_watches a row per mailbox.
 */
export async function reclaimWork(db: pg.ClientBase, owners: string[], now: Date): Promise<Omit<Reclaimed, 'workers'>> {
  const { rows } = await db.query<{ messages: number; deliveries: number; fannedOutEvents: number; mailboxes: number }>(
    `with m as (
       update outbound_messages set ${REQUEUED}, updated_at = $2
        where state = 'sending' and claimed_by = any($1::text[])
       returning 1
     ), d as (
       -- Clearing lease_until fences the dead owner's outcomes (recorded only under their lease);
       -- a held delivery (disabled webhook, no due time) stays held.
       update webhook_deliveries set lease_owner = null, lease_until = null, updated_at = $2,
              next_attempt_at = case when next_attempt_at is not null then $2::timestamptz end
        where lease_owner = any($1::text[]) and state = 'pending'
       returning 1
     ), f as (
       -- Fan-out batches (fresh deliveries not yet written): their leases run out now, and the
       -- next claim of any worker takes them again (webhooks/repository.ts retakeFanOuts).
       update webhook_fanouts set lease_owner = null, lease_until = $2 where lease_owner = any($1::text[])
       returning cardinality(event_ids) as events
     ), w as (
       update mailbox_watches set lease_owner = null, lease_until = null where lease_owner = any($1::text[])
       returning 1
     )
     select (select count(*)::int from m) as messages, (select count(*)::int from d) as deliveries,
            (select coalesce(sum(events), 0)::int from f) as "fannedOutEvents", (select count(*)::int from w) as mailboxes`,
    [owners, now],
  );
  return rows[0];
}

/**
 * This process as a worker: a `workers` row whose heartbeat a timer writes every
 * `heartbeatMs` on a connection of its own (never queued behind the work), and after each
 * heartbeat a look for dead workers: rows whose heartbeat is older than `deadAfterMs` by the
 * database's clock. A dead worker's row is deleted and its work handed back in one transaction,
 * by whichever live worker gets there first (the rows are taken FOR UPDATE SKIP LOCKED). A row
 * is therefore missing only once its work was reclaimed; claims of owners that never registered
 * (older versions) still return when their lease runs out.
 *
 * Liveness is the heartbeat only, not how fast the work goes: a worker whose SMTP server or
 * webhook receiver is slow keeps beating and keeps its work. A worker found taken for dead (its
 * row gone: it could not beat for `deadAfterMs`) registers again and carries on; what it held
 * was reclaimed, and the send guard, the outcome fences and the mailbox cursor's owner check
 * keep it from acting on it.
 *
 * A worker judges others only once it has itself beaten without a break for `deadAfterMs`
 * (at start, and again after losing its connection): after a database outage all heartbeats
 * are old, and the first worker back must not take the others' work while they reconnect.
 */
export class WorkerRegistry {
  readonly id = `${os.hostname()}.${process.pid}.${randomBytes(4).toString('hex')}`;
  private client?: pg.Client;
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private stopped = false;
  /** performance.now() of the first heartbeat of the current unbroken series, and of the last. */
  private beatingSince?: number;
  private lastBeat?: number;

  constructor(
    private readonly url: string,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly opts: RegistryOptions,
  ) {}

  /** Registers (before this process claims anything) and starts the heartbeat. */
  async start(): Promise<void> {
    const client = await this.connect();
    await client.query(
      `insert into workers (id, host, pid, role, started_at, heartbeat_at) values ($1, $2, $3, $4, now(), now())`,
      [this.id, os.hostname(), process.pid, this.opts.role],
    );
    this.beatingSince = this.lastBeat = performance.now();
    this.timer = setInterval(() => {
      this.ticking ??= this.tick().finally(() => (this.ticking = undefined));
    }, this.opts.heartbeatMs);
  }

  /** Deregisters: what this process still holds (work that outlived the drain) goes back at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.ticking;
    try {
      const client = await this.connect();
      await client.query('begin');
      await reclaimWork(client, [this.id], this.clock.now());
      await client.query(`delete from workers where id = $1`, [this.id]);
      await client.query('commit');
    } catch (err) {
      this.log.warn({ err, workerId: this.id }, 'could not deregister this worker; the others take its work over once its heartbeat is old');
    } finally {
      await this.client?.end().catch(() => {});
      this.client = undefined;
    }
  }

  private async connect(): Promise<pg.Client> {
    if (this.client) return this.client;
    // Every query of the heartbeat has a time limit, and the connection TCP keepalives: a
    // connection frozen under it (a failover that moved the address, a dead NAT entry) hung the
    // beat, so this live worker was taken for dead and its work handed to others while it kept
    // sending. Timed out, the connection is dropped and the next tick opens a new one.
    const limit = Math.max(1_000, Math.floor(this.opts.deadAfterMs / 3));
    const client = new pg.Client({
      connectionString: this.url,
      application_name: 'mailgate worker heartbeat',
      keepAlive: true,
      connectionTimeoutMillis: limit,
      query_timeout: limit,
    });
    // A dropped connection is replaced at the next tick; the error must not crash the process.
    client.on('error', (err) => {
      this.log.warn({ err }, 'the worker heartbeat connection failed; reconnecting');
      if (this.client === client) this.client = undefined;
      client.end().catch(() => {});
    });
    await client.connect();
    this.client = client;
    return client;
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.beat();
      const now = performance.now();
      // Judge others only after beating without a break for a whole timeout: after an outage
      // (of the database, or of this process's connection or event loop) every live worker's
      // heartbeat is old until it reconnects, and none of them may be taken for dead meanwhile.
      if (this.lastBeat === undefined || now - this.lastBeat > this.opts.deadAfterMs) this.beatingSince = now;
      this.beatingSince ??= now;
      this.lastBeat = now;
      if (now - this.beatingSince >= this.opts.deadAfterMs) await this.reclaimDead();
    } catch (err) {
      this.beatingSince = this.lastBeat = undefined;
      this.log.error({ err, workerId: this.id }, 'worker heartbeat failed');
      const c = this.client;
      this.client = undefined;
      // Not awaited: on a frozen connection the goodbye never completes.
      c?.end().catch(() => {});
    }
  }

  private async beat(): Promise<void> {
    const client = await this.connect();
    const { rowCount } = await client.query(`update workers set heartbeat_at = now() where id = $1`, [this.id]);
    if (rowCount) return;
    this.log.warn({ workerId: this.id }, 'this worker was taken for dead (no heartbeat for too long) and its work handed to others; registering again');
    await client.query(
      `insert into workers (id, host, pid, role, started_at, heartbeat_at) values ($1, $2, $3, $4, now(), now()) on conflict (id) do update set heartbeat_at = now()`,
      [this.id, os.hostname(), process.pid, this.opts.role],
    );
  }

  /**
   * Takes over the work of dead workers. When there are none (nearly always) this is one read
   * of the few `workers` rows, in a transaction that writes nothing.
   */
  async reclaimDead(): Promise<Reclaimed | null> {
    const client = await this.connect();
    await client.query('begin');
    try {
      const { rows } = await client.query<{ id: string }>(
        `delete from workers where id in (
           select id from workers where heartbeat_at < now() - $1 * interval '1 millisecond' and id <> $2 for update skip locked)
         returning id`,
        [this.opts.deadAfterMs, this.id],
      );
      if (!rows.length) {
        await client.query('commit');
        return null;
      }
      const owners = rows.map((r) => r.id);
      const work = await reclaimWork(client, owners, this.clock.now());
      await client.query('commit');
      const reclaimed = { workers: owners, ...work };
      this.log.warn(reclaimed, 'took over the work of dead workers (no heartbeat)');
      this.opts.onReclaimed?.(reclaimed);
      return reclaimed;
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    }
  }
}
