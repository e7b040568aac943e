import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/sql.ts';
import { WorkspaceSchema, ApiKeySchema, InstanceSettingSchema, type ApiKey, type InstanceSetting, type Role, type Workspace } from './entities.ts';

// The owner of `workspaces`, `api_keys` and `instance_settings` (ORM entities). The API key
// lookup of every request, its `last_used_at` and the dashboard's key list are in
// api-keys-repository.ts (docs/architecture.md).

/**
 * `api_keys` as hand-written SQL returns it (api-keys-repository.ts's key lookup and key list,
 * the dashboard's session lookup): the one declaration of its columns; those readers
 * type what they select as a Pick of it. The ORM entity `ApiKey` is its camelCase side.
 */
export interface ApiKeyRow {
  id: string;
  workspace_id: string | null;
  name: string | null;
  role: Role;
  sdr_id: string | null;
  key_hash: string;
  key_prefix: string;
  created_at: Date | string;
  revoked_at: Date | string | null;
  last_used_at: Date | string | null;
}

export async function insertWorkspace(em: EntityManager, ws: Workspace): Promise<void> {
  await em.insert(WorkspaceSchema, ws);
}

/** A workspace by id, else by name (the CLI accepts either). */
export async function findWorkspace(em: EntityManager, idOrName: string): Promise<Workspace | null> {
  return (await em.findOne(WorkspaceSchema, { id: idOrName })) ?? (await em.findOne(WorkspaceSchema, { name: idOrName }));
}

export async function countWorkspaces(em: EntityManager): Promise<number> {
  return em.count(WorkspaceSchema, {});
}

/** Deletes the workspace; its data goes with it (foreign keys cascade), its keys stay. */
export async function deleteWorkspace(em: EntityManager, id: string): Promise<void> {
  await em.nativeDelete(WorkspaceSchema, { id });
}

export async function insertApiKey(em: EntityManager, key: ApiKey): Promise<void> {
  await em.insert(ApiKeySchema, key);
}

export async function findApiKey(em: EntityManager, id: string): Promise<ApiKey | null> {
  return em.findOne(ApiKeySchema, { id });
}

/** Revokes the key; a key revoked already keeps its first revocation time (two revokes at once). */
export async function revokeApiKey(em: EntityManager, id: string, now: Date): Promise<void> {
  await em.nativeUpdate(ApiKeySchema, { id, revokedAt: null }, { revokedAt: now });
}

export async function instanceSetting(em: EntityManager, key: string): Promise<InstanceSetting | null> {
  return em.findOne(InstanceSettingSchema, { key });
}

/** A new instance setting (first start's markers), written by the unit of work's flush. */
export async function createInstanceSetting(em: EntityManager, key: string, value: string, now: Date): Promise<void> {
  em.create(InstanceSettingSchema, { key, value, updatedAt: now });
  await em.flush();
}

/** The workspace's name ('' when it is gone). */
export async function workspaceName(em: EntityManager, workspaceId: string): Promise<string> {
  const [ws] = await sql<{ name: string }>(em, 'select name from workspaces where id = ?', [workspaceId]);
  return ws?.name ?? '';
}
