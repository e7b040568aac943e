import type { Deps } from '../services.ts';
import type { RecurringJob } from './agenda.ts';

/**
 * The job-name -> handler map of the worker role. Each job is a thin wrapper calling one
 * service on a forked EntityManager. The sending, webhook, inbound and follow-up issues add
 * theirs here.
 */
export function recurringJobs(_deps: Deps): RecurringJob[] {
  return [];
}
