import { deleteWorkspaceMessages } from '../messages/deletion.ts';
import { advisoryXactLockId } from '../../db/admin.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { ApiError } from '../../shared/errors.ts';
import { newId } from '../../adapters/ids.ts';
import { generateApiKey, hashApiKey } from '../../adapters/crypto.ts';
import type { Deps } from '../../deps.ts';
import { WorkspaceSchema, ApiKeySchema, InstanceSettingSchema, type Workspace, type Role } from './entities.ts';
import { SdrSchema } from '../sdrs/entities.ts';
import { deleteDeliveriesOf, lockWorkspaceWebhooks } from '../webhooks/repository.ts';

const KEY_CHECK = 'secret_key_check';
const KEY_CHECK_PLAINTEXT = 'mailgate secret key check';

export interface CreatedKey {
  id: string;
  key: string;
  role: Role;
  workspaceId: string;
  sdrId: string | null;
  name: string | null;
}

export class WorkspaceService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async create(name: string): Promise<Workspace> {
    const trimmed = name.trim();
    if (!trimmed) throw ApiError.invalid('name: must not be empty');
    const ws: Workspace = { id: newId('ws'), name: trimmed, createdAt: this.deps.clock.now() };
    try {
      await this.em.insert(WorkspaceSchema, ws);
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new ApiError(409, 'already_exists', `a workspace named "${trimmed}" already exists`);
      throw err;
    }
    return ws;
  }

  /** A workspace by id, or by name (the CLI accepts either). */
  async resolve(idOrName: string): Promise<Workspace> {
    const ws = (await this.em.findOne(WorkspaceSchema, { id: idOrName })) ?? (await this.em.findOne(WorkspaceSchema, { name: idOrName }));
    if (!ws) throw ApiError.notFound('workspace', `workspace ${idOrName} not found`);
    return ws;
  }

  /**
   * Deletes the workspace and all its data (foreign keys cascade from the workspace; its
   * messages, which have none, are deleted by their owner, messages/deletion.ts); its keys
   * stay behind and answer 404. Webhook deliveries have no foreign keys (0009): they are deleted
   * in the same transaction, after locks taken in the webhook fan-out's order
   * (lockWorkspaceWebhooks).
   */
  async delete(idOrName: string): Promise<{ id: string }> {
    const ws = await this.resolve(idOrName);
    await this.em.transactional(async (em) => {
      const hooks = await lockWorkspaceWebhooks(em, ws.id);
      // outbound_messages has no foreign keys (0017): its owner deletes them, before and after.
      await deleteWorkspaceMessages(em, ws.id);
      await em.nativeDelete(WorkspaceSchema, { id: ws.id });
      await deleteWorkspaceMessages(em, ws.id);
      await deleteDeliveriesOf(em, hooks);
    });
    return { id: ws.id };
  }

  async createKey(input: { workspace: string; role?: Role; sdrId?: string; name?: string }): Promise<CreatedKey> {
    const role = input.role ?? 'admin';
    if (role !== 'admin' && role !== 'sdr') throw ApiError.invalid(`role: must be admin or sdr`);
    if (role === 'sdr' && !input.sdrId) throw ApiError.invalid('--role sdr requires --sdr SDR_ID');
    if (role === 'admin' && input.sdrId) throw ApiError.invalid('--sdr is only for --role sdr');
    const ws = await this.resolve(input.workspace);
    if (input.sdrId) {
      const sdr = await this.em.findOne(SdrSchema, { id: input.sdrId, workspaceId: ws.id });
      if (!sdr) throw ApiError.notFound('sdr', `SDR ${input.sdrId} not found in workspace ${ws.id}`);
    }
    const key = generateApiKey();
    const row = {
      id: newId('key'),
      workspaceId: ws.id,
      name: input.name ?? null,
      role,
      sdrId: input.sdrId ?? null,
      keyHash: hashApiKey(key),
      keyPrefix: key.slice(0, 10),
      createdAt: this.deps.clock.now(),
      revokedAt: null,
      lastUsedAt: null,
    };
    await this.em.insert(ApiKeySchema, row);
    return { id: row.id, key, role, workspaceId: ws.id, sdrId: row.sdrId, name: row.name };
  }

  async revokeKey(id: string): Promise<{ id: string }> {
    const key = await this.em.findOne(ApiKeySchema, { id });
    if (!key) throw ApiError.notFound('key', `API key ${id} not found`);
    if (!key.revokedAt) await this.em.nativeUpdate(ApiKeySchema, { id }, { revokedAt: this.deps.clock.now() });
    return { id };
  }

  /**
   * First start on an empty database: the `default` workspace and one admin key. Returns the
   * key (to be printed once) or null when the database was already set up. Runs under an
   * advisory lock so two processes starting together create it once.
   */
  async bootstrap(): Promise<CreatedKey | null> {
    return this.em.transactional(async (em) => {
      await advisoryXactLockId(em, 7202612);
      const count = await em.count(WorkspaceSchema, {});
      const seeded = await em.findOne(InstanceSettingSchema, { key: 'bootstrapped_at' });
      if (count > 0 || seeded) return null;
      const service = new WorkspaceService(this.deps, em);
      const ws = await service.create('default');
      const key = await service.createKey({ workspace: ws.id, role: 'admin', name: 'bootstrap' });
      em.create(InstanceSettingSchema, { key: 'bootstrapped_at', value: this.deps.clock.now().toISOString(), updatedAt: this.deps.clock.now() });
      await em.flush();
      return key;
    });
  }

  /**
   * Proves the configured secret key is the one the stored credentials were encrypted with:
   * a known plaintext is encrypted on first start and must decrypt on every later one.
   */
  async checkSecretKey(): Promise<void> {
    await this.em.transactional(async (em) => {
      await advisoryXactLockId(em, 7202613);
      const row = await em.findOne(InstanceSettingSchema, { key: KEY_CHECK });
      if (!row) {
        em.create(InstanceSettingSchema, { key: KEY_CHECK, value: this.deps.crypto.encrypt(KEY_CHECK_PLAINTEXT), updatedAt: this.deps.clock.now() });
        await em.flush();
        return;
      }
      let ok = false;
      try {
        ok = this.deps.crypto.decrypt(row.value) === KEY_CHECK_PLAINTEXT;
      } catch {
        ok = false;
      }
      if (!ok)
        throw new SecretKeyMismatch(
          'MAILGATE_SECRET_KEY cannot decrypt the credentials stored in this database: every process of one deployment must use the same secret key',
        );
    });
  }
}

export class SecretKeyMismatch extends Error {}
