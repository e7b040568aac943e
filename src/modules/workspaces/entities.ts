import { EntitySchema } from '@mikro-orm/core';

export interface Workspace {
  id: string;
  name: string;
  createdAt: Date;
}

export const WorkspaceSchema = new EntitySchema<Workspace>({
  name: 'Workspace',
  tableName: 'workspaces',
  properties: {
    id: { type: 'string', primary: true },
    name: { type: 'string' },
    createdAt: { type: 'Date' },
  },
});

export type Role = 'admin' | 'sdr';

export interface ApiKey {
  id: string;
  workspaceId: string | null;
  name: string | null;
  role: Role;
  sdrId: string | null;
  keyHash: string;
  keyPrefix: string;
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

export const ApiKeySchema = new EntitySchema<ApiKey>({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', nullable: true },
    name: { type: 'string', nullable: true },
    role: { type: 'string' },
    sdrId: { type: 'string', nullable: true },
    keyHash: { type: 'string' },
    keyPrefix: { type: 'string' },
    createdAt: { type: 'Date' },
    revokedAt: { type: 'Date', nullable: true },
    lastUsedAt: { type: 'Date', nullable: true },
  },
});

export interface InstanceSetting {
  key: string;
  value: string;
  updatedAt: Date;
}

export const InstanceSettingSchema = new EntitySchema<InstanceSetting>({
  name: 'InstanceSetting',
  tableName: 'instance_settings',
  properties: {
    key: { type: 'string', primary: true },
    value: { type: 'string' },
    updatedAt: { type: 'Date' },
  },
});
