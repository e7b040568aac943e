import { EntitySchema } from '@mikro-orm/core';

export interface Sdr {
  id: string;
  workspaceId: string;
  name: string;
  email: string;
  active: boolean;
  tone: string | null;
  signature: string | null;
  calendarUrl: string | null;
  language: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const SdrSchema = new EntitySchema<Sdr>({
  name: 'Sdr',
  tableName: 'sdrs',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string' },
    name: { type: 'string' },
    email: { type: 'string' },
    active: { type: 'boolean' },
    tone: { type: 'string', nullable: true },
    signature: { type: 'string', nullable: true },
    calendarUrl: { type: 'string', nullable: true },
    language: { type: 'string', nullable: true },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date' },
  },
});

export type MailHealth = 'active' | 'needs_reauth' | 'rate_limited' | 'disconnected';

export interface SdrMailbox {
  sdrId: string;
  workspaceId: string;
  email: string;
  smtpUrlEnc: string;
  imapUrlEnc: string;
  healthState: MailHealth;
  lastSyncedAt: Date | null;
  lastSyncError: string | null;
  connectedAt: Date;
  updatedAt: Date;
}

export const SdrMailboxSchema = new EntitySchema<SdrMailbox>({
  name: 'SdrMailbox',
  tableName: 'sdr_mailboxes',
  properties: {
    sdrId: { type: 'string', primary: true },
    workspaceId: { type: 'string' },
    email: { type: 'string' },
    smtpUrlEnc: { type: 'string', lazy: true },
    imapUrlEnc: { type: 'string', lazy: true },
    healthState: { type: 'string' },
    lastSyncedAt: { type: 'Date', nullable: true },
    lastSyncError: { type: 'string', nullable: true },
    connectedAt: { type: 'Date' },
    updatedAt: { type: 'Date' },
  },
});
