import assert from 'node:assert/strict';
import { z } from 'zod';
import { OpenAiCompatibleProvider, LlmError, extractJson, isAzureHost, parseRetryAfter, retryDelayFrom, type OpenAiOptions, type LlmErrorKind } from '../../src/adapters/llm.ts';
import { FakeOpenAi } from '../support/fake-openai.ts';
// The daemon's zod messages (set globally, as every entry point does): this file alone ran with zod's defaults.
import '../../src/shared/zod-messages.ts';

const Variants = z.object({
  variants: z.array(z.object({ subject: z.string().min(1), body: z.string() })).min(1),
  tone: z.enum(['formal', 'casual']).default('formal'),
});

const good = { variants: [{ subject: 'Re: pricing', body: 'Happy to help.' }] };
const bad = { variants: [{ subject: '', body: 'x' }] };
const messages = [
  { role: 'system' as const, content: 'You write replies.' },
  { role: 'user' as const, content: 'Draft a reply.' },
];
const request = { messages, schema: Variants, schemaName: 'draft_variants' };

/** OpenAI's 400 for a request parameter the model does not take. */
const refusal = (param: string, code: string, message: string) => ({
  status: 400,
  body: { error: { message, type: 'invalid_request_error', param, code } },
});

/** Asserts that `p` rejects with an LlmError of this kind, and returns it. */
async function rejectsWith(p: Promise<unknown>, kind: LlmErrorKind): Promise<LlmError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof LlmError, `expected an LlmError, got ${String(err)}`);
    assert.equal(err.kind, kind, err.message);
    return err;
  }
  assert.fail(`expected an LlmError ${kind}`);
}

describe('LLM adapter (OpenAI-compatible)', () => {
  const servers: FakeOpenAi[] = [];
  const warnings: object[] = [];

  async function fake(opts?: Parameters<typeof FakeOpenAi.start>[0]): Promise<FakeOpenAi> {
    const server = await FakeOpenAi.start(opts);
    servers.push(server);
    return server;
  }

  function provider(server: FakeOpenAi, opts: Partial<OpenAiOptions> = {}): OpenAiCompatibleProvider {
    return new OpenAiCompatibleProvider({
      baseUrl: server.baseUrl,
      apiKey: 'sk-test-secret',
      model: 'gpt-test',
      retryBaseMs: 10,
      log: { warn: (obj, msg) => warnings.push({ ...obj, msg }) },
      ...opts,
    });
  }

  const lastUserMessage = (body: any): string => body.messages.at(-1).content;

  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
    // Nothing the adapter logs may carry the key or the prompt.
    for (const w of warnings.splice(0)) {
      const text = JSON.stringify(w);
      assert.ok(!text.includes('sk-test-secret') && !text.includes('Draft a reply'), text);
    }
  });

  it('asks for a JSON schema and returns the validated value with usage and the served model', async () => {
    const server = await fake();
    server.enqueue({ json: good, model: 'gpt-test-2024-08-06', usage: { prompt_tokens: 120, completion_tokens: 30 } });
    const result = await provider(server).complete({ ...request, temperature: 0.4, maxTokens: 500 });

    assert.deepEqual(result.value, { ...good, tone: 'formal' });
    assert.equal(result.model, 'gpt-test-2024-08-06');
    assert.deepEqual(result.usage, { promptTokens: 120, completionTokens: 30 });
    assert.equal(result.mode, 'json_schema');
    assert.equal(result.attempts, 1);
    assert.ok(result.latencyMs >= 0);

    assert.equal(server.requests.length, 1);
    const { method, path, headers, body } = server.requests[0];
    assert.equal(method, 'POST');
    assert.equal(path, '/v1/chat/completions');
    assert.equal(headers.authorization, 'Bearer sk-test-secret');
    assert.equal(headers['api-key'], undefined);
    assert.equal(body.model, 'gpt-test');
    assert.deepEqual(body.messages, messages);
    assert.equal(body.temperature, 0.4);
    assert.equal(body.max_tokens, 500);
    assert.equal(body.response_format.type, 'json_schema');
    const { name, strict, schema } = body.response_format.json_schema;
    assert.equal(name, 'draft_variants');
    assert.equal(strict, false);
    assert.equal(schema.$schema, undefined);
    assert.equal(schema.type, 'object');
    // The schema describes what the model writes: a field with a default is optional.
    assert.deepEqual(schema.required, ['variants']);
    assert.deepEqual(schema.properties.variants.items.required, ['subject', 'body']);
    assert.deepEqual(schema.properties.tone.enum, ['formal', 'casual']);
  });

  it('sends no Authorization header without an API key (Ollama, llama.cpp)', async () => {
    const server = await fake();
    server.enqueue({ json: good });
    await provider(server, { apiKey: undefined }).complete(request);
    assert.equal(server.requests[0].headers.authorization, undefined);
  });

  it('asks once more when the answer is not JSON, saying so', async () => {
    const server = await fake();
    server.enqueue({ content: '{"variants": [{"subject": "Hi",' }, { json: good });
    const result = await provider(server).complete(request);
    assert.equal(result.attempts, 2);
    assert.deepEqual(result.value.variants, good.variants);

    const retry = server.requests[1].body;
    assert.deepEqual(retry.messages.slice(0, 2), messages);
    assert.deepEqual(retry.messages[2], { role: 'assistant', content: '{"variants": [{"subject": "Hi",' });
    assert.equal(retry.messages[3].role, 'user');
    assert.match(lastUserMessage(retry), /not valid JSON/);
    assert.equal(retry.response_format.type, 'json_schema');
  });

  it('gives up with invalid_output when the repaired answer still fails the schema', async () => {
    const server = await fake();
    server.enqueue({ json: bad }, { json: { variants: [] } });
    const err = await rejectsWith(provider(server).complete(request), 'invalid_output');
    assert.equal(server.requests.length, 2);
    // The feedback names the failing field by its path.
    assert.match(lastUserMessage(server.requests[1].body), /variants\.0\.subject: must not be empty/);
    assert.match(err.message, /draft_variants/);
    assert.match(err.message, /variants: must have at least/);
  });

  it('honours Retry-After on 429, then succeeds', async () => {
    const server = await fake();
    server.enqueue({ status: 429, headers: { 'retry-after': '1' }, body: { error: { message: 'Rate limit reached', type: 'requests' } } }, { json: good });
    const started = performance.now();
    const result = await provider(server, { retryBaseMs: 1 }).complete(request);
    assert.ok(performance.now() - started >= 900, 'waited for Retry-After');
    assert.equal(result.attempts, 2);
    assert.equal(server.requests.length, 2);
  });

  it('retries 500 and 502 with backoff, then succeeds', async () => {
    const server = await fake();
    server.enqueue({ status: 500 }, { status: 502, body: 'Bad Gateway' }, { json: good, usage: { prompt_tokens: 7, completion_tokens: 3 } });
    const result = await provider(server).complete(request);
    assert.equal(result.attempts, 3);
    assert.deepEqual(result.usage, { promptTokens: 7, completionTokens: 3 });
    assert.equal(warnings.length, 2);
  });

  it('fails with server_error after maxRetries retries of a 500', async () => {
    const server = await fake({ fallback: { status: 500 } });
    const err = await rejectsWith(provider(server, { maxRetries: 2 }).complete(request), 'server_error');
    assert.equal(server.requests.length, 3);
    assert.equal(err.status, 500);
    assert.match(err.message, /500.*3 attempts/);
  });

  it('reads at most 4 MB of an answer: a longer one is a server error (retried), never read to its end', async () => {
    const server = await fake({ fallback: { raw: { choices: [{ message: { content: 'x'.repeat(5 * 1_048_576) } }] } } });
    const err = await rejectsWith(provider(server, { maxRetries: 1 }).complete(request), 'server_error');
    assert.equal(server.requests.length, 2);
    assert.match(err.message, /more than 4 MB.*2 attempts/);
  });

  it('times out a hanging request and retries it within maxRetries', async () => {
    const server = await fake({ fallback: { hang: true } });
    const err = await rejectsWith(provider(server, { timeoutMs: 200, maxRetries: 1 }).complete(request), 'timeout');
    assert.equal(server.requests.length, 2);
    assert.match(err.message, /200 ms.*2 attempts/);
  });

  it('fails with network when nothing listens', async () => {
    const server = await fake();
    const baseUrl = server.baseUrl;
    await server.close();
    const err = await rejectsWith(provider(server, { baseUrl, maxRetries: 1 }).complete(request), 'network');
    assert.match(err.message, /ECONNREFUSED.*2 attempts/);
  });

  it('asks for a shorter answer after finish_reason length', async () => {
    const server = await fake();
    server.enqueue(
      { content: '{"variants": [{"subject": "Re: pricing", "body": "Happy', finishReason: 'length', usage: { prompt_tokens: 50, completion_tokens: 100 } },
      { json: good, usage: { prompt_tokens: 160, completion_tokens: 40 } },
    );
    const result = await provider(server).complete(request);
    assert.deepEqual(result.value.variants, good.variants);
    assert.deepEqual(result.usage, { promptTokens: 210, completionTokens: 140 });
    assert.match(lastUserMessage(server.requests[1].body), /cut off at the token limit; answer again, shorter/);
  });

  it('fails with truncated when the answer is cut off twice', async () => {
    const server = await fake();
    server.enqueue({ content: '{"variants": [', finishReason: 'length' }, { content: '{"variants": [{', finishReason: 'length' });
    await rejectsWith(provider(server).complete(request), 'truncated');
    assert.equal(server.requests.length, 2);
  });

  it('falls back to json_object when json_schema is refused, and starts there next time', async () => {
    const server = await fake({ rejectJsonSchema: true });
    server.enqueue({ json: good }, { json: good });
    const llm = provider(server);
    const first = await llm.complete(request);
    assert.equal(first.mode, 'json_object');
    assert.equal(first.attempts, 2);
    assert.deepEqual(
      server.requests.map((r) => r.body.response_format?.type),
      ['json_schema', 'json_object'],
    );
    // The schema travels in the system message instead.
    const system = server.requests[1].body.messages[0];
    assert.equal(system.role, 'system');
    assert.match(system.content, /^You write replies\.\n\nAnswer with one JSON object/);
    assert.match(system.content, /"required":\["variants"\]/);
    assert.equal(server.requests[1].body.messages.length, 2);

    const second = await llm.complete(request);
    assert.equal(second.mode, 'json_object');
    assert.equal(second.attempts, 1);
    assert.equal(server.requests[2].body.response_format.type, 'json_object');
  });

  it('falls back to prompt mode and finds the JSON in prose and fences', async () => {
    const server = await fake({ rejectJsonSchema: true, rejectJsonObject: true });
    server.enqueue({ content: `Sure! Here are your drafts:\n\n\`\`\`json\n${JSON.stringify(good, null, 2)}\n\`\`\`\n\nLet me know {if} you need more.` });
    const result = await provider(server).complete({ ...request, messages: [messages[1]] });
    assert.equal(result.mode, 'prompt');
    assert.equal(result.attempts, 3);
    assert.deepEqual(result.value.variants, good.variants);
    const last = server.requests[2].body;
    assert.equal(last.response_format, undefined);
    // No system message of its own: the instruction becomes the first one.
    assert.equal(last.messages[0].role, 'system');
    assert.match(last.messages[0].content, /^Answer with one JSON object/);
    assert.deepEqual(last.messages[1], messages[1]);
  });

  it('a 400 in prompt mode is bad_request, not retried', async () => {
    const server = await fake({ rejectJsonSchema: true, rejectJsonObject: true });
    server.enqueue({ status: 400, body: { error: { message: "This model's maximum context length is 8192 tokens", type: 'invalid_request_error' } } });
    const err = await rejectsWith(provider(server).complete(request), 'bad_request');
    assert.equal(err.status, 400);
    assert.match(err.message, /maximum context length/);
    assert.equal(server.requests.length, 3);
  });

  it('401 is auth: no retry, no fallback', async () => {
    const server = await fake();
    server.enqueue({ status: 401, body: { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } } });
    const err = await rejectsWith(provider(server).complete(request), 'auth');
    assert.equal(err.status, 401);
    assert.equal(server.requests.length, 1);
  });

  it('an error answer that echoes the request headers: the error names no key (it reaches SDRs in the rationale)', async () => {
    const server = await fake();
    server.enqueue({ status: 401, body: { error: { message: 'proxy refused: header authorization=Bearer sk-test-secret, key sk-test-secret', type: 'auth' } } });
    const err = await rejectsWith(provider(server).complete(request), 'auth');
    assert.ok(!err.message.includes('sk-test-secret'), err.message);
    assert.match(err.message, /Bearer \*\*\*, key \*\*\*/);
  });

  it('a wrong base URL (404) is bad_request: no retry, no fallback', async () => {
    const server = await fake();
    const err = await rejectsWith(provider(server, { baseUrl: server.baseUrl.replace(/\/v1$/, '/v2') }).complete(request), 'bad_request');
    assert.equal(err.status, 404);
    assert.deepEqual(server.requests.map((r) => r.path), ['/v2/chat/completions']);
  });

  it('keeps the query string of the base URL (Azure api-version)', async () => {
    const server = await fake();
    server.enqueue({ json: good });
    await provider(server, { baseUrl: `${server.baseUrl}?api-version=2024-10-21` }).complete(request);
    assert.equal(server.requests[0].path, '/v1/chat/completions?api-version=2024-10-21');
  });

  it('refuses a schemaName the json_schema format would reject', async () => {
    const server = await fake();
    await rejectsWith(provider(server).complete({ ...request, schemaName: 'draft variants' }), 'bad_request');
    assert.equal(server.requests.length, 0);
  });

  it('recognises Azure OpenAI hosts', () => {
    assert.ok(isAzureHost('mailgate.openai.azure.com'));
    assert.ok(isAzureHost('MailGate.OpenAI.Azure.com.'));
    assert.ok(isAzureHost('eastus.cognitiveservices.azure.com'));
    assert.ok(!isAzureHost('api.openai.com'));
    assert.ok(!isAzureHost('openai.azure.com.evil.example'));
    assert.ok(!isAzureHost('127.0.0.1'));
  });

  it('switches to max_completion_tokens when the model refuses max_tokens, and remembers it', async () => {
    const server = await fake();
    server.enqueue(
      refusal('max_tokens', 'unsupported_parameter', "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."),
      { json: good },
      { json: good },
    );
    const llm = provider(server);
    const result = await llm.complete({ ...request, maxTokens: 700 });
    assert.equal(result.mode, 'json_schema', 'a refused parameter is not a refused response format');
    assert.equal(server.requests.length, 2);
    assert.equal(server.requests[0].body.max_tokens, 700);
    assert.equal(server.requests[1].body.max_tokens, undefined);
    assert.equal(server.requests[1].body.max_completion_tokens, 700);
    assert.equal(server.requests[1].body.response_format.type, 'json_schema');
    // The next call starts in the form the model takes.
    await llm.complete({ ...request, maxTokens: 300 });
    assert.equal(server.requests.length, 3);
    assert.equal(server.requests[2].body.max_completion_tokens, 300);
    assert.equal(server.requests[2].body.max_tokens, undefined);
  });

  it('drops the temperature when the model only takes its default', async () => {
    const server = await fake();
    server.enqueue(
      refusal('temperature', 'unsupported_value', "Unsupported value: 'temperature' does not support 0.4 with this model. Only the default (1) value is supported."),
      { json: good },
    );
    const result = await provider(server).complete({ ...request, temperature: 0.4 });
    assert.equal(result.mode, 'json_schema');
    assert.equal(server.requests[0].body.temperature, 0.4);
    assert.ok(!('temperature' in server.requests[1].body));
  });

  it('still fails a 400 that names no parameter it can change, after the format fallbacks', async () => {
    const server = await fake({ fallback: { status: 400, body: { error: { message: 'messages: too long', param: 'messages' } } } });
    await rejectsWith(provider(server).complete({ ...request, temperature: 0.4, maxTokens: 100 }), 'bad_request');
    // json_schema, json_object, prompt: one request each, none re-sent for a parameter.
    assert.equal(server.requests.length, 3);
    for (const r of server.requests) assert.equal(r.body.max_tokens, 100);
  });

  it("honours Azure's retry-after-ms over a whole-second Retry-After", async () => {
    const server = await fake();
    server.enqueue({ status: 429, headers: { 'retry-after-ms': '60', 'retry-after': '30' }, body: { error: { message: 'Rate limit' } } }, { json: good });
    const started = performance.now();
    const result = await provider(server, { retryBaseMs: 1 }).complete(request);
    const waited = performance.now() - started;
    assert.ok(waited >= 55 && waited < 5000, `waited ${waited} ms`);
    assert.equal(result.attempts, 2);
  });

  it('reads the delay of a 429 from retry-after-ms, x-ms-retry-after-ms or Retry-After', () => {
    const now = new Date('2026-01-05T09:00:00Z');
    const h = (o: Record<string, string>) => new Headers(o);
    assert.equal(retryDelayFrom(h({ 'retry-after-ms': '250', 'retry-after': '1' }), now), 250);
    assert.equal(retryDelayFrom(h({ 'x-ms-retry-after-ms': '1500' }), now), 1500);
    assert.equal(retryDelayFrom(h({ 'retry-after-ms': 'soon', 'retry-after': '2' }), now), 2000);
    assert.equal(retryDelayFrom(h({}), now), undefined);
  });

  it('reads Retry-After as seconds or an HTTP-date', () => {
    const now = new Date('2026-01-05T09:00:00Z');
    assert.equal(parseRetryAfter('2', now), 2000);
    assert.equal(parseRetryAfter('0.5', now), 500);
    assert.equal(parseRetryAfter('Mon, 05 Jan 2026 09:00:07 GMT', now), 7000);
    assert.equal(parseRetryAfter('Mon, 05 Jan 2026 08:59:00 GMT', now), 0);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter(null, now), undefined);
  });

  it('extractJson finds the first JSON object in model text', () => {
    assert.deepEqual(extractJson('{"a": 1}'), { a: 1 });
    assert.deepEqual(extractJson('  \n{"a": {"b": [1, 2]}}\n'), { a: { b: [1, 2] } });
    assert.deepEqual(extractJson('```json\n{"a": 1}\n```'), { a: 1 });
    assert.deepEqual(extractJson('```\n{"a": 1}\n```'), { a: 1 });
    assert.deepEqual(extractJson('Here it is: {"a": "x"} — enjoy.'), { a: 'x' });
    // Braces inside strings and before the object do not confuse it.
    assert.deepEqual(extractJson('Use {placeholders} like {this: "one"}: {"t": "Hi {{name}}, }"}'), { t: 'Hi {{name}}, }' });
    assert.deepEqual(extractJson('an unclosed { and then {"a": "\\"q\\" {"}'), { a: '"q" {' });
    // Fenced blocks win over braces in the prose around them.
    assert.deepEqual(extractJson('Example: {"a": 0}\n```json\n{"a": 2}\n```'), { a: 2 });
    assert.deepEqual(extractJson('first {"a": 1} then {"a": 2}'), { a: 1 });
    assert.equal(extractJson('no JSON here'), undefined);
    assert.equal(extractJson('{"a": 1,'), undefined);
    assert.equal(extractJson('[1, 2]'), undefined);
    assert.equal(extractJson(''), undefined);
  });
});
