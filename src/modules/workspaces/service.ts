import { advisoryXactLockId } from '../../db/admin.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { ApiError } from '../../shared/errors.ts';
import { newId } from '../../adapters/ids.ts';
import { generateApiKey, hashApiKey } from '../../adapters/crypto.ts';
import type { Deps } from '../../deps.ts';
import type { ApiKey, Workspace, Role } from './entities.ts';
import {
  countWorkspaces,
  createInstanceSetting,
  deleteWorkspace,
  findApiKey,
  findWorkspace,
  insertApiKey,
  insertWorkspace,
  instanceSetting,
  revokeApiKey,
} from './repository.ts';
import { sdrOfWorkspace } from '../sdrs/repository.ts';
import { deleteDeliveriesOf, lockWorkspaceWebhooks, notifyWebhookChanges } from '../webhooks/repository.ts';
import { deleteWorkspaceMessages } from '../messages/deletion.ts';
import { deleteWorkspaceEvents } from '../events/outbox.ts';
import { requireName } from '../../shared/names.ts';
import { transaction } from '../../db/transaction.ts';

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

export interface KeyInput {
  workspace: string;
  role?: Role;
  sdrId?: string;
  name?: string;
}

// create() and createKey() run on the service's EntityManager; bootstrap() runs the same steps
// (createIn, createKeyIn) on its transaction's, without a second WorkspaceService.
export class WorkspaceService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
  ) {}

  async create(name: string): Promise<Workspace> {
    return this.createIn(this.em, name);
  }

  private async createIn(em: EntityManager, name: string): Promise<Workspace> {
    const trimmed = requireName(name);
    const ws: Workspace = { id: newId('ws'), name: trimmed, createdAt: this.deps.clock.now() };
    try {
      await insertWorkspace(em, ws);
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new ApiError(409, 'already_exists', `a workspace named "${trimmed}" already exists`);
      throw err;
    }
    return ws;
  }

  /** A workspace by id, or by name (the CLI accepts either). */
  async resolve(idOrName: string): Promise<Workspace> {
    return this.resolveIn(this.em, idOrName);
  }

  private async resolveIn(em: EntityManager, idOrName: string): Promise<Workspace> {
    const ws = await findWorkspace(em, idOrName);
    if (!ws) throw ApiError.notFound('workspace', `workspace ${idOrName} not found`);
    return ws;
  }

  /**
   * Deletes the workspace and all its data (foreign keys cascade from the workspace; its
   * messages and events, which have none, are deleted by their owners, messages/deletion.ts and
   * events/outbox.ts); its keys
   * stay behind and answer 404. Webhook deliveries have no foreign keys (0009): they are deleted
   * in the same transaction, after locks taken in the webhook fan-out's order
   * (lockWorkspaceWebhooks).
   */
  async delete(idOrName: string): Promise<{ id: string }> {
    const ws = await this.resolve(idOrName);
    await transaction(this.em, async (em) => {
      const hooks = await lockWorkspaceWebhooks(em, ws.id);
      // outbound_messages has no foreign keys (0017): its owner deletes them, before and after.
      await deleteWorkspaceMessages(em, ws.id);
      await deleteWorkspace(em, ws.id);
      await deleteWorkspaceMessages(em, ws.id);
      // events has no foreign keys either (0028): after the messages, whose outcomes write them.
      await deleteWorkspaceEvents(em, ws.id);
      await deleteDeliveriesOf(em, hooks);
      // The workers drop the attempts of these webhooks they hold and have not started.
      await notifyWebhookChanges(em, hooks);
    });
    return { id: ws.id };
  }

  async createKey(input: KeyInput): Promise<CreatedKey> {
    return this.createKeyIn(this.em, input);
  }

  private async createKeyIn(em: EntityManager, input: KeyInput): Promise<CreatedKey> {
    const role = input.role ?? 'admin';
    if (role !== 'admin' && role !== 'sdr') throw ApiError.invalid(`role: must be admin or sdr`);
    if (role === 'sdr' && !input.sdrId) throw ApiError.invalid('--role sdr requires --sdr SDR_ID');
    if (role === 'admin' && input.sdrId) throw ApiError.invalid('--sdr is only for --role sdr');
    const ws = await this.resolveIn(em, input.workspace);
    if (input.sdrId) {
      const sdr = await sdrOfWorkspace(em, ws.id, input.sdrId);
      if (!sdr) throw ApiError.notFound('sdr', `SDR ${input.sdrId} not found in workspace ${ws.id}`);
    }
    const name = input.name === undefined ? null : requireName(input.name);
    const key = generateApiKey();
    const row: ApiKey = {
      id: newId('key'),
      workspaceId: ws.id,
      name,
      role,
      sdrId: input.sdrId ?? null,
      keyHash: hashApiKey(key),
      keyPrefix: key.slice(0, 10),
      createdAt: this.deps.clock.now(),
      revokedAt: null,
      lastUsedAt: null,
    };
    await insertApiKey(em, row);
    return { id: row.id, key, role, workspaceId: ws.id, sdrId: row.sdrId, name: row.name };
  }

  async revokeKey(id: string): Promise<{ id: string }> {
    const key = await findApiKey(this.em, id);
    if (!key) throw ApiError.notFound('key', `API key ${id} not found`);
    if (!key.revokedAt) await revokeApiKey(this.em, id, this.deps.clock.now());
    return { id };
  }

  /**
   * First start on an empty database: the `default` workspace and one admin key. Returns the
   * key (to be printed once) or null when the database was already set up. Runs under an
   * advisory lock so two processes starting together create it once.
   */
  async bootstrap(): Promise<CreatedKey | null> {
    return transaction(this.em, async (em) => {
      await advisoryXactLockId(em, 7202612);
      const count = await countWorkspaces(em);
      const seeded = await instanceSetting(em, 'bootstrapped_at');
      if (count > 0 || seeded) return null;
      const ws = await this.createIn(em, 'default');
      const key = await this.createKeyIn(em, { workspace: ws.id, role: 'admin', name: 'bootstrap' });
      await createInstanceSetting(em, 'bootstrapped_at', this.deps.clock.now().toISOString(), this.deps.clock.now());
      return key;
    });
  }

  /**
   * Proves the configured secret key is the one the stored credentials were encrypted with:
   * a known plaintext is encrypted on first start and must decrypt on every later one.
   */
  async checkSecretKey(): Promise<void> {
    await transaction(this.em, async (em) => {
      await advisoryXactLockId(em, 7202613);
      const row = await instanceSetting(em, KEY_CHECK);
      if (!row) {
        await createInstanceSetting(em, KEY_CHECK, this.deps.crypto.encrypt(KEY_CHECK_PLAINTEXT), this.deps.clock.now());
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
