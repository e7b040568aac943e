import assert from 'node:assert/strict';
import { PreparedStatements } from '../../src/db/statements.ts';
import { OUTCOMES_SQL, finishedBatch, outcomesBatch } from '../../src/modules/webhooks/repository.ts';
import type { WebhookWorld } from './helpers.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import type pg from 'pg';
import { deliveryWorld } from './delivery-world.ts';

describe("webhook delivery: the dispatcher's statements and their plans", function () {
  this.timeout(60_000);
  const d = deliveryWorld();
  let w: WebhookWorld, db: pg.Client, dispatcher: WebhookDispatcher;
  before(() => ({ w, db, dispatcher } = d));
  const { oneHookOneEvent, attemptsOf, staleClaim } = d;

  it("the dispatcher's statements plan with indexes only, whatever the statistics say", async () => {
    const statements = new PreparedStatements(w.app.databaseUrl, 1, { asyncCommit: true, indexPathsOnly: true });
    try {
      const [row] = await statements.run<Record<string, string>>(
        'test.settings',
        `select current_setting('synchronous_commit') as sc, current_setting('enable_seqscan') as seq, current_setting('enable_bitmapscan') as bitmap, current_setting('enable_hashjoin') as hash`,
        [],
      );
      assert.deepEqual(row, { sc: 'off', seq: 'off', bitmap: 'off', hash: 'off' });
      // Even on a table the planner believes empty, the claim reads the due index in order.
      await statements.run('test.analyze', 'analyze webhook_deliveries', []);
      const plan = await statements.run<{ 'QUERY PLAN': string }>(
        'test.explain',
        `explain select d.id from webhook_deliveries d where d.state = 'pending' and d.next_attempt_at <= now() order by d.next_attempt_at limit 10 for update of d skip locked`,
        [],
      );
      assert.match(plan.map((p) => p['QUERY PLAN']).join('\n'), /Index Scan using webhook_deliveries_due_idx/);
    } finally {
      await statements.close();
    }
  });

  it('recording outcomes probes each delivery by primary key, however many are pending and however stale the statistics', async () => {
    const { workspaceId } = await w.workspace();
    const hook = await w.register((await w.workspace()).key, ['message.sent']);
    // Statistics taken while the table held next to nothing, then 3,000 pending deliveries (a
    // receiver down for a while, or a burst on a young table): the partial due index looks tiny.
    await db.query('analyze webhook_deliveries');
    await db.query(
      `insert into events (id, workspace_id, type, data, created_at, fanned_out_at)
       select 'evt_pl' || i, $1, 'message.sent', '{}', now(), now() from generate_series(1, 3000) i`,
      [workspaceId],
    );
    await db.query(
      `insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, next_attempt_at, lease_until, created_at, updated_at)
       select 'dlv_pl' || i, $1, $2, 'evt_pl' || i, 'pending', now() + interval '1 hour', now() + interval '1 hour', now(), now() from generate_series(1, 3000) i`,
      [workspaceId, hook.id],
    );
    const statements = new PreparedStatements(w.app.databaseUrl, 1, { asyncCommit: true, indexPathsOnly: true });
    try {
      const lease = new Date(Date.now() + 3_600_000);
      const outcomes = Array.from({ length: 64 }, (_, i) => ({
        deliveryId: `dlv_pl${i + 1}`,
        leaseUntil: lease,
        attemptCount: 0,
        attempt: { at: new Date(), statusCode: 200, error: null, durationMs: 3 },
        state: 'delivered' as const,
        nextAttemptAt: null,
      }));
      const rows = await statements.run<{ 'QUERY PLAN': string }>('test.explain.outcomes', `explain ${OUTCOMES_SQL}`, [outcomesBatch(outcomes), new Date(), finishedBatch([])]);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      const moved = plan.slice(plan.indexOf('CTE moved'), plan.indexOf('CTE late'));
      assert.match(moved, /Index Scan using webhook_deliveries_pkey on webhook_deliveries d\s[^\n]*\n\s+Index Cond: \(id = o(_\d+)?\.id\)/, plan);
      assert.doesNotMatch(moved, /webhook_deliveries_due_idx|Materialize/, plan);
    } finally {
      await statements.close();
    }
  });
});
