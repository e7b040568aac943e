import type { EntityManager } from '@mikro-orm/postgresql';
import type { Deps } from '../../deps.ts';
import { suppress, suppressedAmong } from '../suppression/repository.ts';
import { endEnrollments, enrollmentsOfLead } from '../messages/enrollments.ts';
import { linkTarget, markOpened } from '../messages/transitions.ts';
import { transaction } from '../../db/transaction.ts';

/**
 * Open tracking and unsubscribe links. Tokens are signed with the secret key (`o.<msg id>`,
 * `u.<msg id>`); a forged or tampered token is unknown (404) and changes nothing.
 */
export class TrackingService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  private messageOf(token: string, kind: 'o' | 'u'): string | null {
    const payload = this.deps.crypto.verify(token);
    if (!payload || !payload.startsWith(`${kind}.msg_`)) return null;
    return payload.slice(2);
  }

  /** Records the first open of a message; later opens change nothing. False for a bad token. */
  async open(token: string): Promise<boolean> {
    const id = this.messageOf(token, 'o');
    if (!id) return false;
    const now = this.deps.clock.now();
    const { first, known } = await transaction(this.em, async (em) => ({
      first: await markOpened(em, id, now),
      known: !!(await linkTarget(em, id)),
    }));
    if (first) this.deps.metrics.opens.inc();
    return known;
  }

  /** Whether an open-tracking token names a message (a HEAD of the pixel: nothing recorded). */
  async pixelKnown(token: string): Promise<boolean> {
    const id = this.messageOf(token, 'o');
    return !!id && !!(await linkTarget(this.em, id));
  }

  /**
   * The address a valid unsubscribe token is for, and whether the workspace's suppression list
   * holds it already (it gets no more mail: the page says so instead of asking again), or null.
   */
  async unsubscribeTarget(token: string): Promise<{ email: string; messageId: string; suppressed: boolean } | null> {
    const id = this.messageOf(token, 'u');
    if (!id) return null;
    const m = await linkTarget(this.em, id);
    if (!m) return null;
    const suppressed = (await suppressedAmong(this.em, m.workspace_id, [m.to_email])).length > 0;
    return { email: m.to_email, messageId: id, suppressed };
  }

  /**
   * One-click unsubscribe (RFC 8058): suppresses the address in the workspace and ends every
   * enrollment of the lead (status unsubscribed, pending messages cancelled). Idempotent.
   */
  async unsubscribe(token: string): Promise<boolean> {
    const id = this.messageOf(token, 'u');
    if (!id) return false;
    const now = this.deps.clock.now();
    const done = await transaction(this.em, async (em) => {
      const m = await linkTarget(em, id);
      if (!m) return false;
      // The lead's enrollments first, then the suppression (a reply's and a bounce's order: two
      // unsubscribes of one lead, by link and by reply, deadlocked).
      const enrollments = await enrollmentsOfLead(em, m.lead_id);
      const added = await suppress(em, m.workspace_id, [m.to_email], 'unsubscribe', id, now);
      const ended = await endEnrollments(em, enrollments, 'unsubscribed', 'unsubscribed', now);
      return { changed: added > 0 || ended.length > 0 };
    });
    // Counted when it changed something: a repeat of the link (or a mail client's second POST) is no new unsubscribe.
    if (done && done.changed) this.deps.metrics.unsubscribes.inc({ source: 'link' });
    return !!done;
  }
}
