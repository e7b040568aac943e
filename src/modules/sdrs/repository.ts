import { applyChanges } from '../../shared/changes.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { SdrSchema, SdrMailboxSchema, type Sdr, type SdrMailbox } from './entities.ts';
import type { IcpCriteriaRow, SdrMailboxRow, SdrRow } from './rows.ts';

// The owner of `sdrs`, `sdr_mailboxes` and `icp_criteria`: SdrService's CRUD through the ORM
// entities, the desk's reads and the mailbox health as hand-written SQL.

export async function insertSdr(em: EntityManager, sdr: Sdr): Promise<void> {
  await em.insert(SdrSchema, sdr);
}

/** An SDR by id (any workspace: the CLI and SDR keys name SDRs by id), or null. */
export async function findSdr(em: EntityManager, id: string): Promise<Sdr | null> {
  return em.findOne(SdrSchema, { id });
}

/** The workspace's active SDRs, oldest first. */
export async function activeSdrs(em: EntityManager, workspaceId: string): Promise<Sdr[]> {
  return em.find(SdrSchema, { workspaceId, active: true }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export type ProfileChanges = Partial<Pick<Sdr, 'tone' | 'signature' | 'calendarUrl' | 'language'>>;

/** Sets profile fields (undefined: left as is) of an SDR read by findSdr. */
export async function updateProfile(em: EntityManager, sdr: Sdr, changes: ProfileChanges, now: Date): Promise<void> {
  applyChanges(sdr, changes);
  sdr.updatedAt = now;
  await em.flush();
}

/** Activates or deactivates an SDR read by findSdr. */
export async function setSdrActive(em: EntityManager, sdr: Sdr, active: boolean, now: Date): Promise<void> {
  sdr.active = active;
  sdr.updatedAt = now;
  await em.flush();
}

/** Stores the SDR's mailbox connection (a reconnect replaces it). */
export async function upsertMailbox(em: EntityManager, box: SdrMailbox): Promise<void> {
  await em.upsert(SdrMailboxSchema, box);
}

export async function findMailbox(em: EntityManager, sdrId: string): Promise<SdrMailbox | null> {
  return em.findOne(SdrMailboxSchema, { sdrId });
}

/** The IMAP connection (encrypted) the SDR's mailbox has now, read without the ORM's identity map; null when none. */
export async function currentImapUrlEnc(em: EntityManager, sdrId: string): Promise<string | null> {
  const [row] = await sql<{ imap_url_enc: string }>(em, `select imap_url_enc from sdr_mailboxes where sdr_id = ?`, [sdrId]);
  return row?.imap_url_enc ?? null;
}

export async function mailboxesOf(em: EntityManager, sdrIds: string[]): Promise<SdrMailbox[]> {
  return em.find(SdrMailboxSchema, { sdrId: { $in: sdrIds } });
}

export async function sdrOfWorkspace(em: EntityManager, workspaceId: string, sdrId: string) {
  const [sdr] = await sql<Pick<SdrRow, 'id' | 'name' | 'email' | 'active'>>(
    em,
    `select id, name, email, active from sdrs where id = ? and workspace_id = ?`,
    [sdrId, workspaceId],
  );
  return sdr;
}

/** The SDR's mailbox and name, as a desk send needs them. */
export type DeskMailbox = Pick<SdrMailboxRow, 'sdr_id' | 'email' | 'smtp_url_enc' | 'health_state'> & Pick<SdrRow, 'name'>;

export async function mailboxOf(em: EntityManager, sdrId: string): Promise<DeskMailbox | undefined> {
  const [box] = await sql<DeskMailbox>(
    em,
    `select b.sdr_id, b.email, b.smtp_url_enc, b.health_state, s.name from sdr_mailboxes b join sdrs s on s.id = b.sdr_id where b.sdr_id = ?`,
    [sdrId],
  );
  return box;
}

export async function setMailboxHealth(em: EntityManager, sdrId: string, health: string, error: string, now: Date): Promise<void> {
  await sql(em, `update sdr_mailboxes set health_state = ?, last_sync_error = ?, updated_at = ? where sdr_id = ?`, [health, error, now, sdrId]);
}

/** A send went through a `rate_limited` mailbox: the server's limit is over, the mailbox is active again. */
export async function endMailboxRateLimit(em: EntityManager, sdrId: string, now: Date): Promise<void> {
  await sql(em, `update sdr_mailboxes set health_state = 'active', last_sync_error = null, updated_at = ? where sdr_id = ? and health_state = 'rate_limited'`, [now, sdrId]);
}

export async function icpCriteria(em: EntityManager, workspaceId: string) {
  const [criteria] = await sql<Pick<IcpCriteriaRow, 'seniority' | 'employee_counts'>>(
    em,
    `select seniority, employee_counts from icp_criteria where workspace_id = ?`,
    [workspaceId],
  );
  return criteria;
}

export async function saveIcpCriteria(em: EntityManager, workspaceId: string, seniority: string[] | null, employeeCounts: string[] | null, now: Date): Promise<void> {
  await sql(
    em,
    `insert into icp_criteria (workspace_id, seniority, employee_counts, updated_at) values (?, ?::text[], ?::text[], ?)
     on conflict (workspace_id) do update set seniority = excluded.seniority, employee_counts = excluded.employee_counts, updated_at = excluded.updated_at`,
    [workspaceId, seniority, employeeCounts, now],
  );
}

/** An SDR's profile with its mailbox connection, as the admin's SDR list shows it. */
export type SdrProfileRow = Pick<SdrRow, 'id' | 'name' | 'email' | 'active' | 'tone' | 'signature' | 'calendar_url' | 'language' | 'created_at'> & {
  // The mailbox's columns (a left join: null without a connected mailbox).
  mail_email: SdrMailboxRow['email'] | null;
  health_state: SdrMailboxRow['health_state'] | null;
  last_sync_error: SdrMailboxRow['last_sync_error'];
  last_synced_at: SdrMailboxRow['last_synced_at'];
  /** The SDR's open threads (new, awaiting_reply, needs_followup, replied), from prospect_thread_counts. */
  open_threads: number;
};

const PROFILE_SELECT = `select s.id, s.name, s.email, s.active, s.tone, s.signature, s.calendar_url, s.language, s.created_at,
                       m.email as mail_email, m.health_state, m.last_sync_error, m.last_synced_at,
                       (select coalesce(sum(c.n), 0)::int from prospect_thread_counts c
                         where c.sdr_id = s.id and c.status in ('new', 'awaiting_reply', 'needs_followup', 'replied')) as open_threads
                  from sdrs s left join sdr_mailboxes m on m.sdr_id = s.id`;

/** A page of the workspace's SDRs in creation order, optionally only the (in)active ones, and how many there are. */
export async function listSdrProfiles(em: EntityManager, workspaceId: string, opts: { active?: boolean; limit: number; offset: number }) {
  const filter = opts.active === undefined ? '' : 'and s.active = ?';
  const params: unknown[] = opts.active === undefined ? [workspaceId] : [workspaceId, opts.active];
  const rows = await sql<SdrProfileRow>(em, `${PROFILE_SELECT} where s.workspace_id = ? ${filter} order by s.created_at, s.id limit ? offset ?`, [...params, opts.limit, opts.offset]);
  const [{ n }] = await sql<{ n: string }>(em, `select count(*) as n from sdrs s where s.workspace_id = ? ${filter}`, params);
  return { rows, total: Number(n) };
}

export async function sdrProfile(em: EntityManager, workspaceId: string, sdrId: string): Promise<SdrProfileRow | undefined> {
  const [row] = await sql<SdrProfileRow>(em, `${PROFILE_SELECT} where s.workspace_id = ? and s.id = ?`, [workspaceId, sdrId]);
  return row;
}

export async function renameSdr(em: EntityManager, sdrId: string, name: string, now: Date): Promise<void> {
  await sql(em, 'update sdrs set name = ?, updated_at = ? where id = ?', [name, now, sdrId]);
}
