import type { EntityManager } from '@mikro-orm/postgresql';
import type { Deps } from '../../deps.ts';
import { isSuppressed, suppress, unsuppress, type SuppressionReason } from './repository.ts';

export type { SuppressionReason };

/** The suppression list through the API and the CLI. Other modules suppress through the repository, in their own transaction. */
export class SuppressionService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  /**
   * Adds addresses to the workspace's suppression list; returns how many were new. Already
   * suppressed addresses and duplicates inside one call are not counted.
   */
  async add(workspaceId: string, emails: string[], reason: SuppressionReason, source: string | null): Promise<number> {
    return suppress(this.em, workspaceId, emails, reason, source, this.deps.clock.now());
  }

  async remove(workspaceId: string, emails: string[]): Promise<number> {
    return unsuppress(this.em, workspaceId, emails);
  }

  async isSuppressed(workspaceId: string, email: string): Promise<boolean> {
    return isSuppressed(this.em, workspaceId, email);
  }
}
