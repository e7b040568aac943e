import pg from 'pg';
import type { Logger } from '../../adapters/logger.ts';
import { SEND_CHANNEL } from '../messages/queue.ts';

/**
 * A worker's ear for `notifyQueued` (messages/queue.ts): one connection listening on the channel, calling `wake`
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
