import { Migration0001Initial } from './0001_initial.ts';
import { Migration0002InboxIndexes } from './0002_inbox_indexes.ts';
import { Migration0005WebhookDeliveryWorkspaceFk } from './0005_webhook_delivery_workspace_fk.ts';

/** Every migration, in order. Numbered, committed, applied at start; never auto-synced. */
export const migrations = [
  { name: '0001_initial', class: Migration0001Initial },
  { name: '0002_inbox_indexes', class: Migration0002InboxIndexes },
  { name: '0005_webhook_delivery_workspace_fk', class: Migration0005WebhookDeliveryWorkspaceFk },
];
