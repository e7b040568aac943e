import { storableOrNull } from '../../shared/text.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import type { InboundAnalysis } from './analyze.ts';
import { newId } from '../../adapters/ids.ts';

export interface WatchRow {
  id: string;
  workspace_id: string;
  sender_account_id: string | null;
  sdr_id: string | null;
  mailbox: string;
  uid_validity: string | null;
  last_uid: string;
  since: Date | string;
  imap_url_enc: string;
}

/**
 * Takes (or renews) leases on mailboxes to watch: free ones, expired ones (their worker died)
 * and this worker's own. One worker per mailbox at a time.
 */
export async function leaseWatches(em: EntityManager, owner: string, now: Date, leaseUntil: Date, max: number): Promise<WatchRow[]> {
  return sql<WatchRow>(
    em,
    `with picked as (
       select w.id from mailbox_watches w
        where w.lease_owner = ? or w.lease_owner is null or w.lease_until < ?
        order by (w.lease_owner = ?) desc nulls last, w.id
        limit ?
        for update skip locked
     )
     update mailbox_watches w set lease_owner = ?, lease_until = ?
       from picked where w.id = picked.id
     returning w.id, w.workspace_id, w.sender_account_id, w.sdr_id, w.mailbox, w.uid_validity, w.last_uid, w.since,
               coalesce((select a.imap_url_enc from sender_accounts a where a.id = w.sender_account_id),
                        (select b.imap_url_enc from sdr_mailboxes b where b.sdr_id = w.sdr_id)) as imap_url_enc`,
    [owner, now, owner, max, owner, leaseUntil],
  );
}

export async function releaseWatches(em: EntityManager, owner: string): Promise<void> {
  await sql(em, `update mailbox_watches set lease_owner = null, lease_until = null where lease_owner = ?`, [owner]);
}

export type WatchStatus = 'ok' | 'auth_failed' | 'unreachable' | 'rate_limited';

/** A mailbox's health changed: the watch's (`status`) and, for an SDR's mailbox, `health_state`. */
export interface WatchTransition {
  watchId: string;
  senderAccountId: string | null;
  sdrId: string | null;
  from: string;
  to: string;
  error: string | null;
}

/** An SDR mailbox's health_state (the spec's names) for a watch status. */
export function sdrHealthOf(status: WatchStatus): 'active' | 'needs_reauth' | 'rate_limited' | 'disconnected' {
  return status === 'ok' ? 'active' : status === 'auth_failed' ? 'needs_reauth' : status === 'rate_limited' ? 'rate_limited' : 'disconnected';
}

/**
 * Records a connection outcome of a watched mailbox. The previous state is read under the row's
 * lock in the same statement, so a change is reported once (for the caller to log). For an SDR's
 * mailbox the transition is the mailbox's health_state (the one the API shows).
 */
export async function setWatchStatus(em: EntityManager, id: string, status: WatchStatus, error: string | null, now: Date): Promise<WatchTransition | null> {
  const [watch] = await sql<{ sdr_id: string | null; sender_account_id: string | null; previous: string }>(
    em,
    `with o as (select id, status from mailbox_watches where id = ? for no key update)
     update mailbox_watches w set status = ?, last_error = ?, last_synced_at = case when ? = 'ok' then ? else last_synced_at end
       from o where w.id = o.id
     returning w.sdr_id, w.sender_account_id, o.status as previous`,
    [id, status, storableOrNull(error), status, now],
  );
  if (!watch) return null;
  // An SDR's mailbox health comes from these real connection outcomes (contract §8).
  if (watch.sdr_id) {
    const [box] = await sql<{ previous: string }>(
      em,
      `with o as (select sdr_id, health_state from sdr_mailboxes where sdr_id = ? for no key update)
       update sdr_mailboxes b set health_state = ?, last_sync_error = ?, last_synced_at = case when ? = 'ok' then ? else last_synced_at end, updated_at = ?
         from o where b.sdr_id = o.sdr_id
       returning o.health_state as previous`,
      [watch.sdr_id, sdrHealthOf(status), storableOrNull(error), status, now, now],
    );
    if (!box || box.previous === sdrHealthOf(status)) return null;
    return { watchId: id, senderAccountId: null, sdrId: watch.sdr_id, from: box.previous, to: sdrHealthOf(status), error };
  }
  if (watch.previous === status) return null;
  return { watchId: id, senderAccountId: watch.sender_account_id, sdrId: null, from: watch.previous, to: status, error };
}

/** The watcher went round its loop (synced, or found nothing new): the mailbox is current. */
export async function touchWatch(em: EntityManager, id: string, now: Date): Promise<void> {
  await sql(
    em,
    `with w as (update mailbox_watches set last_synced_at = ? where id = ? returning sdr_id)
     update sdr_mailboxes b set last_synced_at = ? from w where b.sdr_id = w.sdr_id`,
    [now, id, now],
  );
}

/** A new UIDVALIDITY: UIDs restart, so the cursor does too (Message-IDs dedupe what was seen). */
export async function resetCursor(em: EntityManager, id: string, uidValidity: bigint): Promise<void> {
  await sql(em, `update mailbox_watches set uid_validity = ?, last_uid = 0 where id = ?`, [String(uidValidity), id]);
}

/** Advances the cursor; false when this worker no longer holds the lease or the UID is old. */
export async function advanceCursor(em: EntityManager, id: string, owner: string, uidValidity: bigint, uid: number): Promise<boolean> {
  const rows = await sql(
    em,
    `update mailbox_watches set last_uid = ?, last_synced_at = now()
      where id = ? and lease_owner = ? and uid_validity = ? and last_uid < ? returning id`,
    [uid, id, owner, String(uidValidity), uid],
  );
  return rows.length === 1;
}

export async function alreadyIngested(em: EntityManager, watchId: string, messageIdHeader: string | null): Promise<boolean> {
  if (!messageIdHeader) return false;
  const rows = await sql(em, `select 1 from inbound_messages where watch_id = ? and message_id_header = ? limit 1`, [watchId, messageIdHeader]);
  return rows.length > 0;
}

/** One stored inbound message (the raw mail, so a classification can be re-run). */
export async function storeInbound(
  em: EntityManager,
  m: {
    id: string;
    workspaceId: string;
    watchId: string;
    uidValidity: bigint;
    uid: number;
    analysis: InboundAnalysis;
    receivedAt: Date;
    raw: Buffer;
    outboundMessageId: string | null;
    kind: string;
    now: Date;
  },
): Promise<void> {
  const a = m.analysis;
  await sql(
    em,
    `insert into inbound_messages (id, workspace_id, watch_id, uid_validity, uid, message_id_header, in_reply_to, references_header,
                                   from_email, subject, received_at, raw, outbound_message_id, kind, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [m.id, m.workspaceId, m.watchId, String(m.uidValidity), m.uid, a.messageId, a.inReplyTo, a.references.join(' ') || null, a.from, a.subject, m.receivedAt, m.raw, m.outboundMessageId, m.kind, m.now],
  );
}

/** An SDR mailbox's message that joined no thread is not kept. */
export async function dropInbound(em: EntityManager, id: string): Promise<void> {
  await sql(em, `delete from inbound_messages where id = ?`, [id]);
}

/** Whether the lead already answered this campaign with one of these classifications (a person's, not a report's). */
export async function hasReplyClassified(em: EntityManager, campaignId: string, leadId: string, classifications: string[]): Promise<boolean> {
  const rows = await sql(em, `select 1 from replies where campaign_id = ? and lead_id = ? and classification = any(?::text[]) and decided_by not like 'arf:%' limit 1`, [campaignId, leadId, classifications]);
  return rows.length > 0;
}

export interface NewReply {
  id: string;
  workspaceId: string;
  campaignId: string;
  leadId: string;
  enrollmentId: string;
  outboundMessageId: string;
  inboundMessageId: string;
  email: string;
  classification: string;
  decidedBy: string;
  confidence: number | null;
  snippet: string;
  bounceType: string | null;
  bounceReason: string | null;
  receivedAt: Date;
  now: Date;
}

export async function insertReply(em: EntityManager, r: NewReply): Promise<void> {
  await sql(
    em,
    `insert into replies (id, workspace_id, campaign_id, lead_id, enrollment_id, outbound_message_id, inbound_message_id, email,
                          classification, decided_by, confidence, thread_snippet, bounce_type, bounce_reason, received_at, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [r.id, r.workspaceId, r.campaignId, r.leadId, r.enrollmentId, r.outboundMessageId, r.inboundMessageId, r.email, r.classification, r.decidedBy, r.confidence, r.snippet, r.bounceType, r.bounceReason, r.receivedAt, r.now],
  );
}

export type ReplyQuery = { campaignId?: string; classification?: string[]; since?: Date; page: number; pageSize: number };

export async function listReplies(em: EntityManager, workspaceId: string, q: ReplyQuery) {
  const where = ['r.workspace_id = ?'];
  const params: unknown[] = [workspaceId];
  if (q.campaignId) {
    where.push('r.campaign_id = ?');
    params.push(q.campaignId);
  }
  if (q.classification?.length) {
    where.push('r.classification = any(?::text[])');
    params.push(q.classification);
  }
  if (q.since) {
    where.push('r.received_at >= ?');
    params.push(q.since);
  }
  // replies_workspace_received_idx / replies_campaign_received_idx
  const rows = await sql<{ id: string; email: string; campaign_id: string; classification: string; received_at: Date | string; thread_snippet: string }>(
    em,
    `select r.id, r.email, r.campaign_id, r.classification, r.received_at, r.thread_snippet from replies r
      where ${where.join(' and ')} order by r.received_at desc, r.id desc limit ? offset ?`,
    [...params, q.pageSize, (q.page - 1) * q.pageSize],
  );
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from replies r where ${where.join(' and ')}`, params);
  return { rows, total: Number(n) };
}

/** A reply with what handing it off needs: its stored mail and the account that received it. */
export interface ReplyRow {
  id: string;
  workspace_id: string;
  campaign_id: string;
  lead_id: string;
  email: string;
  classification: string;
  decided_by: string;
  thread_snippet: string;
  received_at: Date | string;
  forwarded_at: Date | string | null;
  raw: Buffer | null;
  message_id_header: string | null;
  inbound_subject: string | null;
  sender_account_id: string | null;
}

export async function replyForHandoff(em: EntityManager, workspaceId: string, replyId: string): Promise<ReplyRow | undefined> {
  const [reply] = await sql<ReplyRow>(
    em,
    `select r.id, r.workspace_id, r.campaign_id, r.lead_id, r.email, r.classification, r.decided_by, r.thread_snippet, r.received_at, r.forwarded_at,
            i.raw, i.message_id_header, i.subject as inbound_subject,
            coalesce(w.sender_account_id, o.sender_account_id) as sender_account_id
       from replies r
       left join inbound_messages i on i.id = r.inbound_message_id
       left join mailbox_watches w on w.id = i.watch_id
       left join outbound_messages o on o.id = r.outbound_message_id
      where r.id = ? and r.workspace_id = ?`,
    [replyId, workspaceId],
  );
  return reply;
}

export async function markForwarded(em: EntityManager, replyId: string, now: Date): Promise<void> {
  await sql(em, `update replies set forwarded_at = ? where id = ?`, [now, replyId]);
}

/** A sender account's INBOX is watched from `since` on: mail received from then is processed, older is not. */
export async function addSenderWatch(em: EntityManager, workspaceId: string, senderAccountId: string, since: Date): Promise<void> {
  await sql(em, `insert into mailbox_watches (id, workspace_id, sender_account_id, mailbox, since) values (?, ?, ?, 'INBOX', ?)`, [
    newId('mbx'),
    workspaceId,
    senderAccountId,
    since,
  ]);
}

/** The IMAP health of the workspace's sender accounts' mailboxes. */
export async function senderWatches(em: EntityManager, workspaceId: string) {
  return sql<{ sender_account_id: string; status: string }>(
    em,
    `select sender_account_id, status from mailbox_watches where workspace_id = ? and sender_account_id is not null`,
    [workspaceId],
  );
}

/** An SDR's INBOX is watched from `since` (a prospect's answer joins its thread); a reconnect keeps the existing watch's cursor. */
export async function addSdrWatch(em: EntityManager, workspaceId: string, sdrId: string, since: Date): Promise<void> {
  await sql(
    em,
    `insert into mailbox_watches (id, workspace_id, sdr_id, mailbox, since) values (?, ?, ?, 'INBOX', ?)
     on conflict (sdr_id, mailbox) where sdr_id is not null do nothing`,
    [newId('mbx'), workspaceId, sdrId, since],
  );
}
