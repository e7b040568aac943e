import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../../shared/errors.ts';
import { escapeHtml } from '../sending/render.ts';
import type { Services } from '../../services.ts';
import { errorResponse, type StaticOperation } from '../../http/openapi.ts';

// A transparent 1x1 GIF.
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
button{font-size:1rem;padding:.6rem 1.2rem;border-radius:.4rem;border:1px solid #888;background:#fff;cursor:pointer}</style></head>
<body>${body}</body></html>`;
}

const services = (ctx: Context): Services => ctx.state.services;

/**
 * An unsubscribe link that is not one (cut or changed on its way, forged): 404 and nothing
 * changes. A browser, which asks for a page first, gets one saying what to do instead of the
 * API's JSON envelope; any other client (no Accept, or JSON first) gets the envelope.
 */
function unknownUnsubscribeLink(ctx: Context): void {
  if (ctx.accepts('json', 'html') !== 'html') throw new ApiError(404, 'not_found', 'unknown unsubscribe link');
  ctx.status = 404;
  ctx.set('Cache-Control', 'no-store');
  ctx.type = 'text/html';
  ctx.body = page(
    'Link not valid',
    '<h1>This unsubscribe link is not valid</h1><p>It may have been cut short or changed on its way to you. Nothing was changed.</p>' +
      '<p>To stop these emails, reply to one of them and ask to be removed.</p>',
  );
}

/**
 * A pixel whose token is not one (changed on its way, forged): 404 and nothing recorded. A
 * mail client loading images (it asks for an image before JSON) gets the same transparent GIF,
 * so the message shows no broken-image icon; any other client gets the API's envelope.
 */
function unknownPixel(ctx: Context): void {
  if (ctx.accepts('json', 'image/gif') !== 'image/gif') throw new ApiError(404, 'not_found', 'unknown tracking link');
  ctx.status = 404;
  pixel(ctx);
}

/** The transparent GIF, never cached (each load of a known token is an open). */
function pixel(ctx: Context): void {
  ctx.set('Cache-Control', 'no-store, max-age=0');
  ctx.type = 'image/gif';
  ctx.body = PIXEL;
}

/** The public links put into emails: no API key, signed tokens instead. */
export function mountTrackingRoutes(router: Router) {
  router.get('/t/o/:token', async (ctx) => {
    // A HEAD (link scanners, security gateways) is no open: the same answer, nothing recorded.
    const known = ctx.method === 'HEAD' ? await services(ctx).tracking.pixelKnown(ctx.params.token) : await services(ctx).tracking.open(ctx.params.token);
    if (!known) return unknownPixel(ctx);
    pixel(ctx);
  });

  // The form posts back to the page's own address (no action): behind a proxy that serves
  // mailgate under a path (MAILGATE_PUBLIC_URL with a path), /u/... would miss it.
  router.get('/u/:token', async (ctx) => {
    const target = await services(ctx).tracking.unsubscribeTarget(ctx.params.token);
    if (!target) return unknownUnsubscribeLink(ctx);
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'text/html';
    // Unsubscribed already (the mail client's one-click, an earlier visit, a reply asking to be
    // removed): asked "Stop all emails?" again, the prospect took the first unsubscribe to have failed.
    if (target.suppressed) {
      ctx.body = page('Unsubscribed', `<h1>You are unsubscribed</h1><p><strong>${escapeHtml(target.email)}</strong> will not receive further emails from us.</p>`);
      return;
    }
    ctx.body = page(
      'Unsubscribe',
      `<h1>Unsubscribe</h1><p>Stop all emails to <strong>${escapeHtml(target.email)}</strong>?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`,
    );
  });

  // RFC 8058 one-click: mail clients POST "List-Unsubscribe=One-Click"; the page's form too.
  router.post('/u/:token', async (ctx) => {
    const done = await services(ctx).tracking.unsubscribe(ctx.params.token);
    if (!done) return unknownUnsubscribeLink(ctx);
    ctx.set('Cache-Control', 'no-store');
    if (ctx.accepts('html', 'json') === 'json') {
      ctx.body = { unsubscribed: true };
      return;
    }
    ctx.type = 'text/html';
    ctx.body = page('Unsubscribed', '<h1>You are unsubscribed</h1><p>You will not receive further emails from us.</p>');
  });
}

const token = { name: 'token', in: 'path', required: true, description: 'the signed token of the link in the email', schema: { type: 'string' } };
const html = (description: string) => ({ description, content: { 'text/html': { schema: { type: 'string' } } } });
const common = { tags: ['Tracking'], security: [], 'x-mailgate-role': 'none', parameters: [token] };
const role = 'Role: none; no API key (the token is signed with the secret key).';
const notFound = errorResponse(['not_found']);
// An unknown unsubscribe link: the envelope, or a page for a client that asks for HTML first.
const linkNotFound = { ...notFound, content: { ...(notFound.content as Record<string, unknown>), 'text/html': { schema: { type: 'string' } } } };
// An unknown pixel: the envelope, or the same GIF for a client that asks for an image first.
const pixelNotFound = { ...notFound, content: { ...(notFound.content as Record<string, unknown>), 'image/gif': { schema: { type: 'string', contentMediaType: 'image/gif' } } } };
const internal = errorResponse(['internal_error']);
// The database unavailable, or a conflict left after the retries (http/errors.ts).
const unavailable = { $ref: '#/components/responses/TemporarilyUnavailable' };

/** The OpenAPI description of the routes above (they are mounted outside apiRoutes). */
export const trackingOperations: StaticOperation[] = [
  {
    method: 'get',
    path: '/t/o/{token}',
    operation: {
      ...common,
      operationId: 'trackOpen',
      summary: 'The open-tracking pixel: records an open of the message',
      description: `${role} Put into emails of campaigns with trackOpens; not cached.`,
      responses: {
        '200': { description: 'A transparent 1x1 GIF', content: { 'image/gif': { schema: { type: 'string', contentMediaType: 'image/gif' } } } },
        '404': pixelNotFound,
        '500': internal,
        '503': unavailable,
      },
    },
  },
  {
    method: 'get',
    path: '/u/{token}',
    operation: {
      ...common,
      operationId: 'getUnsubscribePage',
      summary: 'The unsubscribe page: asks to confirm (changes nothing)',
      description: `${role} Its form POSTs to the same URL. An address on the workspace's suppression list already gets a page saying it is unsubscribed, without the form.`,
      responses: { '200': html('A page with a confirm button, or saying the address is unsubscribed already'), '404': linkNotFound, '500': internal, '503': unavailable },
    },
  },
  {
    method: 'post',
    path: '/u/{token}',
    operation: {
      ...common,
      operationId: 'unsubscribe',
      summary: 'Unsubscribe: RFC 8058 one-click (List-Unsubscribe-Post) and the page\'s form',
      description: `${role} Suppresses the address workspace-wide and ends its sequences; repeating it changes nothing. The answer is JSON when the client prefers it (Accept), else a page.`,
      requestBody: {
        required: false,
        content: {
          'application/x-www-form-urlencoded': {
            schema: { type: 'object', properties: { 'List-Unsubscribe': { const: 'One-Click' } } },
          },
        },
      },
      responses: {
        '200': {
          description: 'Unsubscribed',
          content: {
            'text/html': { schema: { type: 'string' } },
            'application/json': { schema: { type: 'object', required: ['unsubscribed'], properties: { unsubscribed: { const: true } }, additionalProperties: false } },
          },
        },
        // The JSON body reader runs on every POST with a JSON Content-Type.
        '400': errorResponse(['invalid_request']),
        '404': linkNotFound,
        '413': errorResponse(['payload_too_large']),
        '415': errorResponse(['unsupported_media_type']),
        '500': internal,
        '503': unavailable,
      },
    },
  },
];
