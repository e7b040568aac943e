import pg from 'pg';
import type { Logger } from '../adapters/logger.ts';

/**
 * One connection listening on a PostgreSQL channel, calling `heard` with each notification's
 * payload (the sending workers' wake-up, sending/wakeup.ts; the webhook dispatcher's changes,
 * webhooks/dispatcher.ts). A dedicated pg.Client: a pooled connection would lose the LISTEN when
 * it is handed to someone else. If the connection drops it is reopened after `retryMs`;
 * notifications sent meanwhile are not heard, so a listener is only ever a shortcut: what it
 * hears must also come some slower way.
 */
export class ChannelListener {
  private client?: pg.Client;
  private stopped = false;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly url: string,
    private readonly channel: string,
    private readonly heard: (payload: string) => void,
    private readonly log: Logger,
    /** What the notifications are about, for the log lines ("send", "webhook change"). */
    private readonly what: string,
    private readonly retryMs = 5_000,
  ) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on('notification', (n) => this.heard(n.payload ?? ''));
    client.on('error', (err) => {
      this.log.warn({ err }, `the ${this.what} notification connection failed; reconnecting`);
      this.reconnect(client);
    });
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${this.channel}`);
      if (this.stopped) {
        // Stopped while connecting: stop() had no client to end yet.
        await client.end().catch(() => {});
        return;
      }
      this.client = client;
    } catch (err) {
      this.log.warn({ err }, `listening for ${this.what} notifications failed; retrying`);
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
