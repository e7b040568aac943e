import { Migration } from '@mikro-orm/migrations';

/**
 * The enrollment status `removed`: an operator took the lead off the campaign
 * (`DELETE /v1/campaigns/:campaignId/leads/:leadId`, docs/decisions.md "Removing a lead from a
 * campaign").
 */
export class Migration0030RemovedEnrollments extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table enrollments drop constraint enrollments_status_check`);
    this.addSql(`alter table enrollments add constraint enrollments_status_check
                   check (status in ('active', 'completed', 'replied', 'bounced', 'unsubscribed', 'suppressed', 'removed'))`);
  }
}
