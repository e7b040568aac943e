import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { newId } from '../../adapters/ids.ts';
import { storableOrNull } from '../../shared/text.ts';

// Watched mailboxes (mailbox_watches): a watch per sender account's or SDR's INBOX, its lease
// (which worker runs its IMAP session), its cursor (UIDVALIDITY, last UID) and its connection
// status. A module of its own so that senders, SDRs and the inbound watcher all depend on it and
// not on each other. An SDR's watch status is mirrored on its sdr_mailboxes row in the same
// statement (setWatchStatus, touchWatch), so the two never disagree.

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
 *
 * This worker's own leases are renewed whatever holds their rows: an ingest's transaction
 * moves the mailbox's cursor first (advanceCursor) and keeps the row locked until it commits,
 * so the round waits for it (a few milliseconds). Taken with SKIP LOCKED like the others (until
 * 2026-11-29), a row being ingested was left out of the round, which the watcher reads as a
 * mailbox no longer its own: it stopped the session and started a new one a round later, so a
 * mailbox working through a backlog logged out and in again about every 5 s. The own rows are
 * locked in id order, then the free and expired ones, skipping rows another worker holds.
 */
export async function leaseWatches(em: EntityManager, owner: string, now: Date, leaseUntil: Date, max: number): Promise<WatchRow[]> {
  return sql<WatchRow>(
    em,
    `with mine as (
       select w.id from mailbox_watches w
        where w.lease_owner = ?
        order by w.id
        limit ?
        for update
     ), free as (
       select w.id from mailbox_watches w
        where (w.lease_owner is null or w.lease_until < ?) and w.lease_owner is distinct from ?
        order by w.id
        limit greatest(0, ? - (select count(*) from mine))
        for update skip locked
     ), picked as (
       select id from mine union all select id from free
     )
     update mailbox_watches w set lease_owner = ?, lease_until = ?
       from picked where w.id = picked.id
     returning w.id, w.workspace_id, w.sender_account_id, w.sdr_id, w.mailbox, w.uid_validity, w.last_uid, w.since,
               coalesce((select a.imap_url_enc from sender_accounts a where a.id = w.sender_account_id),
                        (select b.imap_url_enc from sdr_mailboxes b where b.sdr_id = w.sdr_id)) as imap_url_enc`,
    [owner, max, now, owner, max, owner, leaseUntil],
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

/**
 * The mailbox's cursor as committed, read when a session (re)connects: a session started while
 * the previous one was still ingesting (a reconnect with new credentials) or after a lost lease
 * must not start from the cursor its lease round read.
 */
export async function watchCursor(em: EntityManager, id: string): Promise<{ uid_validity: string | null; last_uid: string } | undefined> {
  const [row] = await sql<{ uid_validity: string | null; last_uid: string }>(em, `select uid_validity, last_uid from mailbox_watches where id = ?`, [id]);
  return row;
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

/**
 * An SDR's INBOX is watched from `since` (a prospect's answer joins its thread). A reconnect
 * keeps the existing watch's cursor, unless `anotherMailbox`: the connection now names another
 * server or user, whose UIDs say nothing about the old mailbox's, so the watch starts afresh
 * from `since` (docs/decisions.md, "Reconnecting an SDR's mail").
 */
export async function watchSdrMailbox(em: EntityManager, workspaceId: string, sdrId: string, since: Date, anotherMailbox: boolean): Promise<void> {
  await sql(
    em,
    `insert into mailbox_watches (id, workspace_id, sdr_id, mailbox, since) values (?, ?, ?, 'INBOX', ?)
     on conflict (sdr_id, mailbox) where sdr_id is not null
     do ${anotherMailbox ? 'update set uid_validity = null, last_uid = 0, since = excluded.since' : 'nothing'}`,
    [newId('mbx'), workspaceId, sdrId, since],
  );
}
