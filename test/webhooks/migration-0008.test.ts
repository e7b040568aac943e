import assert from 'node:assert/strict';
import { emptyDatabaseForMigration } from '../support/harness.ts';

// 0008 moves each delivery's attempts from webhook_attempts into the delivery row. A database
// migrated to 0007 with attempts in the old table keeps every attempt, in order.
describe('migration 0008: attempts move into their delivery', function () {
  this.timeout(60_000);
  const scratch = emptyDatabaseForMigration();

  it('copies every attempt in time order, leaves deliveries without attempts empty, drops the old table', async () => {
    await scratch.orm.getMigrator().up({ to: '0007_retention' });
    const at = (s: number) => new Date(Date.UTC(2026, 2, 2, 12, 0, s));
    await scratch.db.query(`insert into workspaces (id, name, created_at) values ('wsp_1', 'w', now())`);
    await scratch.db.query(
      `insert into webhooks (id, workspace_id, url, events, status, signing_secret_enc, created_at, updated_at)
       values ('whk_1', 'wsp_1', 'https://h.example/x', '{message.sent}', 'active', 'x', now(), now())`,
    );
    for (const e of ['evt_1', 'evt_2']) await scratch.db.query(`insert into events (id, workspace_id, type, data, created_at) values ($1, 'wsp_1', 'message.sent', '{}', now())`, [e]);
    await scratch.db.query(
      `insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, attempt_count, created_at, updated_at)
       values ('dlv_1', 'wsp_1', 'whk_1', 'evt_1', 'delivered', 3, now(), now()), ('dlv_2', 'wsp_1', 'whk_1', 'evt_2', 'pending', 0, now(), now())`,
    );
    // Inserted out of order: the copy orders by time.
    await scratch.db.query(
      `insert into webhook_attempts (delivery_id, at, status_code, error, duration_ms) values
         ('dlv_1', $2, 200, null, 31), ('dlv_1', $1, null, 'timeout: no answer within 10000 ms', 10000), ('dlv_1', $3, 500, 'receiver answered 500', 7)`,
      [at(1), at(40), at(20)],
    );
    await scratch.orm.getMigrator().up();
    const { rows } = await scratch.db.query(`select id, attempts from webhook_deliveries order by id`);
    assert.equal(rows[0].id, 'dlv_1');
    assert.deepEqual(
      rows[0].attempts.map((a: { at: string; statusCode: number | null; error: string | null; durationMs: number }) => [new Date(a.at).toISOString(), a.statusCode, a.error, a.durationMs]),
      [
        [at(1).toISOString(), null, 'timeout: no answer within 10000 ms', 10000],
        [at(20).toISOString(), 500, 'receiver answered 500', 7],
        [at(40).toISOString(), 200, null, 31],
      ],
    );
    assert.deepEqual(rows[1], { id: 'dlv_2', attempts: [] });
    const { rows: left } = await scratch.db.query(`select to_regclass('webhook_attempts') as t`);
    assert.equal(left[0].t, null);
  });
});
