// A fake OpenAI-compatible server for the LLM tests: real HTTP on 127.0.0.1 speaking the Chat
// Completions protocol. Tests queue the answers (JSON, raw text, HTTP errors, a hang) and read
// back every request received. It can also play a server that refuses the json_schema or
// json_object response formats, as many self-hosted servers do.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

export type FakeAnswer =
  /** A completion whose content is JSON.stringify(json). */
  | { json: unknown; finishReason?: string; usage?: Usage; model?: string }
  /** A completion with this raw text as content. */
  | { content: string; finishReason?: string; usage?: Usage; model?: string }
  /** An HTTP error answer; a string body is sent as is, anything else as JSON. */
  | { status: number; body?: unknown; headers?: Record<string, string> }
  /** Never answers (until close). */
  | { hang: true }
  /** A 200 whose JSON body is this value as is (a malformed completion). */
  | { raw: unknown }
  | ((req: FakeRequest) => FakeAnswer | Promise<FakeAnswer>);

export interface FakeRequest {
  method: string;
  /** The request target, query string included. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body, or the raw text when it is not JSON. */
  body: any;
}

export interface FakeOpenAiOptions {
  /** Answer 400 to every request asking for response_format json_schema (the queue is untouched). */
  rejectJsonSchema?: boolean;
  /** Likewise for json_object. */
  rejectJsonObject?: boolean;
  /** Answers when the queue is empty; default a 500. */
  fallback?: FakeAnswer;
}

const COMPLETIONS_PATH = '/v1/chat/completions';

export class FakeOpenAi {
  readonly requests: FakeRequest[] = [];
  private readonly queue: FakeAnswer[] = [];
  private completions = 0;

  private constructor(
    private readonly server: http.Server,
    readonly baseUrl: string,
    private readonly opts: FakeOpenAiOptions,
  ) {}

  static async start(opts: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
    const server = http.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const fake = new FakeOpenAi(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, opts);
    server.on('request', (req, res) => {
      fake.handle(req, res).catch((err: Error) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`fake-openai: ${err.message}`);
      });
    });
    return fake;
  }

  /** Queues answers, given in order to the next completion requests. */
  enqueue(...answers: FakeAnswer[]): void {
    this.queue.push(...answers);
  }

  /** Stops the server, ending open connections (and so hanging requests). */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    const request: FakeRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
    this.requests.push(request);

    const pathname = new URL(request.path, 'http://fake').pathname;
    if (request.method !== 'POST' || pathname !== COMPLETIONS_PATH) {
      return send(res, 404, { error: { message: `Unknown request URL: ${request.method} ${pathname}`, type: 'invalid_request_error' } });
    }
    const format = body?.response_format?.type;
    if ((format === 'json_schema' && this.opts.rejectJsonSchema) || (format === 'json_object' && this.opts.rejectJsonObject)) {
      return send(res, 400, { error: { message: `response_format ${format} is not supported`, type: 'invalid_request_error' } });
    }
    let answer = this.queue.shift() ?? this.opts.fallback ?? { status: 500 };
    while (typeof answer === 'function') answer = await answer(request);

    if ('hang' in answer) return;
    if ('raw' in answer) return send(res, 200, answer.raw);
    if ('status' in answer) {
      const errorBody = answer.body ?? { error: { message: `fake error ${answer.status}`, type: 'server_error' } };
      return send(res, answer.status, errorBody, answer.headers);
    }
    const content = 'json' in answer ? JSON.stringify(answer.json) : answer.content;
    // Without a given usage, a rough count of about four characters a token.
    const usage = answer.usage ?? { prompt_tokens: Math.ceil(JSON.stringify(body?.messages ?? '').length / 4), completion_tokens: Math.ceil(content.length / 4) };
    send(res, 200, {
      id: `chatcmpl-fake-${++this.completions}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: answer.model ?? body?.model ?? 'fake-model',
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: answer.finishReason ?? 'stop' }],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    });
  }
}

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json', ...headers });
  res.end(text);
}
