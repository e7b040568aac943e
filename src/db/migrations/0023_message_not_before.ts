import { Migration } from '@mikro-orm/migrations';

/**
 * `outbound_messages.not_before`: the earliest time a follow-up may go out whatever its step's
 * delay, set when an out-of-office answer postpones it (messages/enrollments.ts
 * postponeNextStep). A change of the step's `delayHours` moves the follow-up to the previous
 * step's send time plus the new delay, but never before this (rescheduleFollowUps); inferring
 * the postponement from the due time alone forgot it after two changes.
 *
 * Waiting follow-ups already moved past their step's delay (which only a postponement does)
 * get their due time as their floor.
 */
export class Migration0023MessageNotBefore extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table outbound_messages add column not_before timestamptz`);
    this.addSql(`update outbound_messages m set not_before = m.due_at
       from outbound_messages p, campaign_steps s
      where m.kind = 'campaign' and (m.state = 'scheduled' or (m.state = 'queued' and m.attempts = 0)) and m.step_index > 0
        and p.enrollment_id = m.enrollment_id and p.kind = 'campaign' and p.step_index = m.step_index - 1 and p.sent_at is not null
        and s.campaign_id = m.campaign_id and s.step_index = m.step_index
        and m.due_at > p.sent_at + s.delay_hours * interval '1 hour'`);
  }
}
