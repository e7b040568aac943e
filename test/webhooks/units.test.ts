import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { nonPublicReason, v6Bytes } from '../../src/adapters/http-address.ts';
import { parseWebhookUrl, checkWebhookHost, describeRequestError, SsrfRefusal, WebhookHttpClient } from '../../src/adapters/http-client.ts';
import { envelope, signature, deliveryHeaders } from '../../src/modules/webhooks/payload.ts';
import { loadConfig, ConfigError } from '../../src/config/index.ts';
import https from 'node:https';
import type net from 'node:net';
import { testCertificates } from '../support/https.ts';

describe('webhook units: address rules, URL checks, payload, settings', () => {
  describe('nonPublicReason', () => {
    const cases: Array<[string, string | null]> = [
      ['127.0.0.1', 'loopback'],
      ['127.255.255.254', 'loopback'],
      ['10.0.0.1', 'private'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['172.32.0.1', null],
      ['192.168.0.1', 'private'],
      ['169.254.169.254', 'link-local'],
      ['100.64.0.1', 'CGNAT'],
      ['100.127.255.255', 'CGNAT'],
      ['100.128.0.1', null],
      ['0.0.0.0', 'unspecified'],
      ['224.0.0.251', 'multicast'],
      ['239.255.255.250', 'multicast'],
      ['255.255.255.255', 'reserved'],
      ['198.18.0.1', 'benchmarking'],
      ['192.0.2.1', 'documentation'],
      ['93.184.215.14', null],
      ['8.8.8.8', null],
      ['::', 'unspecified'],
      ['::1', 'loopback'],
      ['[::1]', 'loopback'],
      ['fe80::1', 'link-local'],
      ['fe80::1%eth0', 'link-local'],
      ['fc00::1', 'private'],
      ['fd12:3456::1', 'private'],
      ['ff02::1', 'multicast'],
      ['2001:db8::1', 'documentation'],
      ['2606:4700:4700::1111', null],
      ['2a00:1450:4001:82a::200e', null],
    ];
    for (const [address, reason] of cases)
      it(`${address} -> ${reason ?? 'public'}`, () => {
        assert.equal(nonPublicReason(address), reason);
      });

    it('IPv4 inside IPv6 (mapped, NAT64, 6to4, compatible) is judged by the IPv4 address', () => {
      assert.match(nonPublicReason('::ffff:127.0.0.1')!, /^loopback \(127\.0\.0\.1 inside/);
      assert.match(nonPublicReason('::ffff:7f00:1')!, /^loopback/);
      assert.match(nonPublicReason('0:0:0:0:0:ffff:a00:1')!, /^private \(10\.0\.0\.1/);
      assert.match(nonPublicReason('64:ff9b::192.168.1.1')!, /^private/);
      assert.match(nonPublicReason('2002:a9fe:a9fe::1')!, /^link-local \(169\.254\.169\.254/);
      assert.equal(nonPublicReason('::127.0.0.1'), 'reserved');
      assert.equal(nonPublicReason('::ffff:8.8.8.8'), null);
      assert.equal(nonPublicReason('64:ff9b::8.8.8.8'), null);
      // IPv4-translated (SIIT), as WHATWG URL parsing spells [::ffff:0:127.0.0.1].
      assert.match(nonPublicReason('::ffff:0:127.0.0.1')!, /^loopback \(127\.0\.0\.1 inside/);
      assert.match(nonPublicReason('::ffff:0:7f00:1')!, /^loopback/);
      assert.match(nonPublicReason('::ffff:0:a9fe:a9fe')!, /^link-local/);
    });

    it('IPv6 outside global unicast (2000::/3) is refused: reserved and unassigned ranges', () => {
      for (const address of ['100::1', '4000::1', '8000::1', 'e000::1', '::2', '0:1::1'])
        assert.equal(nonPublicReason(address), 'reserved', address);
      assert.equal(nonPublicReason('2400:cb00::1'), null);
      assert.equal(nonPublicReason('2c0f:fb50::1'), null);
      assert.equal(nonPublicReason('3fff:0fff::1'), 'documentation');
    });

    it('anything that is not an IP address is refused', () => {
      assert.equal(nonPublicReason('localhost'), 'not an IP address');
      assert.equal(nonPublicReason('127.1'), 'not an IP address');
    });

    it('v6Bytes expands every spelling to the same 16 bytes', () => {
      const loop = [...Array(15).fill(0), 1];
      assert.deepEqual(v6Bytes('::1'), loop);
      assert.deepEqual(v6Bytes('0:0:0:0:0:0:0:1'), loop);
      assert.deepEqual(v6Bytes('::ffff:127.0.0.1'), v6Bytes('::ffff:7f00:1'));
      assert.deepEqual(v6Bytes('fe80::1%lo0').slice(0, 2), [0xfe, 0x80]);
    });
  });

  describe('URL checks', () => {
    it('WHATWG parsing turns every IPv4 spelling into the dotted form the guard judges', async () => {
      for (const spelling of ['127.1', '2130706433', '0x7f000001', '0177.0.0.1', '127.0.1', '[::ffff:127.0.0.1]']) {
        const url = parseWebhookUrl(`https://${spelling}/x`);
        await assert.rejects(checkWebhookHost(url, { allowPrivate: false }), /loopback/, spelling);
        await checkWebhookHost(url, { allowPrivate: true });
      }
    });

    it('refuses non-https, credentials and garbage before any lookup', () => {
      assert.throws(() => parseWebhookUrl('http://example.com/'), /https/);
      assert.throws(() => parseWebhookUrl('https://u:p@example.com/'), /credentials/);
      assert.throws(() => parseWebhookUrl('https//example.com'), /not a valid URL/);
    });

    it('resolves names with the given resolver and refuses private answers', async () => {
      const url = parseWebhookUrl('https://hooks.example.com/in');
      await checkWebhookHost(url, { allowPrivate: false, resolve: async () => [{ address: '93.184.215.14', family: 4 }] });
      await assert.rejects(checkWebhookHost(url, { allowPrivate: false, resolve: async () => [{ address: 'fd00::5', family: 6 }] }), /fd00::5, a private address/);
      await assert.rejects(checkWebhookHost(url, { allowPrivate: false, resolve: async () => [] }), /does not resolve/);
      await assert.rejects(
        checkWebhookHost(url, { allowPrivate: false, resolve: async () => Promise.reject(Object.assign(new Error('x'), { code: 'ENOTFOUND' })) }),
        /does not resolve \(ENOTFOUND\)/,
      );
    });
  });

  describe('request errors', () => {
    it('an attempt error names the code, keeps SSRF refusals apart, drops control characters, and tells a closed connection', () => {
      const withCode = (message: string, code?: string, cause?: unknown) => Object.assign(new Error(message), { code, cause });
      assert.deepEqual(describeRequestError(withCode('connect ECONNREFUSED 127.0.0.1:9', 'ECONNREFUSED')), {
        statusCode: null,
        error: 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9',
        closed: false,
      });
      assert.equal(describeRequestError(withCode('other side closed', 'UND_ERR_SOCKET')).closed, true);
      assert.equal(describeRequestError(withCode('fetch failed', undefined, withCode('read ECONNRESET', 'ECONNRESET'))).closed, true);
      const refused = new SsrfRefusal('h.example resolves to 10.0.0.1, a private address (SSRF guard)');
      assert.equal(describeRequestError(withCode('x', undefined, refused)).error, 'refused: h.example resolves to 10.0.0.1, a private address (SSRF guard)');
      const odd = describeRequestError(withCode('bad\u0000header\r\nvalue\u007f', 'E_X')).error!;
      assert.equal(odd, 'E_X: bad header  value ');
      assert.equal(describeRequestError(withCode('y'.repeat(2000))).error!.length, 500);
      // Cut through an emoji at 500, and a lone surrogate: both become U+FFFD, valid for jsonb.
      const cut = describeRequestError(withCode('z'.repeat(499) + '\u{1F600}tail')).error!;
      assert.equal(cut, 'z'.repeat(499) + '\ufffd');
      assert.equal(describeRequestError(withCode('a\ud800b', 'E_Y')).error, 'E_Y: a\ufffdb');
    });

    it('a receiver that answers 2xx and then trickles its body frees the connection within a second, not at the timeout', async () => {
      // Found by a review (2026-11-29): the slot was free at the status line but the connection
      // stayed busy until the attempt's timer cut the body, and the attempts queued behind it
      // for the same receiver timed out on their own timers.
      const tls = testCertificates();
      const trickles = new Set<NodeJS.Timeout>();
      const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
        req.resume();
        if (req.url === '/slow') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          const t = setInterval(() => res.write('.'), 100);
          trickles.add(t);
          res.on('close', () => clearInterval(t));
          return;
        }
        res.writeHead(204).end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const base = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
      const client = new WebhookHttpClient({ timeoutMs: 3_000, allowPrivate: true, maxSockets: 1, ca: tls.ca });
      try {
        const slow = client.post(`${base}/slow`, Buffer.from('{}'), {});
        const next = client.post(`${base}/fast`, Buffer.from('{}'), {});
        assert.equal((await slow).statusCode, 200);
        const r = await next;
        assert.equal(r.statusCode, 204, r.error ?? '');
        assert.ok(r.durationMs < 2_500, `the next attempt waited ${r.durationMs} ms for the connection`);
      } finally {
        client.close();
        trickles.forEach(clearInterval);
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }
    });

    it('a request the HTTP client refuses outright is an answer with its reason, not a throw', async () => {
      const client = new WebhookHttpClient({ timeoutMs: 2_000, allowPrivate: true });
      try {
        // undici refuses a header value with a line break before anything is sent.
        const r = await client.post('https://127.0.0.1:9/hook', Buffer.from('{}'), { 'x-odd': 'a\nb' });
        assert.equal(r.statusCode, null);
        assert.match(r.error!, /^UND_ERR_INVALID_ARG: invalid x-odd header/);
        // Every path answers through the callback, once.
        const answers: unknown[] = [];
        await new Promise<void>((resolve) => {
          client.postThen('https://127.0.0.1:9/hook', Buffer.from('{}'), { 'x-odd': 'a\nb' }, (a) => {
            answers.push(a);
            setTimeout(resolve, 50);
          });
        });
        assert.equal(answers.length, 1);
      } finally {
        client.close();
      }
    });
  });

  describe('payload', () => {
    it('the envelope and its signature: stable fields, known data order, extra data kept', () => {
      const body = envelope({
        eventId: 'evt_1',
        event: 'message.bounced',
        eventCreatedAt: new Date('2026-05-04T10:00:00.000Z'),
        webhookId: 'whk_1',
        data: { bouncedAt: 'b', extra: 1, campaignId: 'c', bounceType: 'soft' },
      });
      assert.equal(body.toString(), '{"id":"evt_1","event":"message.bounced","timestamp":"2026-05-04T10:00:00.000Z","webhookId":"whk_1","data":{"campaignId":"c","bounceType":"soft","bouncedAt":"b","extra":1}}');
      assert.equal(signature('whsec_k', body), createHmac('sha256', 'whsec_k').update(body).digest('hex'));
      const h = deliveryHeaders({ secret: 'whsec_k', body, eventId: 'evt_1', at: new Date('2026-05-04T10:00:01.999Z'), attempt: 2 });
      assert.equal(h['x-service-timestamp'], String(Date.parse('2026-05-04T10:00:01Z') / 1000));
      assert.equal(h['x-service-event-id'], 'evt_1');
      assert.equal(h['content-type'], 'application/json');
      assert.equal(h['x-service-signature'], signature('whsec_k', body));
      // The dispatcher passes the event's time already formatted: the same bytes.
      const same = envelope({
        eventId: 'evt_1',
        event: 'message.bounced',
        eventCreatedAt: '2026-05-04T10:00:00.000Z',
        webhookId: 'whk_1',
        data: { bouncedAt: 'b', extra: 1, campaignId: 'c', bounceType: 'soft' },
      });
      assert.ok(same.equals(body));
      // Extra fields named like Object's own methods are kept like any other.
      const odd = envelope({ eventId: 'evt_2', event: 'campaign.started', eventCreatedAt: '2026-05-04T10:00:00.000Z', webhookId: 'whk_1', data: { toString: 'x', constructor: 1 } });
      assert.deepEqual(JSON.parse(odd.toString()).data, { toString: 'x', constructor: 1 });
    });
  });

  describe('settings', () => {
    it('defaults: 10 s timeout, 30s,5m,30m,2h,8h (5 retries), private addresses refused', () => {
      const c = loadConfig({});
      assert.equal(c.webhookTimeout, 10_000);
      assert.deepEqual(c.webhookRetryDelays, [30_000, 300_000, 1_800_000, 7_200_000, 28_800_000]);
      assert.equal(c.webhookAllowPrivate, false);
    });

    it('from the environment, with bad values naming the setting', () => {
      const c = loadConfig({ MAILGATE_WEBHOOK_TIMEOUT: '2s', MAILGATE_WEBHOOK_RETRY_DELAYS: '1m, 1h', MAILGATE_WEBHOOK_ALLOW_PRIVATE: 'true' });
      assert.equal(c.webhookTimeout, 2_000);
      assert.deepEqual(c.webhookRetryDelays, [60_000, 3_600_000]);
      assert.equal(c.webhookAllowPrivate, true);
      assert.equal(loadConfig({ MAILGATE_WEBHOOK_ALLOW_PRIVATE: '0' }).webhookAllowPrivate, false);
      assert.throws(() => loadConfig({ MAILGATE_WEBHOOK_ALLOW_PRIVATE: 'yes please' }), (e: Error) => e instanceof ConfigError && /MAILGATE_WEBHOOK_ALLOW_PRIVATE/.test(e.message));
      assert.throws(() => loadConfig({ MAILGATE_WEBHOOK_TIMEOUT: '0s' }), /MAILGATE_WEBHOOK_TIMEOUT/);
      assert.throws(() => loadConfig({ MAILGATE_WEBHOOK_RETRY_DELAYS: '30s,soon' }), /MAILGATE_WEBHOOK_RETRY_DELAYS/);
    });
  });
});
