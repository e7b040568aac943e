// The dashboard's only way to the server: same-origin fetch with the session cookie, the
// session's CSRF token on every state-changing call, and the error envelope turned into words.

export interface Session {
  role: 'admin' | 'sdr';
  workspaceId: string;
  workspaceName: string;
  sdrId: string | null;
  keyId: string;
  csrfToken: string;
  idleTimeoutSeconds: number;
}

export interface ErrorItem {
  index?: number;
  field?: string;
  value?: unknown;
  message: string;
}

/** A failed call: the envelope's code and message, the HTTP status, and the whole body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: any,
  ) {
    super(message);
  }
  get errors(): ErrorItem[] {
    return Array.isArray(this.body?.errors) ? this.body.errors : [];
  }
}

let csrfToken = '';
let current: Session | null = null;

/** The signed-in session (set at sign-in and when the page loads). */
export function session(): Session | null {
  return current;
}

export function setSession(s: Session | null) {
  current = s;
  csrfToken = s?.csrfToken ?? '';
}
let onSignedOut: (() => void) | undefined;

/** Called when a request answers 401: the session ended (expired, signed out, key revoked). */
export function whenSignedOut(fn: () => void) {
  onSignedOut = fn;
}

export interface Answer<T> {
  body: T;
  headers: Headers;
}

export async function call<T = any>(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json', ...extraHeaders };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') headers['x-csrf-token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  } catch {
    throw new ApiError(0, 'network_error', 'mailgate did not answer: check that the daemon is running and the network is up, then try again.', null);
  }
  const text = await res.text();
  let parsed: any = undefined;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
  }
  if (!res.ok) {
    const code: string = parsed?.error?.code ?? `http_${res.status}`;
    const message: string = parsed?.error?.message ?? `mailgate answered ${res.status} ${res.statusText}`.trim();
    const err = new ApiError(res.status, code, message, parsed);
    if (res.status === 401 && !path.startsWith('/dashboard/api/session')) onSignedOut?.();
    throw err;
  }
  return { body: parsed as T, headers: res.headers };
}

export const get = async <T = any>(path: string) => (await call<T>('GET', path)).body;
export const post = async <T = any>(path: string, body?: unknown) => (await call<T>('POST', path, body ?? {})).body;
export const patch = async <T = any>(path: string, body: unknown) => (await call<T>('PATCH', path, body)).body;
export const del = async <T = any>(path: string) => (await call<T>('DELETE', path)).body;

/** A query string from the defined, non-empty values. */
export function qs(params: Record<string, string | number | boolean | undefined | null | string[]>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => u.append(k, x));
    else u.set(k, String(v));
  }
  const s = u.toString();
  return s ? `?${s}` : '';
}

/** A field of a request body named as the dashboard's forms name it ("Step 2 HTML body", not sequenceSteps[1].bodyHtml). */
export function fieldWords(field: string): string {
  const step = /^sequenceSteps\[(\d+)\](?:\.(\w+))?$/.exec(field);
  if (step) {
    const part: Record<string, string> = { subject: 'subject', bodyHtml: 'HTML body', delayHours: 'delay' };
    return `Step ${Number(step[1]) + 1}${step[2] ? ` ${part[step[2]] ?? step[2]}` : ''}`;
  }
  const known: Record<string, string> = {
    sequenceSteps: 'Steps',
    schedule: 'Sending window',
    'schedule.timezone': 'Time zone',
    'schedule.start': 'From',
    'schedule.end': 'To',
    'schedule.days': 'Days',
    senderPoolId: 'Sender pool',
    name: 'Name',
    email: 'Email',
  };
  return known[field] ?? field;
}

/** One failing item in the dashboard's words: the offending value (an address) or the field, then what is wrong. */
export function problemWords(e: ErrorItem): string {
  const what = typeof e.value === 'string' && e.value !== '' ? `"${e.value.length > 80 ? `${e.value.slice(0, 80)}…` : e.value}"` : e.field ? fieldWords(e.field) : e.index !== undefined ? `Item ${e.index + 1}` : '';
  return what ? `${what}: ${e.message}` : e.message;
}

/** The failing fields of a validation error, by the request's field path (for aria-invalid and a message next to the field). */
export function fieldErrors(err: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (err instanceof ApiError) for (const e of err.errors) if (e.field && e.index === undefined && !(e.field in out)) out[e.field] = e.message;
  return out;
}

/**
 * What to tell a person about a failure: the server's own words plus what to do next. A
 * validation failure lists each problem once, in the dashboard's terms: the server's message
 * restates the first item (and counts the others), so only the items are shown then.
 */
export function describeError(err: unknown): string {
  if (!(err instanceof ApiError)) return err instanceof Error ? err.message : String(err);
  const next: Record<string, string> = {
    authentication_failed: 'Sign in again with a valid API key.',
    csrf_failed: 'Reload the page and try again.',
    forbidden: 'This needs a key with another role.',
  };
  const items = [...new Set(err.errors.map(problemWords))];
  let message = err.message;
  if (items.length) {
    message = message.replace(/\s*\(and \d+ more problems?, listed in errors\)/, '');
    // "body schedule.timezone: must be ..." says no more than the item itself.
    if (err.errors.some((e) => e.field && message.endsWith(`${e.field}: ${e.message}`)) || err.errors.some((e) => message === e.message)) message = '';
  }
  // A key whose SDR was deactivated: no other role helps, an admin has to activate the SDR again.
  if (err.code === 'forbidden' && /\bSDR of this key is inactive\b/.test(err.message)) next.forbidden = 'An admin can activate the SDR again on the SDRs page.';
  const shown = items.slice(0, 5).join('; ') + (items.length > 5 ? `; and ${items.length - 5} more` : '');
  const head = message && shown ? `${message.replace(/[.:]?$/, ':')} ${shown}.` : message || (shown ? `${shown}.` : '');
  // The server's message is a clause without a full stop ("invalid API key"): it ends its sentence before the advice.
  const advice = next[err.code];
  return [advice && head && !/[.!?]$/.test(head) ? `${head}.` : head, advice].filter(Boolean).join(' ');
}
