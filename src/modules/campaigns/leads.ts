import type { FieldError } from '../../shared/errors.ts';
import { isEmail, normalizeEmail } from '../../shared/email.ts';
import { LIMITS } from './schemas.ts';
import { findTextViolation, MAX_JSON_DEPTH } from '../../shared/text.ts';

export const STANDARD_FIELDS = ['firstName', 'lastName', 'company', 'jobTitle'] as const;
export type StandardField = (typeof STANDARD_FIELDS)[number];

/**
 * Token names reserved by mailgate itself; a custom field cannot take them. Nor `__proto__`: the
 * one name an object cannot hold as an ordinary field (assigning it sets the prototype).
 */
const STANDARD = new Set<string>(STANDARD_FIELDS);
const RESERVED = new Set(['email', 'unsubscribeUrl', '__proto__', ...STANDARD_FIELDS]);
const CUSTOM_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/**
 * A reserved name in another case (`FirstName`, `Company`, `EMAIL`: a CRM's own field names) is
 * the standard field misspelled, not a custom field: tokens are case-sensitive, so stored as one
 * it left `{{firstName}}` empty (or its fallback) for every lead, without a word. Set to null,
 * it removes such a field stored before the rule.
 */
const RESERVED_BY_CASE = new Map([...RESERVED].filter((n) => n !== '__proto__').map((n) => [n.toLowerCase(), n]));
const MAX_FIELD_LENGTH = 1000;
/**
 * A custom field's value, written as JSON: at most this many characters. A value is a token's
 * text in a message; unbounded, a 3 MB field made a 7.9 MB email, which servers refuse (and a
 * refusal at DATA is a hard bounce).
 */
export const MAX_CUSTOM_VALUE_CHARS = 10_000;

/**
 * How long `value` is written as JSON, or a bound under MAX_CUSTOM_VALUE_CHARS when it surely
 * fits: a number, a boolean, or a string short enough even if every character took a six-
 * character escape. Ten thousand leads' fields are not each written out to be measured.
 */
function jsonLength(value: unknown): number {
  if (typeof value === 'number' || typeof value === 'boolean') return 0;
  if (typeof value === 'string' && 2 + 6 * value.length <= MAX_CUSTOM_VALUE_CHARS) return 0;
  return JSON.stringify(value).length;
}

export interface LeadInput {
  email: string;
  emailKey: string;
  /** Standard fields present in the request (null clears the value). */
  fields: Partial<Record<StandardField, string | null>>;
  custom: Record<string, unknown>;
  /** The request item it comes from: the last one, for a lead given more than once. */
  index: number;
}

/**
 * Validates and normalizes submitted leads. Duplicates (by trimmed, lower-cased email) collapse
 * into one: later fields win, fields only an earlier duplicate had are kept.
 */
export function parseLeads(items: unknown[]): { leads: LeadInput[]; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const byKey = new Map<string, LeadInput>();
  items.forEach((item, index) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      errors.push({ index, message: 'a lead must be an object' });
      return;
    }
    // The text rule the body reader applies to other routes (this route leaves it to us): a
    // NUL, a lone surrogate, a number past a double or deep nesting fails the lead, by index.
    const violation = findTextViolation(item, [], MAX_JSON_DEPTH, 2);
    if (violation) {
      errors.push({ index, ...(violation.field ? { field: violation.field } : {}), message: violation.message });
      return;
    }
    const obj = item as Record<string, unknown>;
    const rowErrors: FieldError[] = [];
    const email = obj.email;
    if (typeof email !== 'string' || !isEmail(email)) {
      rowErrors.push({ index, field: 'email', value: email, message: email === undefined ? 'email is required' : 'not a valid email address' });
    }
    const fields: LeadInput['fields'] = {};
    const custom: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(obj)) {
      if (key === 'email') continue;
      if (STANDARD.has(key)) {
        if (value !== null && typeof value !== 'string') rowErrors.push({ index, field: key, value, message: 'must be a string or null' });
        else if (typeof value === 'string' && value.length > MAX_FIELD_LENGTH) rowErrors.push({ index, field: key, message: `at most ${MAX_FIELD_LENGTH} characters` });
        else fields[key as StandardField] = value === null ? null : value.trim();
        continue;
      }
      // null still removes one stored before this rule (2026-11-29).
      const misspelled = RESERVED.has(key) || value === null ? undefined : RESERVED_BY_CASE.get(key.toLowerCase());
      if (misspelled) {
        rowErrors.push({ index, field: key, message: `reserved name in another case: the field is spelled ${misspelled}` });
        continue;
      }
      if (!CUSTOM_KEY.test(key) || RESERVED.has(key)) {
        rowErrors.push({ index, field: key, message: RESERVED.has(key) ? 'reserved name' : 'custom field names are letters, digits and _ (at most 64), starting with a letter or _' });
        continue;
      }
      if (jsonLength(value) > MAX_CUSTOM_VALUE_CHARS) {
        rowErrors.push({ index, field: key, message: `at most ${MAX_CUSTOM_VALUE_CHARS.toLocaleString('en-US')} characters (written as JSON)` });
        continue;
      }
      custom[key] = value;
    }
    if (Object.keys(custom).length > LIMITS.customFields) rowErrors.push({ index, field: 'customFields', message: `at most ${LIMITS.customFields} custom fields` });
    if (rowErrors.length) {
      errors.push(...rowErrors);
      return;
    }
    const emailKey = normalizeEmail(email as string);
    const prev = byKey.get(emailKey);
    if (prev) {
      // Re-insert so that the collapsed lead takes the position of its last occurrence.
      byKey.delete(emailKey);
      byKey.set(emailKey, { email: (email as string).trim(), emailKey, fields: { ...prev.fields, ...fields }, custom: { ...prev.custom, ...custom }, index });
    } else {
      byKey.set(emailKey, { email: (email as string).trim(), emailKey, fields, custom, index });
    }
  });
  return { leads: [...byKey.values()], errors };
}
