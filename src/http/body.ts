import zlib from 'node:zlib';
import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import type { Context } from 'koa';
import { ApiError } from '../shared/errors.ts';
import { findTextViolation, MAX_JSON_DEPTH } from '../shared/text.ts';

declare module 'koa' {
  interface Request {
    body?: unknown;
    /** The decoded request text; undefined when the body was not JSON (or not read). */
    rawBody: string;
  }
}

// DELETE too: a DELETE that carries a body gets it checked like any other (the routes take none).
const PARSED_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const ENCODINGS = 'identity, gzip, deflate or br';

class BodyTooLarge extends Error {}
class BodyUnreadable extends Error {}

function decoderFor(encoding: string): Transform | null {
  switch (encoding) {
    case '':
    case 'identity':
      return null;
    // Like the inflation package did for bodyparser: zlib auto-detects gzip and zlib headers.
    case 'gzip':
    case 'x-gzip':
    case 'deflate':
      return zlib.createUnzip();
    case 'br':
      return zlib.createBrotliDecompress();
    default:
      throw new ApiError(415, 'unsupported_media_type', `unsupported Content-Encoding "${encoding}"; send the body as ${ENCODINGS}`);
  }
}

/** The request's bytes, decompressed, at most `limit` of them (after decompression: no zip bombs). */
function collect(req: IncomingMessage, decoder: Transform | null, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const source = decoder ? req.pipe(decoder) : req;
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: Error | null) => {
      if (done) return;
      done = true;
      if (decoder) {
        req.unpipe(decoder);
        decoder.destroy();
      }
      if (!err) return resolve(Buffer.concat(chunks, size));
      // Drain what is left so the error response can still be written on this connection.
      req.resume();
      reject(err);
    };
    source.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) finish(new BodyTooLarge());
      else chunks.push(chunk);
    });
    source.on('end', () => finish(null));
    source.on('error', (err) => finish(decoder && source === decoder ? new BodyUnreadable(err.message) : err));
    if (decoder) req.on('error', (err) => finish(err));
    req.on('aborted', () => finish(new Error('request aborted')));
  });
}

/** The largest request body the API reads, after decompression (413 beyond). */
export const BODY_LIMIT_BYTES = 10 * 1024 * 1024;

/**
 * Reads a JSON request body (the API takes nothing else): the one place where a body's bytes
 * become a value. Content-Encoding identity, gzip, deflate or br (others 415), the size limit
 * after decompression (413), strict UTF-8, a JSON object or array, and the text rule of
 * shared/text.ts (NUL, lone surrogates, numbers past a double's range, nesting deeper than
 * MAX_JSON_DEPTH) are checked here, before any validator sees the body; each refusal is a 4xx
 * naming what is wrong. A route calls it once the caller is authenticated (http/route.ts), so
 * an unauthenticated request is 401 without its body being read and decompressed, and a request
 * for no route is 404; Node discards an unread body.
 */
export async function readJsonBody(ctx: Context, opts: { textRule?: boolean } = {}, limitBytes = BODY_LIMIT_BYTES): Promise<void> {
  const limitText = `${Math.round(limitBytes / (1024 * 1024))} MB`;
  if (!PARSED_METHODS.has(ctx.method)) return;
  if (!ctx.request.is('application/json', '+json')) {
    // The route answers 400 "must be JSON" when such a request has a body it needs.
    ctx.request.body = {};
    return;
  }
  // JSON is UTF-8 (RFC 8259); a body declared in another charset would be misread, not converted.
  const charset = ctx.request.charset.toLowerCase();
  if (charset && charset !== 'utf-8' && charset !== 'utf8')
    throw new ApiError(415, 'unsupported_media_type', `unsupported charset "${charset.slice(0, 40)}"; send the JSON body as UTF-8`);
  const encoding = (ctx.get('content-encoding') || '').trim().toLowerCase();
  const decoder = decoderFor(encoding);
  if (!decoder && ctx.request.length !== undefined && ctx.request.length > limitBytes) throw tooLarge(limitText);
  let bytes: Buffer;
  try {
    bytes = await collect(ctx.req, decoder, limitBytes);
  } catch (err) {
    if (err instanceof BodyTooLarge) throw tooLarge(limitText);
    if (err instanceof BodyUnreadable)
      throw ApiError.invalid(`request body is not valid ${encoding} data (Content-Encoding: ${encoding}): ${err.message}`);
    throw ApiError.invalid('the request body was not received completely');
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw ApiError.invalid('request body is not valid UTF-8');
  }
  ctx.request.rawBody = text;
  const trimmed = text.trim();
  if (trimmed === '') {
    ctx.request.body = {};
    return;
  }
  if (trimmed[0] !== '{' && trimmed[0] !== '[') throw ApiError.invalid('malformed JSON body: expected a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw ApiError.invalid(`malformed JSON body: ${(err as Error).message}`);
  }
  const violation = opts.textRule === false ? null : findTextViolation(value, [], MAX_JSON_DEPTH);
  if (violation) {
    const where = violation.field ? `body ${violation.field}` : 'body';
    throw ApiError.invalid(`${where}: ${violation.message}`, { errors: [{ ...(violation.field ? { field: violation.field } : {}), message: violation.message }] });
  }
  ctx.request.body = value;
}

function tooLarge(limitText: string): ApiError {
  return new ApiError(413, 'payload_too_large', `request body exceeds the ${limitText} limit (after decompression)`);
}
