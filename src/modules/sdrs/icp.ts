// ICP (ideal customer profile) values and the check reply assignment runs (contract §8).
// Pure: no database, no clock. The criteria live in icp_criteria (one row per workspace).

export const SENIORITY_VALUES = ['unpaid', 'training', 'entry', 'senior', 'manager', 'director', 'vp', 'cxo', 'partner', 'owner'] as const;
export type Seniority = (typeof SENIORITY_VALUES)[number];

export const EMPLOYEE_COUNT_VALUES = ['1-10', '11-50', '51-200', '201-500', '501-1000', '1001-5000', '5001-10000', '10001+'] as const;
export type EmployeeCountBucket = (typeof EMPLOYEE_COUNT_VALUES)[number];

/** Upper bound (inclusive) of each bucket, in EMPLOYEE_COUNT_VALUES order; the last is open. */
const BUCKET_MAX = [10, 50, 200, 500, 1000, 5000, 10000, Infinity];

/** A workspace's criteria; null (or an empty list) for a dimension means "everything passes". */
export interface IcpCriteria {
  seniority: readonly string[] | null;
  employeeCounts: readonly string[] | null;
}

export interface IcpContact {
  seniority?: string | null;
  /** A bucket ("51-200") or a whole number of employees (put into its bucket). */
  employeeCount?: string | number | null;
}

export type IcpOutcome = 'ok' | 'unknown_value' | 'failed';

export function isSeniority(value: string): value is Seniority {
  return (SENIORITY_VALUES as readonly string[]).includes(value);
}

export function isEmployeeCountBucket(value: string): value is EmployeeCountBucket {
  return (EMPLOYEE_COUNT_VALUES as readonly string[]).includes(value);
}

/** The bucket of a whole number of employees (>= 1), or null when it is not one. */
export function employeeCountBucket(n: number): EmployeeCountBucket | null {
  if (!Number.isSafeInteger(n) || n < 1) return null;
  const i = BUCKET_MAX.findIndex((max) => n <= max);
  return EMPLOYEE_COUNT_VALUES[i];
}

/**
 * Normalizes an employee count given as a bucket, a whole number, or a string of digits
 * ("250") into its bucket; null when it is none of these.
 */
export function normalizeEmployeeCount(value: string | number): EmployeeCountBucket | null {
  if (typeof value === 'number') return employeeCountBucket(value);
  const v = value.trim();
  if (isEmployeeCountBucket(v)) return v;
  if (/^\d+$/.test(v)) return employeeCountBucket(Number(v));
  return null;
}

/** Seniority values are compared case-insensitively after trimming. */
export function normalizeSeniority(value: string): Seniority | null {
  const v = value.trim().toLowerCase();
  return isSeniority(v) ? v : null;
}

/**
 * Checks a contact against the workspace's criteria.
 * - 'unknown_value': a given seniority or employee count is not one of the accepted values
 *   (checked first, whatever the criteria: bad input is bad input; API answers 400 invalid_request).
 * - 'failed': a known value outside a dimension the workspace restricts (400 icp_failed).
 * - 'ok': otherwise. A dimension with no criteria (null/empty) passes everything; a value the
 *   contact does not give (null/undefined/"") passes too: there is nothing to reject it on.
 */
export function checkIcp(criteria: IcpCriteria | null | undefined, contact: IcpContact): IcpOutcome {
  const hasSeniority = contact.seniority != null && String(contact.seniority).trim() !== '';
  const hasCount = contact.employeeCount != null && String(contact.employeeCount).trim() !== '';
  const seniority = hasSeniority ? normalizeSeniority(String(contact.seniority)) : null;
  const count = hasCount ? normalizeEmployeeCount(contact.employeeCount as string | number) : null;
  if ((hasSeniority && !seniority) || (hasCount && !count)) return 'unknown_value';
  if (!criteria) return 'ok';
  if (seniority && criteria.seniority && criteria.seniority.length > 0 && !criteria.seniority.includes(seniority)) return 'failed';
  if (count && criteria.employeeCounts && criteria.employeeCounts.length > 0 && !criteria.employeeCounts.includes(count)) return 'failed';
  return 'ok';
}

/**
 * Parses an operator's comma list ("vp, cxo") of canonical values. Empty input means "no
 * restriction" (null). Throws with the offending value when one is not accepted.
 */
export function parseIcpList(kind: 'seniority' | 'employeeCount', input: string): string[] | null {
  const parts = input.split(',').map((p) => p.trim()).filter((p) => p !== '');
  if (parts.length === 0) return null;
  const allowed: readonly string[] = kind === 'seniority' ? SENIORITY_VALUES : EMPLOYEE_COUNT_VALUES;
  const out: string[] = [];
  for (const p of parts) {
    const v = kind === 'seniority' ? p.toLowerCase() : p;
    if (!allowed.includes(v)) throw new Error(`${kind}: "${p}" is not one of ${allowed.join(', ')}`);
    if (!out.includes(v)) out.push(v);
  }
  return out;
}
