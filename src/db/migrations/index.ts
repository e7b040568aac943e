import { Migration0001Initial } from './0001_initial.ts';
import { Migration0002InboxIndexes } from './0002_inbox_indexes.ts';
import { Migration0003InboxCounts } from './0003_inbox_counts.ts';
import { Migration0004SendClaimOrder } from './0004_send_claim_order.ts';
import { Migration0005WebhookDeliveryWorkspaceFk } from './0005_webhook_delivery_workspace_fk.ts';
import { Migration0006FollowupScan } from './0006_followup_scan.ts';
import { Migration0007Retention } from './0007_retention.ts';
import { Migration0008AttemptsInDelivery } from './0008_attempts_in_delivery.ts';
import { Migration0009WebhookDeliveryFks } from './0009_webhook_delivery_fks.ts';
import { Migration0010SearchBySdr } from './0010_search_by_sdr.ts';
import { Migration0011SearchIndexNoPendingList } from './0011_search_index_no_pending_list.ts';
import { Migration0012Workers } from './0012_workers.ts';
import { Migration0013Complaints } from './0013_complaints.ts';
import { Migration0015CampaignFinished } from './0015_campaign_finished.ts';
import { Migration0014SenderHealth } from './0014_sender_health.ts';
import { Migration0016Dashboard } from './0016_dashboard.ts';
import { Migration0017QueueWithoutFkChecks } from './0017_queue_without_fk_checks.ts';
import { Migration0018StickyAccountWithoutFkCheck } from './0018_sticky_account_without_fk_check.ts';
import { Migration0019WebhookFanouts } from './0019_webhook_fanouts.ts';
import { Migration0020SentTallies } from './0020_sent_tallies.ts';
import { Migration0021EventsOwedWebhooks } from './0021_events_owed_webhooks.ts';
import { Migration0022PoolMemberOrder } from './0022_pool_member_order.ts';

/** Every migration, in order. Numbered, committed, applied at start; never auto-synced. */
export const migrations = [
  { name: '0001_initial', class: Migration0001Initial },
  { name: '0002_inbox_indexes', class: Migration0002InboxIndexes },
  { name: '0003_inbox_counts', class: Migration0003InboxCounts },
  { name: '0004_send_claim_order', class: Migration0004SendClaimOrder },
  { name: '0005_webhook_delivery_workspace_fk', class: Migration0005WebhookDeliveryWorkspaceFk },
  { name: '0006_followup_scan', class: Migration0006FollowupScan },
  { name: '0007_retention', class: Migration0007Retention },
  { name: '0008_attempts_in_delivery', class: Migration0008AttemptsInDelivery },
  { name: '0009_webhook_delivery_fks', class: Migration0009WebhookDeliveryFks },
  { name: '0010_search_by_sdr', class: Migration0010SearchBySdr },
  { name: '0011_search_index_no_pending_list', class: Migration0011SearchIndexNoPendingList },
  { name: '0012_workers', class: Migration0012Workers },
  { name: '0013_complaints', class: Migration0013Complaints },
  { name: '0014_sender_health', class: Migration0014SenderHealth },
  { name: '0015_campaign_finished', class: Migration0015CampaignFinished },
  { name: '0016_dashboard', class: Migration0016Dashboard },
  { name: '0017_queue_without_fk_checks', class: Migration0017QueueWithoutFkChecks },
  { name: '0018_sticky_account_without_fk_check', class: Migration0018StickyAccountWithoutFkCheck },
  { name: '0019_webhook_fanouts', class: Migration0019WebhookFanouts },
  { name: '0020_sent_tallies', class: Migration0020SentTallies },
  { name: '0021_events_owed_webhooks', class: Migration0021EventsOwedWebhooks },
  { name: '0022_pool_member_order', class: Migration0022PoolMemberOrder },
];
