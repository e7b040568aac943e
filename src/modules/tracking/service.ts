import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { Deps } from '../../deps.ts';
import { bumpCounters } from '../campaigns/repository.ts';
import { SuppressionService } from '../suppression/service.ts';
import { endEnrollments } from '../sending/lifecycle.ts';

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
    let first = false;
    const known = await this.em.transactional(async (em) => {
      const [m] = await sql<{ campaign_id: string; enrollment_id: string }>(
        em,
        `update outbound_messages set opened_at = ?, updated_at = ? where id = ? and opened_at is null and sent_at is not null
         returning campaign_id, enrollment_id`,
        [now, now, id],
      );
      if (m) {
        first = true;
        await bumpCounters(em, m.campaign_id, { opened: 1 });
        await sql(em, `update enrollments set last_event = 'opened', last_event_at = ?, updated_at = ? where id = ?`, [now, now, m.enrollment_id]);
      }
      const [exists] = await sql(em, `select 1 from outbound_messages where id = ?`, [id]);
      return !!exists;
    });
    if (first) this.deps.metrics.opens.inc();
    return known;
  }

  /** The address a valid unsubscribe token is for, or null. */
  async unsubscribeTarget(token: string): Promise<{ email: string; messageId: string } | null> {
    const id = this.messageOf(token, 'u');
    if (!id) return null;
    const [m] = await sql<{ to_email: string }>(this.em, `select to_email from outbound_messages where id = ?`, [id]);
    return m ? { email: m.to_email, messageId: id } : null;
  }

  /**
   * One-click unsubscribe (RFC 8058): suppresses the address in the workspace and ends every
   * enrollment of the lead (status unsubscribed, pending messages cancelled). Idempotent.
   */
  async unsubscribe(token: string): Promise<boolean> {
    const id = this.messageOf(token, 'u');
    if (!id) return false;
    const now = this.deps.clock.now();
    const done = await this.em.transactional(async (em) => {
      const [m] = await sql<{ workspace_id: string; lead_id: string; to_email: string }>(
        em,
        `select workspace_id, lead_id, to_email from outbound_messages where id = ?`,
        [id],
      );
      if (!m) return false;
      await new SuppressionService(this.deps, em).add(m.workspace_id, [m.to_email], 'unsubscribe', id, em);
      // enrollments_lead_idx
      const enrollments = await sql<{ id: string }>(em, `select id from enrollments where lead_id = ? order by id for update`, [m.lead_id]);
      await endEnrollments(em, enrollments.map((e) => e.id), 'unsubscribed', 'unsubscribed', now);
      return true;
    });
    if (done) this.deps.metrics.unsubscribes.inc({ source: 'link' });
    return done;
  }
}
