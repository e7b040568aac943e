import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkspaceService } from '../workspaces/service.ts';
import type { SuppressionService } from '../suppression/service.ts';
import type { SdrService } from '../sdrs/service.ts';
import type { SenderService } from '../senders/service.ts';
import type { CampaignService } from '../campaigns/service.ts';

/**
 * The other modules' services the dashboard's flows call (each flow calls the service its CLI
 * command calls), wired in services.ts. Each is built on the EntityManager the dashboard hands
 * over: the request's, or the transaction a flow opened, so a flow's steps commit together. The
 * dashboard constructs none of them.
 */
export interface DashboardOwners {
  workspaces(em: EntityManager): Pick<WorkspaceService, 'createKey' | 'revokeKey'>;
  suppression(em: EntityManager): Pick<SuppressionService, 'remove'>;
  sdrs(em: EntityManager): Pick<SdrService, 'get' | 'add' | 'setProfile' | 'setActive' | 'connectMail'>;
  senders(em: EntityManager): Pick<SenderService, 'listWithMailboxes' | 'add' | 'setStatus' | 'createPool' | 'addToPool' | 'removeFromPool' | 'listPools' | 'update' | 'setPoolCapacity'>;
  campaigns(em: EntityManager): Pick<CampaignService, 'get'>;
}
