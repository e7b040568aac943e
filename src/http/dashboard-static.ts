import { createHash } from 'node:crypto';
import { promises as fs, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Context, Next } from 'koa';
import { ApiError } from '../shared/errors.ts';
import type { Logger } from '../adapters/logger.ts';

// The built dashboard (docs/dashboard.md, "Static files"): index.html for every page path
// (client-side routing), hashed assets cached for a year, everything compressed once in memory.

/** dist/dashboard/ of the installation: the same from src/http (tsx) and dist/http (compiled). */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(new URL('../../dist/dashboard/', import.meta.url));

/**
 * Paths the dashboard never answers: the API, in any version and any case (the router matches
 * `/V1/...` as `/v1/...`, and `/v2/...` gets its 404 in the envelope, not the dashboard's page),
 * tracking links, probes.
 */
const NOT_DASHBOARD = [/^\/v\d+(\/|$)/i, /^\/dashboard\/api(\/|$)/, /^\/[tu]\//, /^\/(healthz|readyz|metrics)$/];

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "frame-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "object-src 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.mjs', '.css', '.json', '.map', '.svg', '.txt', '.ico', '.webmanifest']);

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

interface StaticFile {
  type: string;
  etag: string;
  identity: Buffer;
  br?: Buffer;
  gzip?: Buffer;
}

interface Loaded {
  indexMtimeMs: number;
  files: Map<string, StaticFile>;
}

export const NOT_BUILT_MESSAGE = 'the dashboard is not built: run npm run build';

async function readTree(dir: string, prefix = ''): Promise<Array<{ urlPath: string; file: string }>> {
  const out: Array<{ urlPath: string; file: string }> = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    const urlPath = `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await readTree(file, urlPath)));
    // Precompressed copies a build may leave are not needed: compression happens here.
    else if (entry.isFile() && !/\.(br|gz)$/.test(entry.name)) out.push({ urlPath, file });
  }
  return out;
}

async function load(dir: string, indexMtimeMs: number): Promise<Loaded> {
  const files = new Map<string, StaticFile>();
  await Promise.all(
    (await readTree(dir)).map(async ({ urlPath, file }) => {
      const identity = await fs.readFile(file);
      const ext = path.extname(file).toLowerCase();
      const entry: StaticFile = {
        type: TYPES[ext] ?? 'application/octet-stream',
        etag: `W/"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`,
        identity,
      };
      if (COMPRESSIBLE.has(ext) && identity.length > 256) {
        entry.br = await brotli(identity, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: identity.length } });
        entry.gzip = await gzip(identity, { level: 9 });
      }
      files.set(urlPath, entry);
    }),
  );
  return { indexMtimeMs, files };
}

/** Route labels of the dashboard's files in the access log and metrics: a page, or a hashed asset. */
export const DASHBOARD_PAGE_ROUTE = 'dashboard:page';
export const DASHBOARD_ASSET_ROUTE = 'dashboard:asset';

/**
 * Serves the built dashboard to GET and HEAD requests outside the API's paths, and sets the
 * dashboard's security headers on those and on /dashboard/api answers. The files are read when
 * first asked for and again whenever index.html changes (a new build); until index.html exists
 * every page answers 503 saying how to build it.
 */
export function dashboardStatic(opts: { dir: string; log: Logger }) {
  const index = path.join(opts.dir, 'index.html');
  let current: Promise<Loaded> | null = null;
  let currentMtime = -1;

  function files(): Promise<Loaded> | null {
    let mtimeMs: number;
    try {
      mtimeMs = statSync(index).mtimeMs;
    } catch {
      current = null;
      currentMtime = -1;
      return null;
    }
    if (!current || mtimeMs !== currentMtime) {
      currentMtime = mtimeMs;
      current = load(opts.dir, mtimeMs);
      current.catch((err) => {
        opts.log.error({ err, dir: opts.dir }, 'reading the built dashboard failed');
        current = null;
        currentMtime = -1;
      });
    }
    return current;
  }

  return async (ctx: Context, next: Next) => {
    if (NOT_DASHBOARD.some((re) => re.test(ctx.path))) {
      if (ctx.path.startsWith('/dashboard/api')) ctx.set(SECURITY_HEADERS);
      return next();
    }
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    ctx.set(SECURITY_HEADERS);
    // The access log's and metrics' route label (http/observe.ts): two values, never the path.
    ctx.state.routeLabel = ctx.path.startsWith('/assets/') ? DASHBOARD_ASSET_ROUTE : DASHBOARD_PAGE_ROUTE;
    const pending = files();
    if (!pending) {
      ctx.status = 503;
      ctx.type = 'text/plain; charset=utf-8';
      ctx.set('Cache-Control', 'no-store');
      ctx.body = `${NOT_BUILT_MESSAGE}\n`;
      return;
    }
    const { files: all } = await pending;
    let file = all.get(ctx.path);
    let immutable = ctx.path.startsWith('/assets/');
    if (!file && immutable) throw new ApiError(404, 'not_found', `no dashboard asset ${ctx.path.slice(0, 200)}`);
    if (!file || ctx.path === '/' || ctx.path === '/index.html') {
      file = all.get('/index.html');
      immutable = false;
      if (!file) throw new ApiError(503, 'dashboard_not_built', NOT_BUILT_MESSAGE);
    }
    ctx.set('Cache-Control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    ctx.set('Vary', 'Accept-Encoding');
    ctx.type = file.type;
    ctx.etag = file.etag;
    ctx.status = 200;
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    // Brotli when the client takes it at all (smaller than gzip); browsers list it last.
    const encoding = !file.br ? 'identity' : ctx.acceptsEncodings('br') === 'br' ? 'br' : ctx.acceptsEncodings('gzip') === 'gzip' ? 'gzip' : 'identity';
    if (encoding === 'br' && file.br) {
      ctx.set('Content-Encoding', 'br');
      ctx.body = file.br;
    } else if (encoding === 'gzip' && file.gzip) {
      ctx.set('Content-Encoding', 'gzip');
      ctx.body = file.gzip;
    } else ctx.body = file.identity;
  };
}
