// A signed-in dashboard session for HTTP tests: the cookie and CSRF token a browser would hold.
import assert from 'node:assert/strict';
import type { ApiResponse, TestApp } from './harness.ts';

export interface Session {
  cookie: string;
  csrf: string;
  body: any;
  /** A request with the session cookie, and the CSRF token on POST/PATCH/DELETE unless `csrf: false`. */
  request<T = any>(method: string, path: string, opts?: { body?: unknown; headers?: Record<string, string>; csrf?: boolean | string }): Promise<ApiResponse<T>>;
}

export function cookieOf(res: ApiResponse): string | null {
  const set = res.headers.getSetCookie().find((c) => c.startsWith('mailgate_session='));
  return set ? set.split(';')[0] : null;
}

export async function signIn(app: TestApp, apiKey: string, headers: Record<string, string> = {}): Promise<Session> {
  const res = await app.request('POST', '/dashboard/api/session', { body: { apiKey }, headers });
  assert.equal(res.status, 200, res.text);
  const cookie = cookieOf(res);
  assert.ok(cookie, 'sign-in sets the session cookie');
  return session(app, cookie, res.body.csrfToken, res.body);
}

export function session(app: TestApp, cookie: string, csrf: string, body: any = null): Session {
  return {
    cookie,
    csrf,
    body,
    request(method, path, o = {}) {
      const headers: Record<string, string> = { cookie, ...(o.headers ?? {}) };
      const token = o.csrf === undefined || o.csrf === true ? csrf : o.csrf === false ? null : o.csrf;
      if (token && method !== 'GET') headers['x-csrf-token'] = token;
      return app.request(method, path, { body: o.body, headers });
    },
  };
}
