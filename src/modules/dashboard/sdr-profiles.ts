import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../../shared/errors.ts';
import type { Deps } from '../../deps.ts';
import type { ProfileInput } from '../sdrs/service.ts';
import { listSdrProfiles, renameSdr, sdrProfile, type SdrProfileRow } from '../sdrs/repository.ts';
import { isoOrNull, toIso } from '../../shared/time.ts';
import type { DashboardOwners } from './owners.ts';
import { transaction } from '../../db/transaction.ts';

function view(r: SdrProfileRow) {
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
    openThreads: r.open_threads,
    createdAt: toIso(r.created_at),
  };
}

/**
 * The admin's view of the SDRs (docs/dashboard.md): every SDR with its profile, active flag and
 * mail connection; created and edited with the services of `mailgate sdr add / set-profile /
 * activate / deactivate` (handed in by services.ts), each request in one transaction.
 */
export class SdrProfileService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    private readonly owners: DashboardOwners,
  ) {}

  async list(workspaceId: string, opts: { active?: boolean; limit: number; offset: number }) {
    const { rows, total } = await listSdrProfiles(this.em, workspaceId, opts);
    return { data: rows.map(view), total, hasMore: opts.offset + rows.length < total };
  }

  async get(workspaceId: string, sdrId: string, em: EntityManager = this.em) {
    const row = await sdrProfile(em, workspaceId, sdrId);
    if (!row) throw ApiError.notFound('sdr', `SDR ${sdrId} not found`);
    return view(row);
  }

  async create(workspaceId: string, input: { name: string; email: string } & ProfileInput) {
    return transaction(this.em, async (em) => {
      const sdrs = this.owners.sdrs(em);
      const sdr = await sdrs.add(workspaceId, input.name, input.email);
      const { name: _n, email: _e, ...profile } = input;
      if (Object.values(profile).some((v) => v !== undefined)) await sdrs.setProfile(sdr.id, profile);
      return this.get(workspaceId, sdr.id, em);
    });
  }

  async update(workspaceId: string, sdrId: string, input: { name?: string; active?: boolean } & ProfileInput) {
    return transaction(this.em, async (em) => {
      await this.get(workspaceId, sdrId, em);
      const sdrs = this.owners.sdrs(em);
      const { name, active, ...profile } = input;
      if (Object.values(profile).some((v) => v !== undefined)) await sdrs.setProfile(sdrId, profile);
      if (active !== undefined) await sdrs.setActive(sdrId, active);
      if (name !== undefined) await renameSdr(em, sdrId, name, this.deps.clock.now());
      return this.get(workspaceId, sdrId, em);
    });
  }
}
