import assert from 'node:assert/strict';
import type { Deps } from '../../src/deps.ts';
import { checkWebhookHost, type Resolver } from '../../src/adapters/http-client.ts';
import type { WebhookWorld } from './helpers.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import type pg from 'pg';
import { deliveryWorld, DELAYS } from './delivery-world.ts';

describe('webhook delivery: guards', function () {
  this.timeout(60_000);
  const d = deliveryWorld();
  let w: WebhookWorld, db: pg.Client, dispatcher: WebhookDispatcher;
  before(() => ({ w, db, dispatcher } = d));
  const { oneHookOneEvent, attemptsOf, staleClaim } = d;

  describe('SSRF guard at delivery time (MAILGATE_WEBHOOK_ALLOW_PRIVATE off for the dispatcher)', () => {
    const guarded = (): Deps => ({ ...w.app.deps, config: { ...w.app.deps.config, webhookAllowPrivate: false } });

    it('a URL that now points to a private address is refused at connect time and nothing is sent', async () => {
      const { key, hook } = await oneHookOneEvent();
      const d = w.dispatcher({}, guarded());
      await d.runRound();
      assert.equal(w.receiver.received.length, 0);
      const attempt = (await attemptsOf(key, hook.id)).attempts[0];
      assert.equal(attempt.statusCode, null);
      assert.match(attempt.error, /^refused: 127\.0\.0\.1 is a loopback address \(SSRF guard\)/);
      assert.equal((await attemptsOf(key, hook.id)).state, 'pending', 'a refusal is a failed attempt like any other');
    });

    it('DNS rebinding: the address checked is the address connected to', async () => {
      // A name that resolved to a public address when it was checked, and to 127.0.0.1 after.
      let calls = 0;
      const rebinding: Resolver = async (host) => {
        assert.equal(host, 'hooks.rebind.test');
        return ++calls === 1 ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
      };
      const url = new URL(w.receiver.url('/rebind', 'hooks.rebind.test'));
      await checkWebhookHost(url, { allowPrivate: false, resolve: rebinding }); // passes: public then
      const { key, workspaceId } = await w.workspace();
      const hook = (await w.app.request('POST', '/v1/webhooks', { key, body: { url: url.href, events: ['message.sent'] } })).body;
      await w.emit(workspaceId, 'message.sent', { messageId: 'msg_rebind' });
      await w.dispatcher({ resolve: rebinding }, guarded()).runRound();
      assert.equal(w.receiver.received.length, 0);
      const attempt = (await attemptsOf(key, hook.id)).attempts[0];
      assert.match(attempt.error, /^refused: hooks\.rebind\.test resolves to 127\.0\.0\.1, a loopback address \(SSRF guard\)/);

      // With private addresses allowed, the same lookup is what the socket connects to: the
      // request reaches the receiver on 127.0.0.1 under the name hooks.rebind.test (TLS checks it).
      w.clock.advance(DELAYS[0]);
      await w.dispatcher({ resolve: async () => [{ address: '127.0.0.1', family: 4 }] }).runRound();
      assert.equal(w.receiver.received.length, 1);
      assert.equal(w.receiver.received[0].headers.host, `hooks.rebind.test:${w.receiver.port}`);
      assert.equal((await attemptsOf(key, hook.id)).state, 'delivered');
    });

    it('a host with one public and one private address is refused', async () => {
      const mixed: Resolver = async () => [
        { address: '93.184.215.14', family: 4 },
        { address: '::ffff:10.0.0.8', family: 6 },
      ];
      await assert.rejects(checkWebhookHost(new URL('https://mixed.example/x'), { allowPrivate: false, resolve: mixed }), /10\.0\.0\.8 inside/);
      const { key, workspaceId } = await w.workspace();
      const hook = (await w.app.request('POST', '/v1/webhooks', { key, body: { url: w.receiver.url('/m', 'hooks.rebind.test'), events: ['message.sent'] } })).body;
      await w.emit(workspaceId, 'message.sent', { messageId: 'msg_mixed' });
      await w.dispatcher({ resolve: mixed }, guarded()).runRound();
      assert.match((await attemptsOf(key, hook.id)).attempts[0].error, /SSRF guard/);
      assert.equal(w.receiver.received.length, 0);
    });
  });
});
