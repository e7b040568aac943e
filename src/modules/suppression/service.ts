import type { EntityManager } from '@mikro-orm/postgresql';
import type { Deps } from '../../deps.ts';
import { ApiError, type FieldError } from '../../shared/errors.ts';
import { isEmail } from '../../shared/email.ts';
import { transaction } from '../../db/transaction.ts';
import { isSuppressed, suppress, unsuppress, type SuppressionReason } from './repository.ts';

export type { SuppressionReason };

/**
 * A whole domain or a wildcard (`acme.com`, `@acme.com`, `*@acme.com`, `*.acme.com`): the list
 * holds addresses only. `*@acme.com` is a well-formed address (`*` is a legal local part), so it
 * used to be stored as that one literal address and answered `suppressed: 1`, and the domain
 * went on being mailed (docs/decisions.md, Suppression).
 */
const DOMAIN_LIKE = /^(?:\*+@|@|\*\.)?(?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+$/;
export const NOT_BY_DOMAIN = 'the suppression list holds whole addresses: a domain or a wildcard such as *@acme.com is not supported (suppress each address)';

/**
 * What other modules do when addresses leave the list, in the removal's transaction (wired in
 * services.ts, so this module depends on none of them): the campaigns enroll again the leads
 * they had enrolled as `suppressed`.
 */
export interface SuppressionReactions {
  removed(em: EntityManager, workspaceId: string, emailKeys: string[]): Promise<unknown>;
}

/** The suppression list through the API and the CLI. Other modules suppress through the repository, in their own transaction. */
export class SuppressionService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    private readonly reactions?: SuppressionReactions,
  ) {}

  /**
   * Adds addresses to the workspace's suppression list; returns how many were new. Already
   * suppressed addresses and duplicates inside one call are not counted.
   */
  async add(workspaceId: string, emails: string[], reason: SuppressionReason, source: string | null): Promise<number> {
    return suppress(this.em, workspaceId, emails, reason, source, this.deps.clock.now());
  }

  /**
   * POST /v1/suppression-list: every address is checked first, so that a bad one is a 422
   * naming its index and nothing is written; then they are suppressed as `manual` from `api`.
   */
  async addFromApi(workspaceId: string, emails: unknown[]): Promise<number> {
    const errors: FieldError[] = [];
    emails.forEach((value, index) => {
      if (typeof value === 'string' && DOMAIN_LIKE.test(value.trim())) errors.push({ index, value, message: NOT_BY_DOMAIN });
      else if (typeof value !== 'string' || !isEmail(value)) errors.push({ index, value, message: 'not a valid email address' });
    });
    if (errors.length) throw new ApiError(422, 'validation_failed', `${errors.length} address(es) failed validation`, { errors });
    return this.add(workspaceId, emails as string[], 'manual', 'api');
  }

  /**
   * Takes addresses off the list (the dashboard's removal, `mailgate suppression remove`);
   * returns how many were on it. In one transaction with its reactions: a running campaign's
   * lead enrolled while its address was suppressed, and never sent to, is enrolled again and
   * its step 0 queued (campaigns/service.ts enrollUnsuppressed), or nothing is.
   */
  async remove(workspaceId: string, emails: string[]): Promise<number> {
    return transaction(this.em, async (tx) => {
      const removed = await unsuppress(tx, workspaceId, emails);
      if (removed.length && this.reactions) await this.reactions.removed(tx, workspaceId, removed);
      return removed.length;
    });
  }

  async isSuppressed(workspaceId: string, email: string): Promise<boolean> {
    return isSuppressed(this.em, workspaceId, email);
  }
}
