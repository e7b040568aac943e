import { Migration } from '@mikro-orm/migrations';

/**
 * When a running campaign has finished: every enrollment has ended (completed, replied, bounced,
 * unsubscribed, suppressed). `finished_at` is set and cleared by the `campaigns.finish` job
 * (modules/campaigns/repository.ts noteFinished), which logs `campaign finished` once per
 * finish. The partial index answers "does this campaign still have an active enrollment?"
 * from its first entry, however many ended enrollments the campaign has.
 */
export class Migration0015CampaignFinished extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table campaigns add column finished_at timestamptz`);
    this.addSql(`create index enrollments_active_campaign_idx on enrollments (campaign_id) where status = 'active'`);
  }
}
