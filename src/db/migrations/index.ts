import { Migration0001Initial } from './0001_initial.ts';

/** Every migration, in order. Numbered, committed, applied at start; never auto-synced. */
export const migrations = [{ name: '0001_initial', class: Migration0001Initial }];
