import type { Logger } from '../../adapters/logger.ts';
import { ChannelListener } from '../../db/listener.ts';
import { SEND_CHANNEL } from '../messages/queue.ts';

/**
 * A worker's ear for `notifyQueued` (messages/queue.ts): one connection listening on the channel, calling `wake`
 * for each notification. Without it a started campaign waits for the dispatch job's next round
 * (it runs every second, so its first message went out 0.5-1 s after `start`); the job still
 * runs as before, this only adds a round at once. If the connection drops it is reopened.
 */
export class SendWakeup extends ChannelListener {
  constructor(url: string, wake: () => void, log: Logger, retryMs = 5_000) {
    super(url, SEND_CHANNEL, () => wake(), log, 'send', retryMs);
  }
}
