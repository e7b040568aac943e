import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { tallyInsert } from './tallies.ts';

// The SDR desk's mail in the sent log: a reply forwarded to an SDR (`forward`) and an SDR's own
// send in a campaign thread (`sdr_reply`) are outbound_messages rows too (their Message-IDs
// thread later answers), never claimed nor in the campaign's counters. A forward goes out
// through the reply's sender account, so it counts toward that account's daily limit.

export async function recordForward(
  em: EntityManager,
  m: { id: string; workspaceId: string; campaignId: string; leadId: string; senderAccountId: string; to: string; subject: string; messageIdHeader: string; response: string },
  now: Date,
): Promise<void> {
  // Sent from the account, so it counts toward the account's daily limit: tallied in the same
  // statement (tallies.ts), under its own writer (the message), so forwards never wait for a worker.
  await sql(
    em,
    `with f as (
       insert into outbound_messages (id, workspace_id, campaign_id, lead_id, step_index, kind, state, due_at, sender_account_id, to_email,
                                      subject, message_id_header, smtp_response, sent_at, created_at, updated_at)
       values (?, ?, ?, ?, 0, 'forward', 'sent', ?, ?, ?, ?, ?, ?, ?, ?, ?)
       returning id, sent_at, workspace_id, pool_id, sender_account_id
     )
     ${tallyInsert('select sent_at, id as writer, workspace_id, pool_id, sender_account_id from f')}`,
    [m.id, m.workspaceId, m.campaignId, m.leadId, now, m.senderAccountId, m.to, m.subject, m.messageIdHeader, m.response, now, now, now],
  );
}

export async function recordSdrReply(
  em: EntityManager,
  m: { id: string; workspaceId: string; campaignId: string; leadId: string; to: string; subject: string; messageIdHeader: string; inReplyTo: string | null; references: string | null; response: string },
  now: Date,
): Promise<void> {
  await sql(
    em,
    `insert into outbound_messages (id, workspace_id, campaign_id, lead_id, step_index, kind, state, due_at, to_email, subject, message_id_header,
                                    in_reply_to, references_header, smtp_response, sent_at, created_at, updated_at)
     values (?, ?, ?, ?, 0, 'sdr_reply', 'sent', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [m.id, m.workspaceId, m.campaignId, m.leadId, now, m.to, m.subject, m.messageIdHeader, m.inReplyTo, m.references, m.response, now, now, now],
  );
}

/** Every step sent to the lead in the campaign, with the step as written (a handoff's snapshot). */
export async function sentSteps(em: EntityManager, campaignId: string, leadId: string) {
  return sql<{ id: string; step_index: number; subject: string | null; sent_at: Date | string; message_id_header: string | null; step_subject: string | null; body_html: string | null }>(
    em,
    `select m.id, m.step_index, m.subject, m.sent_at, m.message_id_header, s.subject as step_subject, s.body_html
       from outbound_messages m left join campaign_steps s on s.campaign_id = m.campaign_id and s.step_index = m.step_index
      where m.campaign_id = ? and m.lead_id = ? and m.kind = 'campaign' and m.sent_at is not null
      order by m.step_index`,
    [campaignId, leadId],
  );
}
