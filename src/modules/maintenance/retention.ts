// Retention of the webhook log: events older than MAILGATE_EVENT_RETENTION go, with their
// finished deliveries (whose attempts are part of the delivery row). Campaign data (messages, replies, threads,
// suppressions) is never touched here. See docs/webhooks.md, "Retention".
import type { EntityManager } from '@mikro-orm/postgresql';
import { relationPages } from '../../db/admin.ts';
import { pruneDeliveries } from '../webhooks/repository.ts';
import { pruneEvents } from '../events/outbox.ts';

export interface PruneResult {
  deliveries: number;
  events: number;
}

/** Heap pages one statement looks at: a bounded, short statement however large the table. */
const PAGES_PER_STATEMENT = 2_000;

/**
 * Deletes, in short statements of their own:
 * 1. deliveries created before `cutoff` that are finished (`delivered` or `failed`), attempts
 *    and all; a delivery still pending (retrying, or retried by hand) stays, whatever its age;
 * 2. events created before `cutoff` that were fanned out and have no delivery left.
 *
 * An event not fanned out yet, or with a delivery still pending, is kept; so nothing a receiver
 * is owed is ever deleted. The tables are walked by ranges of heap pages (a TID range scan), so
 * no index on created_at is needed (none is kept: it would cost every event and delivery
 * written) and each statement reads at most PAGES_PER_STATEMENT pages. `touch` is called
 * between statements (the Agenda job keeps its lock).
 */
export async function pruneWebhookLog(
  em: EntityManager,
  cutoff: Date,
  touch: () => Promise<void> = async () => {},
  pagesPerStatement = PAGES_PER_STATEMENT,
): Promise<PruneResult> {
  const walk = (table: 'events' | 'webhook_deliveries', del: (from: string, to: string) => Promise<unknown[]>) =>
    byPageRanges(em, table, pagesPerStatement, touch, del);
  const deliveries = await walk('webhook_deliveries', (from, to) => pruneDeliveries(em, from, to, cutoff));
  const events = await walk('events', (from, to) => pruneEvents(em, from, to, cutoff));
  return { deliveries, events };
}

/** Runs `del` over [0, pages) of `table` in ranges of `step` pages; returns the rows deleted. */
async function byPageRanges(
  em: EntityManager,
  table: 'events' | 'webhook_deliveries',
  step: number,
  touch: () => Promise<void>,
  del: (from: string, to: string) => Promise<unknown[]>,
): Promise<number> {
  const pages = await relationPages(em, table);
  let deleted = 0;
  // Rows written meanwhile land on pages past the end or in freed space; either way they are
  // newer than the cutoff, so the walk may stop at the size it read first.
  for (let page = 0; page < Number(pages); page += step) {
    deleted += (await del(`(${page},0)`, `(${page + step},0)`)).length;
    await touch();
  }
  return deleted;
}
