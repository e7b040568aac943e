import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';

// SDRs' rows the desk reads and writes: sdrs, sdr_mailboxes, icp_criteria. (SdrService's own
// CRUD on them stays in service.ts for now: docs/architecture.md.)

export async function sdrOfWorkspace(em: EntityManager, workspaceId: string, sdrId: string) {
  const [sdr] = await sql<{ id: string; name: string; email: string; active: boolean }>(
    em,
    `select id, name, email, active from sdrs where id = ? and workspace_id = ?`,
    [sdrId, workspaceId],
  );
  return sdr;
}

export interface DeskMailbox {
  sdr_id: string;
  email: string;
  smtp_url_enc: string;
  health_state: string;
  name: string;
}

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

export async function icpCriteria(em: EntityManager, workspaceId: string) {
  const [criteria] = await sql<{ seniority: string[] | null; employee_counts: string[] | null }>(
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
export interface SdrProfileRow {
  id: string;
  name: string;
  email: string;
  active: boolean;
  tone: string | null;
  signature: string | null;
  calendar_url: string | null;
  language: string | null;
  created_at: Date | string;
  mail_email: string | null;
  health_state: string | null;
  last_sync_error: string | null;
  last_synced_at: Date | string | null;
}

const PROFILE_SELECT = `select s.id, s.name, s.email, s.active, s.tone, s.signature, s.calendar_url, s.language, s.created_at,
                       m.email as mail_email, m.health_state, m.last_sync_error, m.last_synced_at
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
