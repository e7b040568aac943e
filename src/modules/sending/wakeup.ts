import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { Logger } from '../../adapters/logger.ts';

/** The PostgreSQL channel a campaign start (or leads queued into a running campaign) notifies. */
export const SEND_CHANNEL = 'mailgate_send';

/**
 * Tells the workers that messages were queued for sending. Call it in the transaction that
 * queues them: PostgreSQL delivers the notification when (and only if) it commits.
 */
export async function notifySending(em: EntityManager): Promise<void> {
  await sql(em, `select pg_notify('${SEND_CHANNEL}', '')`);
}

/**
 * A worker's ear for `notifySending`: one connection listening on the channel, calling `wake`
 * for each notification. Without it a started campaign waits for the dispatch job's next round
 * (it runs every second, so its first message went out 0.5-1 s after `start`); the job still
 * runs as before, this only adds a round at once. If the connection drops it is reopened.
 */
export class SendWakeup {
  private client?: pg.Client;
  private stopped = false;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly url: string,
    private readonly wake: () => void,
    private readonly log: Logger,
    private readonly retryMs = 5_000,
  ) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on('notification', () => this.wake());
    client.on('error', (err) => {
      this.log.warn({ err }, 'the send notification connection failed; reconnecting');
      this.reconnect(client);
    });
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${SEND_CHANNEL}`);
      this.client = client;
    } catch (err) {
      this.log.warn({ err }, 'listening for send notifications failed; retrying');
      this.reconnect(client);
    }
  }

  private reconnect(client: pg.Client): void {
    if (this.stopped || this.retry || (this.client && this.client !== client)) return;
    this.client = undefined;
    client.end().catch(() => {});
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (!this.stopped) void this.start();
    }, this.retryMs);
    this.retry.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
