import assert from 'node:assert/strict';
import { claimDue, fanOut, viaOrm, recordOutcomes, findWebhook, releaseHeldDeliveries, saveWebhook } from '../../src/modules/webhooks/repository.ts';
import { holdOutbox } from '../../src/modules/events/outbox.ts';
import { deliveryWorld } from './delivery-world.ts';
import { waitFor } from '../support/wait.ts';

// A retry's outcome is written while the webhook is disabled and enabled again (found by a
// review, 2026-11-29): the outcome decided whether to hold the retry from the webhook's status
// in the statement's own snapshot, taken before the enable committed, after the enable had
// released what was held. The delivery stayed pending with no due time under an active webhook.
describe('webhooks: a retry outcome written across a disable and an enable', function () {
  this.timeout(60_000);
  const d = deliveryWorld();

  /** One webhook, one event, its delivery fanned out and claimed: an attempt in flight. */
  async function inFlight() {
    const { key, workspaceId, hook } = await d.oneHookOneEvent();
    const orm = d.w.app.deps.orm;
    const stmts = viaOrm(orm.em.fork());
    const t0 = d.w.clock.now();
    await fanOut(stmts, t0, 10);
    const [claim] = await claimDue(stmts, t0, new Date(t0.getTime() + 60_000), 10);
    assert.ok(claim);
    return { key, workspaceId, hook, orm, stmts, t0, claim };
  }

  it('the enable committing while the outcome waits: the next claim takes the delivery', async () => {
    const { w, db } = d;
    const { key, workspaceId, hook, orm, stmts, t0, claim } = await inFlight();
    // While the attempt is in flight the webhook is disabled (its pending deliveries held) ...
    await w.app.services().webhooks.update(workspaceId, hook.id, { status: 'disabled' });
    // ... and enabled again, by WebhookService.update's statements; the worker writes the
    // attempt's outcome (a 500, retry in 1 s) after the release locked the delivery and before
    // the enable commits.
    let outcome!: Promise<boolean[]>;
    const retryAt = new Date(t0.getTime() + 1_000);
    await orm.em.fork().transactional(async (tx) => {
      await holdOutbox(tx);
      const hk = (await findWebhook(tx, workspaceId, hook.id, true))!;
      const now = w.clock.now();
      hk.status = 'active';
      await releaseHeldDeliveries(tx, hook.id, now);
      hk.updatedAt = now;
      await saveWebhook(tx, hk);
      outcome = recordOutcomes(
        viaOrm(orm.em.fork()),
        [
          {
            deliveryId: claim.id,
            leaseUntil: claim.leaseUntil,
            attemptCount: 0,
            attempt: { at: now, statusCode: 500, error: 'receiver answered 500', durationMs: 5 },
            state: 'pending',
            nextAttemptAt: retryAt,
          },
        ],
        now,
      );
      // (the statement's text is longer than pg_stat_activity keeps: a word of its start)
      await waitFor('the outcome waiting for the delivery', async () =>
        (await db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%json_to_recordset%' and pid <> pg_backend_pid()`)).rows.length > 0,
      );
    });
    assert.deepEqual(await outcome, [true]);
    const { rows } = await db.query(`select d.state, w.status from webhook_deliveries d join webhooks w on w.id = d.webhook_id where d.id = $1`, [claim.id]);
    assert.deepEqual([rows[0].status, rows[0].state], ['active', 'pending']);
    // Held or not by the outcome, the delivery of an active webhook is due: the next claim takes it.
    const now = w.clock.now();
    assert.deepEqual((await claimDue(stmts, now, new Date(now.getTime() + 60_000), 10)).map((c) => c.id), [claim.id]);
    const [dl] = await w.deliveries(key, hook.id);
    assert.equal(dl.state, 'pending');
  });

  it('an outcome written while the disable commits: the delivery shows no due time and is not claimed until the enable', async () => {
    const { w, db } = d;
    const { key, workspaceId, hook, stmts, t0, claim } = await inFlight();
    // The outcome read the webhook as active and wrote its retry time after the disable held
    // the webhook's deliveries (as a statement whose snapshot predates the disable's commit).
    await w.app.services().webhooks.update(workspaceId, hook.id, { status: 'disabled' });
    await db.query(`update webhook_deliveries set attempt_count = 1, lease_until = null, lease_owner = null, next_attempt_at = $2 where id = $1`, [claim.id, t0]);
    const [held] = await w.deliveries(key, hook.id);
    assert.deepEqual([held.state, held.nextAttemptAt], ['pending', null]);
    const later = new Date(t0.getTime() + 60_000);
    assert.deepEqual(await claimDue(stmts, later, new Date(later.getTime() + 60_000), 10), []);
    await w.app.services().webhooks.update(workspaceId, hook.id, { status: 'active' });
    assert.deepEqual((await claimDue(stmts, later, new Date(later.getTime() + 60_000), 10)).map((c) => c.id), [claim.id]);
  });
});
