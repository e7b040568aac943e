import { z } from 'zod';

// Numbers in a query string. `z.coerce.number()` takes whatever `Number()` takes: `limit=0x10`
// read as 16, `limit=1e2` as 100, `limit=` as 0, and `limit=abc` answered "must be a number,
// not a number out of range". Here a query number is written in decimal digits (an optional
// minus sign, at most 15 significant digits, so it is exact: more is out of range); anything
// else is refused with the text the client sent (docs/decisions.md, "Query numbers").

/** Decimal digits with an optional minus sign; leading zeros do not count (`limit=002`). */
const DECIMAL = /^(-?)0*(\d+)$/;
/** The largest query number: 15 digits, exact as a double (until 2026-11-29 the OpenAPI document said 2^53 - 1). */
export const QUERY_INT_MAX = 999_999_999_999_999;

/**
 * An integer query parameter from `min` (to `max`, else QUERY_INT_MAX), written in decimal
 * digits; `fallback` when it is absent. The default sits inside the preprocessing, where the
 * OpenAPI document sees it. More than 15 significant digits is out of range (`must be at most
 * ...`), not "no integer": 1e15 stands for it, past every maximum and still exact.
 */
export function queryInt(min: number, max: number | undefined, fallback: number) {
  const n = z.int({ error: (iss) => (iss.code === 'invalid_type' ? `must be an integer written in decimal digits, not ${describe(iss.input)}` : undefined) }).min(min);
  return z.preprocess((v) => {
    const m = typeof v === 'string' ? DECIMAL.exec(v) : null;
    if (!m) return v;
    if (m[2].length <= 15) return Number(m[1] + m[2]);
    return m[1] ? -1e15 : 1e15;
  }, n.max(max ?? QUERY_INT_MAX).default(fallback));
}

function describe(input: unknown): string {
  if (Array.isArray(input)) return 'a repeated parameter';
  if (typeof input === 'string') return input.length > 40 ? 'a string of more than 40 characters' : JSON.stringify(input);
  return String(input);
}
