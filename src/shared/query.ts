import { z } from 'zod';

// Numbers in a query string. `z.coerce.number()` takes whatever `Number()` takes: `limit=0x10`
// read as 16, `limit=1e2` as 100, `limit=` as 0, and `limit=abc` answered "must be a number,
// not a number out of range". Here a query number is written in decimal digits (an optional
// minus sign, at most 15 digits, so it is exact); anything else is refused with the text the
// client sent (docs/decisions.md, "Query numbers").

const DECIMAL = /^-?\d{1,15}$/;

/**
 * An integer query parameter from `min` (to `max`), written in decimal digits; `fallback` when
 * it is absent. The default sits inside the preprocessing, where the OpenAPI document sees it.
 */
export function queryInt(min: number, max: number | undefined, fallback: number) {
  const n = z.int({ error: (iss) => (iss.code === 'invalid_type' ? `must be an integer written in decimal digits, not ${describe(iss.input)}` : undefined) }).min(min);
  return z.preprocess((v) => (typeof v === 'string' && DECIMAL.test(v) ? Number(v) : v), (max === undefined ? n : n.max(max)).default(fallback));
}

function describe(input: unknown): string {
  if (Array.isArray(input)) return 'a repeated parameter';
  if (typeof input === 'string') return input.length > 40 ? 'a string of more than 40 characters' : JSON.stringify(input);
  return String(input);
}
