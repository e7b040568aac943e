import { EntitySchema } from '@mikro-orm/core';

export type SenderStatus = 'active' | 'paused';
export type { SenderHealth } from './health.ts';
import type { SenderHealth } from './health.ts';

export interface SenderAccount {
  id: string;
  workspaceId: string;
  email: string;
  name: string;
  status: SenderStatus;
  /** AES-256-GCM ciphertext of the smtp(s):// URL with its credentials. */
  smtpUrlEnc: string;
  imapUrlEnc: string | null;
  dailyLimit: number | null;
  minIntervalMs: number;
  health: SenderHealth;
  healthError: string | null;
  healthCheckedAt: Date | null;
  /** End of the back-off of an unreachable or throttled account (senders/health.ts). */
  healthRetryAt?: Date | null;
  lastSentAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export const SenderAccountSchema = new EntitySchema<SenderAccount>({
  name: 'SenderAccount',
  tableName: 'sender_accounts',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string' },
    email: { type: 'string' },
    name: { type: 'string' },
    status: { type: 'string' },
    smtpUrlEnc: { type: 'string', lazy: true },
    imapUrlEnc: { type: 'string', nullable: true, lazy: true },
    dailyLimit: { type: 'number', nullable: true },
    minIntervalMs: { type: 'number' },
    health: { type: 'string' },
    healthError: { type: 'string', nullable: true },
    healthCheckedAt: { type: 'Date', nullable: true },
    healthRetryAt: { type: 'Date', nullable: true },
    lastSentAt: { type: 'Date', nullable: true },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date' },
  },
});

export interface SenderPool {
  id: string;
  workspaceId: string;
  name: string;
  dailyCapacity: number;
  createdAt: Date;
}

export const SenderPoolSchema = new EntitySchema<SenderPool>({
  name: 'SenderPool',
  tableName: 'sender_pools',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string' },
    name: { type: 'string' },
    dailyCapacity: { type: 'number' },
    createdAt: { type: 'Date' },
  },
});

export interface PoolMember {
  poolId: string;
  senderAccountId: string;
  addedAt: Date;
}

export const PoolMemberSchema = new EntitySchema<PoolMember>({
  name: 'PoolMember',
  tableName: 'pool_members',
  properties: {
    poolId: { type: 'string', primary: true },
    senderAccountId: { type: 'string', primary: true },
    addedAt: { type: 'Date' },
  },
});
