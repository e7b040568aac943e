import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { systemClock } from './clock.ts';
import { storableText } from '../shared/text.ts';

// A Chat Completions client for any OpenAI-compatible server (OpenAI, Azure OpenAI, Ollama, vLLM,
// llama.cpp) whose answers are JSON validated by a zod schema.
//
// Servers differ in how much structured output they support: some take a JSON schema, some only
// "a JSON object", some neither. A call starts with the strictest mode and steps down when the
// server refuses the request format (400/422); each provider remembers the first mode that worked.
// Two independent retry loops: transport retries (429, 5xx, network, timeout) with backoff, and
// one repair round when an answer does not parse, does not validate or was cut off.

export interface LlmMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface LlmUsage {
  promptTokens: number;
  completionTokens: number;
}

export type StructuredMode = 'json_schema' | 'json_object' | 'prompt';

export interface LlmRequest<T> {
  messages: LlmMessage[];
  /** The answer must validate against it. */
  schema: z.ZodType<T>;
  /** e.g. 'draft_variants' ([a-zA-Z0-9_-], at most 64): the json_schema name. */
  schemaName: string;
  temperature?: number;
  maxTokens?: number;
}

export interface LlmResult<T> {
  value: T;
  /** The model the server reported, else the configured one. */
  model: string;
  /** Summed over every HTTP answer of this call that reported usage. */
  usage: LlmUsage;
  /** Wall time of the whole call, retries included. */
  latencyMs: number;
  /** HTTP requests made. */
  attempts: number;
  /** The mode that produced the value. */
  mode: StructuredMode;
}

export type LlmErrorKind = 'timeout' | 'rate_limited' | 'server_error' | 'bad_request' | 'auth' | 'network' | 'invalid_output' | 'truncated';

export class LlmError extends Error {
  readonly kind: LlmErrorKind;
  /** The HTTP status of the last answer, when the error comes from one. */
  readonly status?: number;

  constructor(kind: LlmErrorKind, message: string, opts: { status?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'LlmError';
    this.kind = kind;
    this.status = opts.status;
  }
}

export interface LlmProvider {
  readonly model: string;
  complete<T>(req: LlmRequest<T>): Promise<LlmResult<T>>;
}

export interface OpenAiOptions {
  /** An OpenAI-compatible /v1 base; a query string (Azure's ?api-version=) is kept. */
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** Per HTTP request; default 30000. */
  timeoutMs?: number;
  /** Retries of 429 / 5xx / network / timeout per request; default 3. */
  maxRetries?: number;
  /** Exponential backoff base, with ±20% jitter; default 500. */
  retryBaseMs?: number;
  /** Cap on an honoured Retry-After; default 30000. */
  maxRetryAfterMs?: number;
  /** Told of every call once it ends: `ok` or the error's kind, and its duration (metrics). */
  observe?: (outcome: string, seconds: number) => void;
  log?: { warn(obj: object, msg?: string): void; debug?(obj: object, msg?: string): void };
}

/** Azure OpenAI authenticates with an `api-key` header instead of a bearer token. */
export function isAzureHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  return host.endsWith('.openai.azure.com') || host.endsWith('.cognitiveservices.azure.com');
}

/**
 * How long a 429 asks us to wait, in ms: Azure's `retry-after-ms` (or `x-ms-retry-after-ms`),
 * which is finer than whole seconds, when present and readable, else `Retry-After`.
 */
export function retryDelayFrom(headers: { get(name: string): string | null }, now: Date): number | undefined {
  for (const name of ['retry-after-ms', 'x-ms-retry-after-ms']) {
    const v = headers.get(name)?.trim();
    if (v && /^\d+(\.\d+)?$/.test(v)) return Number(v);
  }
  return parseRetryAfter(headers.get('retry-after'), now);
}

/** A Retry-After header (delay in seconds, or an HTTP-date) in ms from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: Date): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

/**
 * Extracts the first JSON object from model text: plain, inside ```json fences, or surrounded by
 * prose. Fenced blocks are tried first (prose around them may hold braces of its own). Returns
 * undefined when none parses.
 */
export function extractJson(text: string): unknown {
  for (const fence of text.matchAll(/```[a-z0-9]*\s*([\s\S]*?)```/gi)) {
    const value = parseObject(fence[1]);
    if (value !== undefined) return value;
  }
  for (let start = text.indexOf('{'); start >= 0; start = text.indexOf('{', start + 1)) {
    const end = closingBrace(text, start);
    if (end < 0) continue;
    const value = parseObject(text.slice(start, end + 1));
    if (value !== undefined) return value;
  }
  return undefined;
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text.trim());
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The index of the brace closing the one at `start`, skipping braces inside JSON strings; -1 if none. */
function closingBrace(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i;
  }
  return -1;
}

// The parts of a Chat Completions answer this client reads.
interface ChatCompletion {
  model?: string;
  choices: Array<{ message?: { content?: string | null }; finish_reason?: string | null }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

interface ChatBody {
  model: string;
  messages: LlmMessage[];
  temperature?: number;
  max_tokens?: number;
  response_format?: object;
}

/** The outcome of one HTTP request. */
type Exchange =
  | { ok: true; completion: ChatCompletion }
  | { ok: false; kind: LlmErrorKind; status?: number; retryAfterMs?: number; param?: string; detail: string };

/** Bookkeeping of one complete() call across all its HTTP requests. */
interface CallState {
  attempts: number;
  usage: LlmUsage;
  model?: string;
}

type Checked<T> = { ok: true; value: T } | { ok: false; problem: string; truncated: boolean };

/** The server refused a mode's request format: the caller steps down to the next mode. */
class ModeRefused extends Error {
  constructor(readonly refusal: LlmError) {
    super(refusal.message);
  }
}

const RETRYABLE = new Set<LlmErrorKind>(['rate_limited', 'server_error', 'network', 'timeout']);
const SCHEMA_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export class OpenAiCompatibleProvider implements LlmProvider {
  readonly model: string;
  private readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly retryBaseMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly log?: OpenAiOptions['log'];
  private readonly observe?: OpenAiOptions['observe'];
  /** Where calls start: the first mode this server accepted. */
  private mode: StructuredMode = 'json_schema';
  /**
   * What this server's model accepts, learnt from its 400s: OpenAI's reasoning models (o1, o3,
   * gpt-5, ...) refuse `max_tokens` for `max_completion_tokens`, and any temperature but the
   * default.
   */
  private tokenParam: 'max_tokens' | 'max_completion_tokens' = 'max_tokens';
  private sendTemperature = true;

  constructor(opts: OpenAiOptions) {
    this.model = opts.model;
    const url = new URL(opts.baseUrl);
    url.pathname = `${url.pathname.replace(/\/+$/, '')}/chat/completions`;
    this.url = url.toString();
    this.headers = { 'content-type': 'application/json', accept: 'application/json' };
    if (opts.apiKey) {
      if (isAzureHost(url.hostname)) this.headers['api-key'] = opts.apiKey;
      else this.headers.authorization = `Bearer ${opts.apiKey}`;
    }
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.maxRetries = opts.maxRetries ?? 3;
    this.retryBaseMs = opts.retryBaseMs ?? 500;
    this.maxRetryAfterMs = opts.maxRetryAfterMs ?? 30_000;
    this.log = opts.log;
    this.observe = opts.observe;
    this.apiKey = opts.apiKey;
  }

  private readonly apiKey?: string;

  /**
   * An error answer's text without the API key: it reaches the draft's rationale and the
   * guardrails' warning, which SDRs read, and a proxy or a local server that echoes the
   * request's headers back would show them the key.
   */
  private withoutKey(text: string): string {
    let out = text.replace(/\b(Bearer)\s+[^\s"',;]+/gi, '$1 ***');
    if (this.apiKey && this.apiKey.length >= 4) out = out.split(this.apiKey).join('***');
    return out;
  }

  async complete<T>(req: LlmRequest<T>): Promise<LlmResult<T>> {
    const started = performance.now();
    let outcome = 'ok';
    try {
      return await this.call(req);
    } catch (err) {
      outcome = err instanceof LlmError ? err.kind : 'error';
      throw err;
    } finally {
      this.observe?.(outcome, (performance.now() - started) / 1000);
    }
  }

  private async call<T>(req: LlmRequest<T>): Promise<LlmResult<T>> {
    if (!SCHEMA_NAME.test(req.schemaName)) {
      throw new LlmError('bad_request', `invalid schemaName ${JSON.stringify(req.schemaName)}: 1 to 64 of [a-zA-Z0-9_-]`);
    }
    const started = performance.now();
    const state: CallState = { attempts: 0, usage: { promptTokens: 0, completionTokens: 0 } };
    const jsonSchema = toJsonSchema(req.schema);
    let mode = this.mode;
    for (;;) {
      try {
        const value = await this.completeIn(mode, req, jsonSchema, state);
        const { attempts, usage } = state;
        const model = state.model ?? this.model;
        const latencyMs = Math.round(performance.now() - started);
        this.log?.debug?.({ model, schemaName: req.schemaName, mode, attempts, latencyMs, usage }, 'LLM call done');
        return { value, model, usage, latencyMs, attempts, mode };
      } catch (err) {
        if (!(err instanceof ModeRefused)) throw err;
        const next = mode === 'json_schema' ? 'json_object' : 'prompt';
        this.log?.warn({ model: this.model, status: err.refusal.status, from: mode, to: next }, 'LLM server refused the structured output mode; falling back');
        mode = next;
      }
    }
  }

  /** One attempt at an answer in `mode`, with one repair round for an unusable answer. */
  private async completeIn<T>(mode: StructuredMode, req: LlmRequest<T>, jsonSchema: object, state: CallState): Promise<T> {
    const messages = mode === 'json_schema' ? req.messages : withInstruction(req.messages, jsonSchema);
    const body = (msgs: LlmMessage[]): ChatBody => ({
      model: this.model,
      messages: msgs,
      temperature: req.temperature,
      max_tokens: req.maxTokens,
      response_format:
        mode === 'json_schema'
          ? { type: 'json_schema', json_schema: { name: req.schemaName, schema: jsonSchema, strict: false } }
          : mode === 'json_object'
            ? { type: 'json_object' }
            : undefined,
    });

    let first: ChatCompletion;
    try {
      first = await this.send(body(messages), state);
    } catch (err) {
      // 400/422 to the first request of a mode means the server does not support its format.
      if (mode !== 'prompt' && err instanceof LlmError && err.kind === 'bad_request' && (err.status === 400 || err.status === 422)) {
        throw new ModeRefused(err);
      }
      throw err;
    }
    this.mode = mode;

    const checked = check(first, mode, req.schema);
    if (checked.ok) return checked.value;
    this.log?.warn({ model: this.model, schemaName: req.schemaName, mode, problem: checked.truncated ? 'truncated' : 'invalid' }, 'LLM answer unusable; asking once more');
    const feedback = checked.truncated
      ? 'Your answer was cut off at the token limit; answer again, shorter, as one complete JSON object.'
      : `Your answer was unusable: ${checked.problem}. Answer again with one JSON object that matches the schema, and nothing else.`;
    const repair: LlmMessage[] = [...messages, { role: 'assistant', content: contentOf(first) }, { role: 'user', content: feedback }];
    const second = check(await this.send(body(repair), state), mode, req.schema);
    if (second.ok) return second.value;
    throw new LlmError(second.truncated ? 'truncated' : 'invalid_output', `LLM answer for ${req.schemaName} still unusable after a repair request: ${second.problem}`);
  }

  /** One request, with retries of transient failures. */
  private async send(body: ChatBody, state: CallState): Promise<ChatCompletion> {
    for (let retry = 0; ; retry++) {
      state.attempts++;
      const x = await this.exchange(body);
      if (!x.ok && this.adapt(x, body)) {
        // The request named a parameter this model does not take: the same request again, in
        // the form it does (not a retry of a transient failure).
        retry--;
        continue;
      }
      if (x.ok) {
        // What the server says is untrusted: usage that is no whole count is not counted, and a
        // model name is text made storable (both are stored with the draft).
        const usage = x.completion.usage;
        if (usage && typeof usage === 'object') {
          state.usage.promptTokens += tokenCount(usage.prompt_tokens);
          state.usage.completionTokens += tokenCount(usage.completion_tokens);
        }
        if (typeof x.completion.model === 'string' && x.completion.model.trim()) state.model = storableText(x.completion.model).slice(0, 200);
        return x.completion;
      }
      if (!RETRYABLE.has(x.kind) || retry >= this.maxRetries) {
        const tries = retry + 1;
        // The server's text reaches a draft's rationale (stored): made storable.
        throw new LlmError(x.kind, storableText(`${this.withoutKey(x.detail)} (${tries} attempt${tries === 1 ? '' : 's'})`), { status: x.status });
      }
      const retryAfter = x.kind === 'rate_limited' ? x.retryAfterMs : undefined;
      const delayMs = Math.round(
        retryAfter !== undefined ? Math.min(retryAfter, this.maxRetryAfterMs) : this.retryBaseMs * 2 ** retry * (0.8 + Math.random() * 0.4),
      );
      this.log?.warn({ model: this.model, kind: x.kind, status: x.status, attempt: retry + 1, delayMs }, 'LLM request failed; retrying');
      await sleep(delayMs);
    }
  }

  /**
   * A 400 naming `max_tokens` or `temperature` as unsupported switches this provider, for this
   * and every later request, to the form the model takes. Returns whether anything changed (so
   * the request is worth sending again); each switch happens at most once.
   */
  private adapt(x: Extract<Exchange, { ok: false }>, body: ChatBody): boolean {
    if (x.status !== 400) return false;
    const names = (p: string) => x.param === p || x.detail.includes(`'${p}'`);
    if (this.tokenParam === 'max_tokens' && body.max_tokens !== undefined && (names('max_tokens') || x.detail.includes('max_completion_tokens'))) {
      this.tokenParam = 'max_completion_tokens';
      this.log?.warn({ model: this.model }, 'LLM model refuses max_tokens; using max_completion_tokens');
      return true;
    }
    if (this.sendTemperature && body.temperature !== undefined && names('temperature')) {
      this.sendTemperature = false;
      this.log?.warn({ model: this.model }, 'LLM model refuses a temperature; using its default');
      return true;
    }
    return false;
  }

  /** The request as this server's model takes it (see tokenParam, sendTemperature). */
  private wire(body: ChatBody): Record<string, unknown> {
    const { max_tokens, temperature, ...rest } = body;
    const out: Record<string, unknown> = { ...rest };
    if (temperature !== undefined && this.sendTemperature) out.temperature = temperature;
    if (max_tokens !== undefined) out[this.tokenParam] = max_tokens;
    return out;
  }

  private async exchange(body: ChatBody): Promise<Exchange> {
    const controller = new AbortController();
    // The timer covers the whole exchange, body included: a server may stall mid-answer.
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      const res = await fetch(this.url, { method: 'POST', headers: this.headers, body: JSON.stringify(this.wire(body)), signal: controller.signal });
      const text = await readCapped(res, MAX_ANSWER_BYTES);
      if (text === null) {
        controller.abort();
        return { ok: false, kind: 'server_error', status: res.status, detail: `LLM server answered ${res.status} with more than ${MAX_ANSWER_BYTES / 1_048_576} MB` };
      }
      if (res.ok) {
        const completion = parseCompletion(text);
        if (completion) return { ok: true, completion };
        return { ok: false, kind: 'server_error', status: res.status, detail: `LLM server answered ${res.status} without a chat completion` };
      }
      return {
        ok: false,
        kind: statusKind(res.status),
        status: res.status,
        retryAfterMs: res.status === 429 ? retryDelayFrom(res.headers, systemClock.now()) : undefined,
        param: errorParam(text),
        detail: `LLM server answered ${res.status}${errorDetail(text)}`,
      };
    } catch (err) {
      if (controller.signal.aborted) return { ok: false, kind: 'timeout', detail: `LLM request timed out after ${this.timeoutMs} ms` };
      return { ok: false, kind: 'network', detail: `LLM server unreachable: ${networkDetail(err)}` };
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The most of an answer read (a chat completion of drafts is a few KB): a server answering
 * without end (a misconfigured proxy, a model looping) would otherwise be read into memory
 * until the timeout.
 */
const MAX_ANSWER_BYTES = 4 * 1_048_576;

/** The response body as text, or null when it is longer than `max` bytes (reading stops there). */
async function readCapped(res: Response, max: number): Promise<string | null> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function statusKind(status: number): LlmErrorKind {
  if (status === 401 || status === 403) return 'auth';
  if (status === 429) return 'rate_limited';
  if (status >= 500) return 'server_error';
  return 'bad_request';
}

/** The server's own explanation of an error answer, when it gives one (OpenAI's {error:{message}} or text). */
function errorDetail(text: string): string {
  let message = text;
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const m = typeof body.error === 'string' ? body.error : (body.error?.message ?? body.message);
    if (typeof m === 'string') message = m;
  } catch {
    // not JSON: the text itself
  }
  message = message.trim().replace(/\s+/g, ' ').slice(0, 300);
  return message ? `: ${message}` : '';
}

/** The request parameter an OpenAI error answer blames ({error:{param}}), when it names one. */
function errorParam(text: string): string | undefined {
  try {
    const param = (JSON.parse(text) as { error?: { param?: unknown } }).error?.param;
    return typeof param === 'string' ? param : undefined;
  } catch {
    return undefined;
  }
}

/** fetch() reports connection failures as TypeError('fetch failed') with the socket error as cause. */
function networkDetail(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err as Error).message;
}

function parseCompletion(text: string): ChatCompletion | undefined {
  try {
    const body = JSON.parse(text) as ChatCompletion;
    // A first choice that is no object ({"choices": [null]}) is no completion either.
    return Array.isArray(body?.choices) && body.choices.length > 0 && body.choices[0] !== null && typeof body.choices[0] === 'object' ? body : undefined;
  } catch {
    return undefined;
  }
}

function contentOf(completion: ChatCompletion): string {
  const content: unknown = completion.choices[0].message?.content;
  return typeof content === 'string' ? content : '';
}

/** A token count as reported: a finite, non-negative number, rounded; anything else counts 0. */
function tokenCount(n: unknown): number {
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.round(n) : 0;
}

/**
 * The model's answer with every string (keys included) made storable: JSON may spell a NUL
 * (\u0000) or a lone surrogate, which PostgreSQL's text and jsonb refuse, and what the model
 * writes is stored (a draft's body and rationale, the rubric in its insight).
 */
function storableJson(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storableJson);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [storableText(k), storableJson(v)]));
  return value;
}

/** The JSON schema of what the model must write: the schema's input (what safeParse accepts). */
function toJsonSchema(schema: z.ZodType): object {
  // io 'input': fields with defaults are optional, transforms show their source type;
  // 'any' turns types JSON cannot express (dates, bigints) into {} instead of throwing.
  const json: Record<string, unknown> = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
  delete json.$schema;
  return json;
}

/** Tells a model without schema support what to answer, in the (first) system message. */
function withInstruction(messages: LlmMessage[], jsonSchema: object): LlmMessage[] {
  const instruction = `Answer with one JSON object and nothing else (no prose, no code fences). It must match this JSON schema:\n${JSON.stringify(jsonSchema)}`;
  const i = messages.findIndex((m) => m.role === 'system');
  if (i < 0) return [{ role: 'system', content: instruction }, ...messages];
  return messages.map((m, j) => (j === i ? { ...m, content: `${m.content}\n\n${instruction}` } : m));
}

function check<T>(completion: ChatCompletion, mode: StructuredMode, schema: z.ZodType<T>): Checked<T> {
  if (completion.choices[0].finish_reason === 'length') return { ok: false, truncated: true, problem: 'the answer was cut off at the token limit' };
  const content = contentOf(completion);
  let json: unknown;
  if (mode === 'prompt') json = extractJson(content);
  else {
    try {
      json = JSON.parse(content);
    } catch {
      json = undefined;
    }
  }
  if (json === undefined) return { ok: false, truncated: false, problem: 'it is not valid JSON' };
  const parsed = schema.safeParse(storableJson(json));
  if (!parsed.success) return { ok: false, truncated: false, problem: `it does not match the schema (${summarizeIssues(parsed.error.issues)})` };
  return { ok: true, value: parsed.data };
}

function summarizeIssues(issues: readonly z.core.$ZodIssue[]): string {
  const shown = issues.slice(0, 10).map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`);
  if (issues.length > shown.length) shown.push(`and ${issues.length - shown.length} more`);
  return shown.join('; ');
}
