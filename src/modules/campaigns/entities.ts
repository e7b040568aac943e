import { EntitySchema } from '@mikro-orm/core';

export type CampaignStatus = 'draft' | 'running' | 'paused';
export type Weekday = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';

export interface Schedule {
  timezone: string;
  days: Weekday[];
  start: string;
  end: string;
}

export interface Campaign {
  id: string;
  workspaceId: string;
  name: string;
  status: CampaignStatus;
  senderPoolId: string | null;
  schedule: Schedule | null;
  trackOpens: boolean;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  pausedAt: Date | null;
}

export const CampaignSchema = new EntitySchema<Campaign>({
  name: 'Campaign',
  tableName: 'campaigns',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string' },
    name: { type: 'string' },
    status: { type: 'string' },
    senderPoolId: { type: 'string', nullable: true },
    schedule: { type: 'json', nullable: true },
    trackOpens: { type: 'boolean' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date' },
    startedAt: { type: 'Date', nullable: true },
    pausedAt: { type: 'Date', nullable: true },
  },
});

export interface CampaignStep {
  campaignId: string;
  stepIndex: number;
  subject: string;
  bodyHtml: string;
  delayHours: number;
}

export const CampaignStepSchema = new EntitySchema<CampaignStep>({
  name: 'CampaignStep',
  tableName: 'campaign_steps',
  properties: {
    campaignId: { type: 'string', primary: true },
    stepIndex: { type: 'number', primary: true },
    subject: { type: 'string' },
    bodyHtml: { type: 'text' },
    delayHours: { type: 'double' },
  },
});
