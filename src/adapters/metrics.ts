import { Registry, Counter, Gauge, Histogram, collectDefaultMetrics } from 'prom-client';
import type { MikroORM } from '@mikro-orm/postgresql';
import { sql } from '../db/sql.ts';
import { transactionRetries } from '../db/transaction.ts';
import { firstSlot, inWindow } from '../modules/sending/schedule.ts';
import { tallyWindow, usedSql } from '../modules/messages/tallies.ts';
import { pendingFirstStepsSql } from '../modules/messages/queue.ts';
import type { Schedule } from '../modules/campaigns/entities.ts';

/**
 * A gauge without labels set to `value`, or left out of the scrape when the value is unknown
 * (the database could not be read): a 0 would say "no lag" while nothing was known.
 */
function setOrOmit(gauge: Gauge, value: number | undefined): void {
  if (value === undefined) (gauge as unknown as { hashMap: Record<string, unknown> }).hashMap = {};
  else gauge.set(value);
}

/**
 * The process's Prometheus metrics (docs/operating.md lists them). One registry per process,
 * passed through Deps: no global registry, so tests building several apps in one process each
 * count their own.
 *
 * Labels are bounded: outcomes, classifications, job names, HTTP route templates (never a raw
 * URL: an unmatched request is route="unmatched"), and sender account ids, which are labels only
 * because a deployment has few accounts (tens, not thousands: each is a real mailbox).
 *
 * State that lives in the database (messages by state, webhook deliveries pending, IMAP
 * watches) is read at scrape time, in one grouped query per family, cached for a few seconds so
 * several scrapers (or a fast scrape interval) cost one read.
 */
export class Metrics {
  readonly registry = new Registry();
  /** Told once when the scrapes' database read starts failing (the metrics listener logs it). */
  onDatabaseReadFailure?: (err: unknown) => void;
  private orm?: MikroORM;
  private processMetrics = false;

  readonly smtpOutcomes = this.counter('mailgate_smtp_outcomes_total', 'SMTP transactions by outcome (accepted, rejected, temporary, auth_failed, unreachable, rate_limited, too_many_connections, error, abandoned)', ['outcome']);
  readonly sent = this.counter('mailgate_messages_sent_total', 'Messages accepted by an SMTP server', []);
  readonly bounces = this.counter('mailgate_bounces_total', 'Bounces by type: hard (5xx or a hard DSN), soft (4xx after the last retry, or a soft DSN)', ['type']);
  readonly replies = this.counter('mailgate_replies_total', 'Replies recorded, by classification', ['classification']);
  readonly unsubscribes = this.counter('mailgate_unsubscribes_total', 'Unsubscribes, by source (link, reply, reclassified: an operator made a reply an unsubscribe)', ['source']);
  readonly repliesReclassified = this.counter('mailgate_replies_reclassified_total', "Replies whose classification an operator corrected, by the classification before and after (the classifier's mistakes)", ['from', 'to']);
  readonly opens = this.counter('mailgate_opens_total', 'First opens of messages (tracking pixel)', []);
  readonly inboundSkipped = this.counter(
    'mailgate_inbound_skipped_total',
    'Inbound messages passed over without effect, by reason (unparseable, database_refused, server_refused); each is logged with its mailbox and uid',
    ['reason'],
  );
  readonly smtpDuration = new Histogram({
    name: 'mailgate_smtp_transaction_seconds',
    help: 'Duration of one SMTP transaction (connection reuse included), by outcome',
    labelNames: ['outcome'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly claimToSend = new Histogram({
    name: 'mailgate_claim_to_send_seconds',
    help: 'From a message being claimed by a worker to the start of its SMTP transaction',
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300],
    registers: [this.registry],
  });
  readonly outcomeWrite = new Histogram({
    name: 'mailgate_outcome_write_seconds',
    help: "One statement recording accepted messages (and answering the guards asked meanwhile), to its commit: each connection's next message ends its data only after its previous one's",
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  });
  readonly outcomeWriteMessages = new Histogram({
    name: 'mailgate_outcome_write_messages',
    help: 'Accepted messages recorded by one outcome statement (group commit)',
    buckets: [1, 2, 3, 4, 6, 8, 16, 32, 64],
    registers: [this.registry],
  });
  readonly webhookAttempts = this.counter('mailgate_webhook_attempts_total', 'Webhook delivery attempts by outcome (delivered, retry, dead)', ['outcome']);
  readonly webhookLag = new Histogram({
    name: 'mailgate_webhook_delivery_lag_seconds',
    help: 'From the event to its successful delivery',
    buckets: [0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 3600, 14400],
    registers: [this.registry],
  });
  readonly llmCalls = this.counter('mailgate_llm_calls_total', 'LLM calls by outcome (ok, or the error kind)', ['outcome']);
  readonly llmDuration = new Histogram({
    name: 'mailgate_llm_call_seconds',
    help: 'LLM call duration (retries included), by outcome',
    labelNames: ['outcome'],
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly jobRuns = this.counter('mailgate_job_runs_total', 'Recurring job rounds run, by job name', ['job']);
  readonly jobErrors = this.counter('mailgate_job_errors_total', 'Recurring job rounds that failed, by job name', ['job']);
  readonly httpRequests = this.counter('mailgate_http_requests_total', 'HTTP requests by method, route template and status', ['method', 'route', 'status']);
  readonly httpDuration = new Histogram({
    name: 'mailgate_http_request_duration_seconds',
    help: 'HTTP request duration by method, route template and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
  });

  constructor(orm?: MikroORM) {
    this.orm = orm;
    const read = this.cached(() => this.readDatabase());
    // The scrape's database read, or null when the database cannot be read now (down, restarting,
    // unreachable): the database gauges are then left out of the scrape, and
    // mailgate_database_up says 0. The process's own metrics are still served: a failed read
    // failed the whole scrape (500), so Prometheus took the live process for down (the "No
    // worker" alert) and lost its counters for the length of a database outage.
    let readFailed = false;
    const db = async () => {
      try {
        const v = await read();
        readFailed = false;
        return v;
      } catch (err) {
        if (!readFailed) this.onDatabaseReadFailure?.(err);
        readFailed = true;
        return null;
      }
    };
    new Gauge({
      name: 'mailgate_database_up',
      help: 'Whether the database answered this scrape\'s reads (1) or not (0: the database gauges are left out of the scrape)',
      registers: [this.registry],
      async collect() {
        this.set((await db()) ? 1 : 0);
      },
    });
    new Gauge({
      name: 'mailgate_messages',
      help: 'Outbound messages waiting or in flight, by state (scheduled, queued, sending), read from the database',
      labelNames: ['state'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of (await db())?.byState ?? []) this.set({ state: r.state }, r.n);
      },
    });
    new Gauge({
      name: 'mailgate_sender_messages',
      help: 'Outbound messages in flight by sender account (state sending), read from the database',
      labelNames: ['sender_account', 'state'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of (await db())?.byAccount ?? []) this.set({ sender_account: r.account, state: r.state }, r.n);
      },
    });
    new Gauge({
      name: 'mailgate_sender_sent_24h',
      help: 'Messages each sender account sent in the last 24 hours (the count its daily limit is checked against), read from the database',
      labelNames: ['sender_account'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of (await db())?.sent24h ?? []) this.set({ sender_account: r.account }, r.n);
      },
    });
    new Gauge({
      name: 'mailgate_sender_accounts',
      help: 'Sender accounts by health (unknown, ok, auth_failed, unreachable, rate_limited)',
      labelNames: ['health'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of (await db())?.senders ?? []) this.set({ health: r.health }, r.n);
      },
    });
    new Gauge({
      name: 'mailgate_queue_oldest_due_seconds',
      help: 'How long the oldest message that could be sent now has been due (running campaigns inside their schedule window; 0 when none waits): the sending lag',
      registers: [this.registry],
      async collect() {
        setOrOmit(this, (await db())?.queueLag);
      },
    });
    new Gauge({
      name: 'mailgate_webhook_deliveries_pending',
      help: 'Webhook deliveries not yet delivered nor given up (state pending: written at the end of a first attempt, so retries waiting or under way)',
      registers: [this.registry],
      async collect() {
        setOrOmit(this, (await db())?.webhooksPending);
      },
    });
    new Gauge({
      name: 'mailgate_imap_watches',
      help: 'Watched mailboxes by state (unknown, ok, auth_failed, unreachable, rate_limited)',
      labelNames: ['state'],
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const r of (await db())?.watches ?? []) this.set({ state: r.state }, r.n);
      },
    });
    const metrics = this;
    new Counter({
      name: 'mailgate_db_transaction_retries_total',
      help: 'Transactions run again after PostgreSQL aborted them for a deadlock or a serialization failure (db/transaction.ts)',
      registers: [this.registry],
      collect() {
        this.reset();
        if (metrics.orm) this.inc(transactionRetries(metrics.orm));
      },
    });
    new Gauge({
      name: 'mailgate_imap_oldest_sync_age_seconds',
      help: 'Time since the least recently synced watched mailbox was last synced (0 when none is watched)',
      registers: [this.registry],
      async collect() {
        setOrOmit(this, (await db())?.syncAge);
      },
    });
  }

  /** The database gauges read through this ORM (a process without one reports none). */
  useDatabase(orm: MikroORM): void {
    this.orm = orm;
  }

  /** Node's default process metrics (CPU, memory, event loop lag, GC, handles); once. */
  collectProcessMetrics(): void {
    if (this.processMetrics) return;
    this.processMetrics = true;
    collectDefaultMetrics({ register: this.registry });
  }

  contentType(): string {
    return this.registry.contentType;
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  private counter<L extends string>(name: string, help: string, labelNames: L[]): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** One read shared by every gauge of a scrape, and by scrapes within `ttlMs`. */
  private cached<T>(read: () => Promise<T>, ttlMs = 5_000): () => Promise<T> {
    let at = 0;
    let value: Promise<T> | undefined;
    return () => {
      if (!value || Date.now() - at > ttlMs) {
        at = Date.now();
        value = read().catch((err) => {
          value = undefined;
          throw err;
        });
      }
      return value;
    };
  }

  private async readDatabase() {
    const empty = { byState: [], byAccount: [], sent24h: [], senders: [], watches: [], queueLag: 0, webhooksPending: 0, syncAge: 0 };
    if (!this.orm) return empty;
    const em = this.orm.em.fork();
    // The queue only, each state through its partial index: a scrape costs what waits and what
    // is in flight, not the history. (A grouped count of every message by state read the whole
    // table: about 3 s at 3 million messages, on every scrape of every process. What was sent,
    // bounced or failed is counted by the process counters and by each campaign's stats.) The
    // queued count includes the first steps a large start left to the workers (queue.ts), as
    // the campaigns' stats do.
    const messages = await sql<{ state: string; account: string | null; n: string; g: number }>(
      em,
      `select 'scheduled' as state, null as account, count(*) as n, 1 as g from outbound_messages where state = 'scheduled'
       union all select 'queued', null, count(*) + (select coalesce(sum(${pendingFirstStepsSql('f.campaign_id')}), 0) from first_step_backlog f), 1
                   from outbound_messages where state = 'queued'
       union all select 'sending', null, count(*), 1 from outbound_messages where state = 'sending'
       union all select 'sending', sender_account_id, count(*), 0 from outbound_messages where state = 'sending' and sender_account_id is not null group by sender_account_id`,
    );
    // Each account's rolling 24 hours, as the claim counts it (sent tallies: messages/tallies.ts).
    const w = tallyWindow(new Date());
    const sent24h = await sql<{ account: string; n: string }>(
      em,
      `select a.id as account, ${usedSql('a.id', 'sender_account_id')} as n from sender_accounts a`,
      [w.edgeEnd, w.since, w.edgeEnd],
    );
    const [other] = await sql<{ now: Date; webhooks: string; sync_age: number | null; senders: Array<{ health: string; n: number }> | null; watches: Array<{ state: string; n: number }> | null }>(
      em,
      `select now() as now,
              (select count(*) from webhook_deliveries where state = 'pending') as webhooks,
              extract(epoch from now() - (select min(coalesce(last_synced_at, since)) from mailbox_watches))::float8 as sync_age,
              (select json_agg(json_build_object('health', health, 'n', n)) from (select health, count(*) as n from sender_accounts group by health) h) as senders,
              (select json_agg(json_build_object('state', status, 'n', n)) from (select status, count(*) as n from mailbox_watches group by status) w) as watches`,
    );
    // The sending lag counts only what could be sent now: the oldest due message of each running
    // campaign inside its schedule window (outbound_claim_order_idx, the first entry per
    // campaign), due since its first slot. A paused campaign's queue, or one waiting for its
    // window, lags nothing: counted, the alert fired every night for every scheduled campaign
    // and a campaign paused for days pinned the gauge (docs/operating.md). First steps a large
    // start left to the workers (first_step_backlog) are due since the start: a backlog nobody
    // writes lags as its messages would.
    const running = await sql<{ schedule: Schedule | null; oldest: Date | null }>(
      em,
      `select c.schedule, least((select m.due_at from outbound_messages m where m.campaign_id = c.id and m.state = 'queued' and m.due_at <= now()
                                  order by m.due_at limit 1),
                                 (select b.due_at from first_step_backlog b where b.campaign_id = c.id)) as oldest
         from campaigns c where c.status = 'running'`,
    );
    const now = new Date(other.now);
    let queueLag = 0;
    for (const c of running) {
      if (!c.oldest || !inWindow(c.schedule, now)) continue;
      queueLag = Math.max(queueLag, (now.getTime() - firstSlot(c.schedule, new Date(c.oldest)).getTime()) / 1000);
    }
    return {
      byState: messages.filter((r) => r.g === 1).map((r) => ({ state: r.state, n: Number(r.n) })),
      byAccount: messages.filter((r) => r.g === 0 && r.account).map((r) => ({ account: r.account!, state: r.state, n: Number(r.n) })),
      sent24h: sent24h.map((r) => ({ account: r.account, n: Number(r.n) })),
      senders: other.senders ?? [],
      watches: other.watches ?? [],
      queueLag,
      webhooksPending: Number(other.webhooks),
      syncAge: Math.max(0, other.sync_age ?? 0),
    };
  }
}
