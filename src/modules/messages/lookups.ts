import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { OutboundRef } from './send.ts';
import type { Crypto } from '../../adapters/crypto.ts';
import { messageIdsNamed } from './message-id.ts';

// Finding our messages from outside: the message an inbound mail answers or reports on.

export interface MatchedMessage extends OutboundRef {
  message_id_header: string | null;
  state: string;
  /** The Message-ID the inbound mail named it by (null: found by its recipient). */
  named: string | null;
}

const MATCH_COLUMNS = `m.id, m.workspace_id, m.campaign_id, m.enrollment_id, m.lead_id, m.step_index, m.to_email, m.message_id_header, m.state`;

/**
 * Our outbound message with one of these Message-IDs (the latest in the chain wins): by the id
 * a Message-ID of ours names (messages/message-id.ts: any copy of the message, whatever state
 * and header were recorded since), else by the stored header (messages sent before the tag).
 */
export async function matchByMessageIds(em: EntityManager, crypto: Crypto, workspaceId: string, ids: string[]): Promise<MatchedMessage | undefined> {
  if (!ids.length) return undefined;
  // outbound_messages primary key, then outbound_message_id_key
  const rows = await sql<MatchedMessage & { pos: number }>(
    em,
    `select x.*, t.mid as named, t.pos
       from unnest(?::text[], ?::text[]) with ordinality as t(mid, msg, pos)
       cross join lateral (
         (select ${MATCH_COLUMNS} from outbound_messages m where m.id = t.msg and m.workspace_id = ? and m.kind = 'campaign')
         union all
         (select ${MATCH_COLUMNS} from outbound_messages m where m.message_id_header = t.mid and m.workspace_id = ? and m.kind = 'campaign')
         limit 1) x
      order by t.pos desc limit 1`,
    [ids, messageIdsNamed(crypto, ids), workspaceId, workspaceId],
  );
  return rows[0];
}

/**
 * Clocks disagree: the mail server's arrival time (INTERNALDATE, whole seconds) against our
 * `sent_at`. A message sent up to this long after the mail arrived still counts as sent before.
 */
export const MATCH_CLOCK_SLACK_MS = 2 * 60_000;

/**
 * The most recent campaign message this account sent to that address before the mail arrived
 * (also after the lead's sequence completed, contract §7). Mail that arrived before our first
 * message to the address answers nothing of ours: read again later (a new UIDVALIDITY, a
 * backlog after the mailbox was unreachable while sending went on), it would otherwise end the
 * sequence of a lead enrolled since, or bounce it.
 */
export async function matchBySender(em: EntityManager, senderAccountId: string, address: string, receivedAt: Date): Promise<MatchedMessage | undefined> {
  // outbound_sender_to_idx (sender_account_id, lower(to_email), sent_at desc)
  const rows = await sql<MatchedMessage>(
    em,
    `select ${MATCH_COLUMNS}, null as named from outbound_messages m
      where m.sender_account_id = ? and lower(m.to_email) = lower(?) and m.sent_at is not null and m.sent_at <= ? and m.kind = 'campaign'
      order by m.sent_at desc limit 1`,
    [senderAccountId, address, new Date(receivedAt.getTime() + MATCH_CLOCK_SLACK_MS)],
  );
  return rows[0];
}
