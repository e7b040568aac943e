import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';
import { sql } from '../../db/sql.ts';
import type { Deps } from '../../deps.ts';
import { SdrService, type ProfileInput } from '../sdrs/service.ts';
import { isoOrNull, toIso } from '../../shared/time.ts';

interface SdrRow {
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

function view(r: SdrRow) {
  const connected = r.health_state === 'active';
  return {
    id: r.id,
    name: r.name,
    email: r.email,
    active: r.active,
    tone: r.tone,
    signature: r.signature,
    calendarUrl: r.calendar_url,
    language: r.language,
    mailConnected: connected,
    mailEmail: r.mail_email,
    healthState: r.health_state ?? 'disconnected',
    lastSyncError: r.last_sync_error,
    lastSyncedAt: isoOrNull(r.last_synced_at),
    createdAt: toIso(r.created_at),
  };
}

const SELECT = `select s.id, s.name, s.email, s.active, s.tone, s.signature, s.calendar_url, s.language, s.created_at,
                       m.email as mail_email, m.health_state, m.last_sync_error, m.last_synced_at
                  from sdrs s left join sdr_mailboxes m on m.sdr_id = s.id`;

/**
 * The admin's view of the SDRs (docs/dashboard.md): every SDR with its profile, active flag and
 * mail connection; created and edited with the services of `mailgate sdr add / set-profile /
 * activate / deactivate`, each request in one transaction.
 */
export class SdrProfileService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async list(workspaceId: string, opts: { active?: boolean; limit: number; offset: number }) {
    const filter = opts.active === undefined ? '' : 'and s.active = ?';
    const params: unknown[] = opts.active === undefined ? [workspaceId] : [workspaceId, opts.active];
    const rows = await sql<SdrRow>(this.em, `${SELECT} where s.workspace_id = ? ${filter} order by s.created_at, s.id limit ? offset ?`, [...params, opts.limit, opts.offset]);
    const [{ n }] = await sql<{ n: string }>(this.em, `select count(*) as n from sdrs s where s.workspace_id = ? ${filter}`, params);
    return { data: rows.map(view), total: Number(n), hasMore: opts.offset + rows.length < Number(n) };
  }

  async get(workspaceId: string, sdrId: string, em: EntityManager = this.em) {
    const [row] = await sql<SdrRow>(em, `${SELECT} where s.workspace_id = ? and s.id = ?`, [workspaceId, sdrId]);
    if (!row) throw ApiError.notFound('sdr', `SDR ${sdrId} not found`);
    return view(row);
  }

  async create(workspaceId: string, input: { name: string; email: string } & ProfileInput) {
    return this.em.transactional(async (em) => {
      const sdrs = new SdrService(this.deps, em);
      const sdr = await sdrs.add(workspaceId, input.name, input.email);
      const { name: _n, email: _e, ...profile } = input;
      if (Object.values(profile).some((v) => v !== undefined)) await sdrs.setProfile(sdr.id, profile);
      return this.get(workspaceId, sdr.id, em);
    });
  }

  async update(workspaceId: string, sdrId: string, input: { name?: string; active?: boolean } & ProfileInput) {
    return this.em.transactional(async (em) => {
      await this.get(workspaceId, sdrId, em);
      const sdrs = new SdrService(this.deps, em);
      const { name, active, ...profile } = input;
      if (Object.values(profile).some((v) => v !== undefined)) await sdrs.setProfile(sdrId, profile);
      if (active !== undefined) await sdrs.setActive(sdrId, active);
      if (name !== undefined) await sql(em, 'update sdrs set name = ?, updated_at = ? where id = ?', [name, this.deps.clock.now(), sdrId]);
      return this.get(workspaceId, sdrId, em);
    });
  }
}
