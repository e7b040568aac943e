// The one place that reads configuration: config/default.json, then config/$NODE_ENV.json,
// then environment variables, validated by a single zod schema. A bad value stops start-up
// with a message naming the setting.
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import '../shared/zod-messages.ts';
import { formatDuration, parseDuration, parseDurationList } from '../shared/duration.ts';
import { INBOUND_MAX_BYTES_DEFAULT } from '../modules/inbound/limits.ts';

/**
 * The longest duration a setting takes: ten years. A time this far from now is still a date (a
 * webhook retry delay of 100000000d made the next attempt's time an invalid date, which could
 * never be written, so the delivery was attempted again at every lease expiry).
 */
const SETTING_MAX_MS = 3650 * 86_400_000;

function bounded(ms: number): number {
  if (ms > SETTING_MAX_MS) throw new Error(`${formatDuration(ms)} is longer than 3650d (ten years), the longest duration a setting takes`);
  return ms;
}

const durationList = z.string().transform((v, ctx) => {
  try {
    return parseDurationList(v).map(bounded);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});

const duration = z.union([z.string(), z.number()]).transform((v, ctx) => {
  try {
    return bounded(parseDuration(v));
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});

/**
 * A duration a process waits with a timer (setTimeout, setInterval): Node keeps at most
 * 2^31-1 ms (about 24.8 days) and fires a longer one after 1 ms, with a warning. Refused at
 * start instead (a 30d webhook timeout timed out every attempt at once).
 */
const TIMER_MAX_MS = 2 ** 31 - 1;
const timer = duration.refine((ms) => ms <= TIMER_MAX_MS, 'must be at most 24d (the longest a timer waits)');

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2 };
const byteSize = z.union([z.string(), z.number()]).transform((v, ctx) => {
  const m = /^\s*(\d{1,12})\s*(B|KB|MB)?\s*$/i.exec(String(v));
  if (!m) {
    ctx.addIssue({ code: 'custom', message: 'must be a size: a number of bytes, or one with KB or MB (e.g. 2MB, 512KB)' });
    return z.NEVER;
  }
  return Number(m[1]) * SIZE_UNITS[(m[2] ?? 'b').toLowerCase()];
});

const PORT_RULE = 'must be a whole number from 0 to 65535 (0 picks a free port)';

/** Every setting: its config-file key, env variable, type, default and meaning. */
export const settings = {
  port: {
    env: 'PORT',
    // One message in our words for every way a port can be wrong ("abc" would read "received NaN").
    schema: z.coerce.number({ error: PORT_RULE }).int({ error: PORT_RULE }).min(0, { error: PORT_RULE }).max(65535, { error: PORT_RULE }),
    default: 8080,
    doc: 'HTTP listen port',
  },
  host: { env: 'HOST', schema: z.string().min(1), default: '127.0.0.1', doc: 'HTTP listen address' },
  databaseUrl: {
    env: 'DATABASE_URL',
    schema: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
      .optional(),
    default: undefined,
    doc: 'PostgreSQL connection string; unset = embedded PostgreSQL under dataDir/pg',
  },
  dataDir: { env: 'MAILGATE_DATA_DIR', schema: z.string().min(1), default: './data', doc: 'embedded PostgreSQL data, the generated secret key, and the journal of accepted sends a worker stopped during a database outage could not record' },
  secretKey: {
    env: 'MAILGATE_SECRET_KEY',
    schema: z
      .string()
      .refine((s) => decodeKey(s) !== null, '32 random bytes, hex (64 chars) or base64')
      .optional(),
    default: undefined,
    doc: 'encrypts stored SMTP/IMAP passwords (AES-256-GCM); generated into dataDir/secret.key when unset',
  },
  metricsAddress: {
    env: 'MAILGATE_METRICS_ADDRESS',
    schema: z
      .string()
      .regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:\[\]]+):\d{1,5}$/, 'must be host:port, e.g. 127.0.0.1:9464 (port 0 picks a free one)')
      .optional(),
    default: undefined,
    doc: 'host:port of a separate, unauthenticated listener answering GET /metrics (Prometheus); unset = no metrics endpoint (docs/operating.md)',
  },
  publicUrl: {
    env: 'MAILGATE_PUBLIC_URL',
    schema: z.string().url().optional(),
    default: undefined,
    doc: 'base of tracking-pixel and unsubscribe links put into emails; default http://HOST:PORT',
  },
  smtpRetryDelays: {
    env: 'MAILGATE_SMTP_RETRY_DELAYS',
    schema: durationList,
    default: '5m,30m,2h',
    doc: 'delays before retrying a temporary (4xx / network) SMTP failure; after the last, a soft bounce',
  },
  smtpMaxConnections: {
    env: 'MAILGATE_SMTP_MAX_CONNECTIONS',
    schema: z.coerce.number().int().min(1).max(50),
    default: 3,
    doc: 'SMTP connections per sender account (also the most messages of one account in flight)',
  },
  imapPollInterval: {
    env: 'MAILGATE_IMAP_POLL_INTERVAL',
    schema: timer,
    default: '60s',
    doc: 'fallback poll of a mailbox whose server has no IDLE (and the IDLE safety-net re-check)',
  },
  imapTimeout: {
    env: 'MAILGATE_IMAP_TIMEOUT',
    schema: timer.refine((ms) => ms >= 1_000, 'must be at least 1s'),
    default: '30s',
    doc: 'how long a watched mailbox\'s IMAP server may send nothing while a command waits on it: the check of its connection (a NOOP every MAILGATE_IMAP_POLL_INTERVAL) and every SELECT, SEARCH and FETCH of a sync; silent for longer, the connection is taken for dead: the mailbox is marked unreachable (an SDR\'s disconnected) and the watch reconnects',
  },
  inboundMaxBytes: {
    env: 'MAILGATE_INBOUND_MAX_BYTES',
    schema: byteSize.refine((n) => n >= 64 * 1024, 'must be at least 64KB').refine((n) => n <= 256 * 1024 ** 2, 'must be at most 256MB'),
    default: INBOUND_MAX_BYTES_DEFAULT,
    doc: 'the most bytes of one inbound message that are downloaded, stored and classified; a larger one is read up to this (its headers and text come first; the attachments after it are not downloaded)',
  },
  sendLease: {
    env: 'MAILGATE_SEND_LEASE',
    schema: timer,
    default: '10m',
    doc: 'how long a worker holds claimed messages; a dead worker\'s claims return to the queue after it',
  },
  workerHeartbeat: {
    env: 'MAILGATE_WORKER_HEARTBEAT',
    schema: timer.refine((ms) => ms >= 100, 'must be at least 100ms'),
    default: '5s',
    doc: 'how often a worker process writes its heartbeat and checks for dead workers',
  },
  workerDeadAfter: {
    env: 'MAILGATE_WORKER_DEAD_AFTER',
    schema: timer.refine((ms) => ms >= 1_000, 'must be at least 1s'),
    default: '15s',
    doc: 'a worker whose heartbeat is older than this is dead: the others take over its claimed messages, webhook deliveries and mailboxes (at least twice MAILGATE_WORKER_HEARTBEAT)',
  },
  oooDefaultDelay: {
    env: 'MAILGATE_OOO_DEFAULT_DELAY',
    schema: duration,
    default: '7d',
    doc: "how long an out-of-office answer that names no return date postpones the lead's next step (then the first sending slot); 0s keeps the schedule",
  },
  logLevel: {
    env: 'LOG_LEVEL',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    default: 'info',
    doc: 'structured JSON log level',
  },
  shutdownTimeout: {
    env: 'MAILGATE_SHUTDOWN_TIMEOUT',
    schema: timer,
    default: '30s',
    doc: 'how long a graceful shutdown waits for in-flight work before exiting',
  },
  httpKeepAliveTimeout: {
    env: 'MAILGATE_HTTP_KEEPALIVE_TIMEOUT',
    schema: timer.refine((ms) => ms >= 1_000, 'must be at least 1s'),
    default: '65s',
    doc: "how long the HTTP listener keeps an idle keep-alive connection open; longer than the idle timeout of a reverse proxy's or load balancer's connections to mailgate (nginx upstream keepalive_timeout and AWS ALB: 60 s), so the proxy closes first",
  },
  webhookTimeout: {
    env: 'MAILGATE_WEBHOOK_TIMEOUT',
    schema: duration.refine((ms) => ms > 0, 'must be more than 0').refine((ms) => ms <= 600_000, 'must be at most 10m (its leases are multiples of it)'),
    default: '10s',
    doc: 'how long a webhook receiver has to answer (connect, TLS and status line); later is a failed attempt',
  },
  webhookRetryDelays: {
    env: 'MAILGATE_WEBHOOK_RETRY_DELAYS',
    schema: durationList,
    default: '30s,5m,30m,2h,8h',
    doc: 'delays after a failed webhook attempt before the next one; after the last, the delivery is failed',
  },
  webhookAllowPrivate: {
    env: 'MAILGATE_WEBHOOK_ALLOW_PRIVATE',
    schema: z.union([z.boolean(), z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')]),
    default: false,
    doc: 'allow webhook URLs that resolve to loopback, private, link-local and other non-public addresses (SSRF guard off; for tests and closed networks)',
  },
  eventRetention: {
    env: 'MAILGATE_EVENT_RETENTION',
    schema: duration.refine((ms) => ms === 0 || ms >= 3_600_000, 'must be at least 1h, or 0 to keep everything'),
    default: '30d',
    doc: 'events older than this, and their finished webhook deliveries with their attempts, are deleted (hourly); 0 keeps everything',
  },
  dashboardSessionIdle: {
    env: 'MAILGATE_DASHBOARD_SESSION_IDLE',
    schema: duration.refine((ms) => ms >= 60_000, 'must be at least 1m').refine((ms) => ms <= 366 * 86_400_000, 'must be at most 366d'),
    default: '12h',
    doc: 'a dashboard session unused for this long is signed out (docs/dashboard.md)',
  },
  dashboardDir: {
    env: 'MAILGATE_DASHBOARD_DIR',
    schema: z.string().min(1).optional(),
    default: undefined,
    doc: 'directory of the built dashboard (index.html and assets/); default dist/dashboard of the installation',
  },
  llmBaseUrl: {
    env: 'MAILGATE_LLM_BASE_URL',
    schema: z.string().regex(/^https?:\/\//, 'must be an http:// or https:// URL (an OpenAI-compatible /v1 base)').optional(),
    default: undefined,
    doc: 'OpenAI-compatible /v1 base (OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp server) for AI drafts; unset = the offline composer',
  },
  llmApiKey: {
    env: 'MAILGATE_LLM_API_KEY',
    schema: z.string().min(1).optional(),
    default: undefined,
    doc: 'API key sent to the LLM (Authorization: Bearer, or api-key for Azure hosts)',
  },
  llmModel: {
    env: 'MAILGATE_LLM_MODEL',
    schema: z.string().min(1),
    default: 'gpt-4o-mini',
    doc: 'model name (Azure: the deployment is in the base URL; this is still sent)',
  },
  llmTimeout: {
    env: 'MAILGATE_LLM_TIMEOUT',
    schema: timer.refine((ms) => ms > 0, 'must be more than 0'),
    default: '30s',
    doc: 'how long one LLM request may take before it counts as failed (then retried, at most 3 times)',
  },
  guardrailThreshold: {
    env: 'MAILGATE_GUARDRAIL_THRESHOLD',
    schema: z.coerce.number().min(0).max(1),
    default: 0.6,
    doc: "a draft send is blocked when the judge's overall score is below this (0..1)",
  },
} as const;

type Settings = typeof settings;
export type Config = { [K in keyof Settings]: z.output<Settings[K]['schema']> };

export class ConfigError extends Error {}

/**
 * Settings whose value is (or may hold) a secret: a refusal never repeats one, as the message
 * goes to stderr and from there into logs (`docker logs`, a journal). A URL is shown without its
 * password and query (which may hold one); a key only by its length.
 */
const SECRET_URLS = new Set<string>(['databaseUrl', 'llmBaseUrl']);
const SECRET_VALUES = new Set<string>(['secretKey', 'llmApiKey']);

/** A refused value as the message may show it. */
function shownValue(key: string, raw: unknown): string {
  if (!SECRET_URLS.has(key) && !SECRET_VALUES.has(key)) return JSON.stringify(raw);
  const hidden = 'the value is not shown: it is a secret';
  if (typeof raw !== 'string') return `a ${raw === null ? 'null' : Array.isArray(raw) ? 'list' : typeof raw}; ${hidden}`;
  const url = raw.trim();
  if (SECRET_URLS.has(key) && /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(url) && URL.canParse(url)) {
    const u = new URL(url);
    const user = u.username ? `${u.username}${u.password ? ':***' : ''}@` : '';
    return JSON.stringify(`${u.protocol}//${user}${u.host}${u.pathname}${u.search ? '?...' : ''}`);
  }
  return `${raw.length} character${raw.length === 1 ? '' : 's'}; ${hidden}`;
}

export function decodeKey(s: string): Buffer | null {
  const t = s.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) {
    const b = Buffer.from(t, 'base64');
    if (b.length === 32) return b;
  }
  return null;
}

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function readJson(file: string): Record<string, unknown> {
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`config file ${file} is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Loads the configuration. `overrides` (used by tests and the CLI) win over everything.
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Partial<Record<keyof Settings, unknown>> = {},
  configDir = path.join(repoRoot, 'config'),
): Config {
  const fromFiles = {
    ...readJson(path.join(configDir, 'default.json')),
    ...(env.NODE_ENV ? readJson(path.join(configDir, `${env.NODE_ENV}.json`)) : {}),
  };
  const unknown = Object.keys(fromFiles).filter((k) => !(k in settings));
  if (unknown.length) throw new ConfigError(`unknown setting in config/: ${unknown.join(', ')}`);

  const out: Record<string, unknown> = {};
  for (const [key, def] of Object.entries(settings)) {
    let raw: unknown = def.default;
    let source = `default of ${key}`;
    if (key in fromFiles && fromFiles[key] !== null) {
      raw = fromFiles[key];
      source = `${key} in config/`;
    }
    const envVal = env[def.env];
    if (envVal !== undefined && envVal !== '') {
      raw = envVal;
      source = def.env;
    }
    if (key in overrides && overrides[key as keyof Settings] !== undefined) {
      raw = overrides[key as keyof Settings];
      source = key;
    }
    const parsed = (def.schema as z.ZodType).safeParse(raw);
    if (!parsed.success) {
      const msg = parsed.error.issues.map((i) => i.message).join('; ');
      // The shared wording of a list of values already says what it got.
      const got = msg.includes('(got ') ? '' : ` (got ${shownValue(key, raw)})`;
      throw new ConfigError(`invalid setting ${source === key ? key : `${source} (${key})`}: ${msg}${got}`);
    }
    out[key] = parsed.data;
  }
  // A live worker must never look dead between two heartbeats (one may be late by a slow round trip).
  if ((out.workerDeadAfter as number) < 2 * (out.workerHeartbeat as number))
    throw new ConfigError(`invalid setting MAILGATE_WORKER_DEAD_AFTER (workerDeadAfter): must be at least twice MAILGATE_WORKER_HEARTBEAT (workerHeartbeat)`);
  out.dataDir = path.resolve(out.dataDir as string);
  return out as Config;
}

/** A listen address that accepts connections on every interface. */
function wildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}

/** The base of the links put into mail: MAILGATE_PUBLIC_URL, else this process's own address. */
export function publicUrl(config: Config): string {
  if (config.publicUrl) return config.publicUrl.replace(/\/+$/, '');
  const host = wildcardHost(config.host) ? '127.0.0.1' : config.host.includes(':') && !config.host.startsWith('[') ? `[${config.host}]` : config.host;
  return `http://${host}:${config.port}`;
}

/**
 * Why the links in sent mail will not reach anyone, or null: MAILGATE_PUBLIC_URL is unset while
 * the daemon listens beyond loopback (a container, a server), so its own address, a loopback or
 * internal one, would go into every tracking pixel and unsubscribe link.
 */
export function publicUrlWarning(config: Config): string | null {
  if (config.publicUrl) return null;
  const loopback = config.host === 'localhost' || config.host === '::1' || config.host === '[::1]' || /^127\./.test(config.host);
  if (loopback) return null;
  return `MAILGATE_PUBLIC_URL is unset: the tracking and unsubscribe links in sent mail point at ${publicUrl(config)}, which recipients cannot reach; set it to the address they reach this daemon at`;
}
