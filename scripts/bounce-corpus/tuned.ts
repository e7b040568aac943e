import type { Family } from './holdout.ts';
export const TUNED: Family[] = [];
