import assert from 'node:assert/strict';
import pg from 'pg';
import { pruneWebhookLog } from '../../src/modules/maintenance/retention.ts';
import { recurringJobs, type Workers } from '../../src/jobs/registry.ts';
import type { Job } from 'agenda';
import type { Deps } from '../../src/deps.ts';
import { webhookWorld, type WebhookWorld } from './helpers.ts';

const DAY = 86_400_000;

/** The retention job as the worker role registers it, run once with a stand-in Agenda job. */
async function runRetentionJob(deps: Deps): Promise<{ handled: number; touches: number }> {
  const job = recurringJobs({ deps } as Workers).find((j) => j.name === 'retention.prune');
  assert.ok(job, 'retention.prune is registered');
  let touches = 0;
  const handled = await job.run({ touch: async () => void touches++ } as unknown as Job);
  return { handled: Number(handled ?? 0), touches };
}

describe('webhooks: retention of events, deliveries and attempts', function () {
  this.timeout(60_000);
  let w: WebhookWorld;
  let db: pg.Client;

  beforeEach(async () => {
    w = await webhookWorld();
    db = new pg.Client({ connectionString: w.app.databaseUrl });
    await db.connect();
  });
  afterEach(async () => {
    await db.end();
    await w.close();
  });

  const ids = async (table: string) => (await db.query(`select id from ${table} order by id`)).rows.map((r) => r.id as string);

  it('deletes old finished deliveries with their attempts and old events with no delivery left; keeps what is owed or recent', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const now = w.clock.now().getTime();
    const old = new Date(now - 40 * DAY);
    const recent = new Date(now - 2 * DAY);
    const event = (id: string, at: Date, fannedOut: boolean) =>
      db.query(`insert into events (id, workspace_id, type, data, created_at, fanned_out_at) values ($1, $2, 'message.sent', '{}', $3, $4)`, [
        id,
        workspaceId,
        at,
        fannedOut ? at : null,
      ]);
    const delivery = (id: string, eventId: string, state: string, at: Date) =>
      db.query(
        `insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, attempt_count, next_attempt_at, created_at, updated_at)
         values ($1, $2, $3, $4, $5, 1, $6, $6, $6)`,
        [id, workspaceId, hook.id, eventId, state, at],
      );
    const attempt = (deliveryId: string, at: Date) =>
      db.query(`update webhook_deliveries set attempts = attempts || jsonb_build_array(jsonb_build_object('at', $2::timestamptz, 'statusCode', 200, 'error', null, 'durationMs', 12)) where id = $1`, [
        deliveryId,
        at,
      ]);

    await event('evt_old_delivered', old, true);
    await delivery('dlv_old_delivered', 'evt_old_delivered', 'delivered', old);
    await attempt('dlv_old_delivered', old);
    await event('evt_old_failed', old, true);
    await delivery('dlv_old_failed', 'evt_old_failed', 'failed', old);
    for (let i = 0; i < 6; i++) await attempt('dlv_old_failed', old);
    // Still owed to a receiver: a delivery retried by hand, whatever its age.
    await event('evt_old_pending', old, true);
    await delivery('dlv_old_pending', 'evt_old_pending', 'pending', old);
    await attempt('dlv_old_pending', old);
    // Not fanned out yet (no worker ran since): kept.
    await event('evt_old_unfanned', old, false);
    // Fanned out to a worker that has not written its first attempt yet (or died): kept.
    await event('evt_old_inflight', old, true);
    await db.query(`insert into webhook_fanouts (id, lease_owner, lease_until, event_ids, created_at) values ('fan_1', null, $1, '{evt_old_inflight}', $1)`, [old]);
    // Fanned out to nobody (no subscriber then): nothing owed, deleted.
    await event('evt_old_nobody', old, true);
    await event('evt_recent', recent, true);
    await delivery('dlv_recent', 'evt_recent', 'delivered', recent);
    await attempt('dlv_recent', recent);

    const r = await pruneWebhookLog(w.app.deps.orm.em.fork(), new Date(now - 30 * DAY));
    assert.deepEqual(r, { deliveries: 2, events: 3 });
    assert.deepEqual(await ids('events'), ['evt_old_inflight', 'evt_old_pending', 'evt_old_unfanned', 'evt_recent']);
    assert.deepEqual(await ids('webhook_deliveries'), ['dlv_old_pending', 'dlv_recent']);
    const attempts = (await db.query(`select id, jsonb_array_length(attempts) as n from webhook_deliveries order by 1`)).rows;
    assert.deepEqual(attempts, [
      { id: 'dlv_old_pending', n: 1 },
      { id: 'dlv_recent', n: 1 },
    ]);
    // The webhook itself and its recent log are untouched.
    const listed = await w.deliveries(key, hook.id);
    assert.deepEqual(listed.map((d: { id: string }) => d.id).sort(), ['dlv_old_pending', 'dlv_recent']);

    // A second run finds nothing more.
    assert.deepEqual(await pruneWebhookLog(w.app.deps.orm.em.fork(), new Date(now - 30 * DAY)), { deliveries: 0, events: 0 });
  });

  it('walks the tables in page ranges: every old row on every page, one statement per range', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    const now = w.clock.now().getTime();
    // 3,000 events (old and recent interleaved) with a delivery each: tens of heap pages.
    await db.query(
      `insert into events (id, workspace_id, type, data, created_at, fanned_out_at)
       select 'evt_' || lpad(i::text, 5, '0'), $1, 'message.sent', jsonb_build_object('n', i, 'pad', repeat('x', 200)),
              $2::timestamptz - (case when i % 3 = 0 then 1 else 45 end) * interval '1 day',
              $2::timestamptz - (case when i % 3 = 0 then 1 else 45 end) * interval '1 day'
         from generate_series(1, 3000) i`,
      [workspaceId, new Date(now)],
    );
    await db.query(
      `insert into webhook_deliveries (id, workspace_id, webhook_id, event_id, state, attempt_count, next_attempt_at, created_at, updated_at)
       select 'dlv_' || substr(id, 5), workspace_id, $1, id, 'delivered', 1, created_at, created_at, created_at from events`,
      [hook.id],
    );
    await db.query(
      `update webhook_deliveries set attempts = jsonb_build_array(jsonb_build_object('at', created_at, 'statusCode', 204, 'error', null, 'durationMs', 5))`,
    );
    const { rows: pages } = await db.query(`select pg_relation_size('events') / 8192 as events, pg_relation_size('webhook_deliveries') / 8192 as deliveries`);
    assert.ok(Number(pages[0].events) > 20 && Number(pages[0].deliveries) > 5, JSON.stringify(pages));

    let touches = 0;
    const r = await pruneWebhookLog(w.app.deps.orm.em.fork(), new Date(now - 30 * DAY), async () => void touches++, 4);
    assert.deepEqual(r, { deliveries: 2000, events: 2000 });
    assert.equal(touches, Math.ceil(Number(pages[0].events) / 4) + Math.ceil(Number(pages[0].deliveries) / 4));
    const left = (await db.query(`select count(*)::int as n, count(*) filter (where (data->>'n')::int % 3 = 0)::int as recent from events`)).rows[0];
    assert.deepEqual(left, { n: 1000, recent: 1000 });
    assert.equal((await db.query(`select count(*)::int as n from webhook_deliveries`)).rows[0].n, 1000);
    assert.equal((await db.query(`select sum(jsonb_array_length(attempts))::int as n from webhook_deliveries`)).rows[0].n, 1000);
  });

  it('the hourly job prunes a delivered event after MAILGATE_EVENT_RETENTION, end to end', async () => {
    const { key, workspaceId } = await w.workspace();
    const hook = await w.register(key, ['message.sent']);
    await w.emit(workspaceId, 'message.sent', { messageId: 'msg_1' });
    const dispatcher = w.dispatcher();
    await dispatcher.runRound();
    assert.equal(w.receiver.received.length, 1);
    assert.equal((await w.deliveries(key, hook.id))[0].state, 'delivered');

    // Within the retention (default 30 days) nothing goes.
    w.clock.advance(29 * DAY);
    assert.equal((await runRetentionJob(w.app.deps)).handled, 0);
    assert.equal((await w.deliveries(key, hook.id)).length, 1);

    w.clock.advance(2 * DAY);
    const run = await runRetentionJob(w.app.deps);
    assert.equal(run.handled, 2, 'one delivery and one event');
    assert.ok(run.touches >= 2, 'the job keeps its Agenda lock between statements');
    assert.deepEqual(await w.deliveries(key, hook.id), []);
    assert.deepEqual(await ids('events'), []);
    assert.equal((await db.query(`select count(*)::int as n from webhook_deliveries`)).rows[0].n, 0, "the attempts went with their delivery");
  });

  it('MAILGATE_EVENT_RETENTION=0 keeps everything', async () => {
    await db.end();
    await w.close();
    w = await webhookWorld({ eventRetention: 0 });
    db = new pg.Client({ connectionString: w.app.databaseUrl });
    await db.connect();
    const { workspaceId } = await w.workspace();
    await db.query(`insert into events (id, workspace_id, type, data, created_at, fanned_out_at) values ('evt_ancient', $1, 'message.sent', '{}', $2, $2)`, [
      workspaceId,
      new Date(w.clock.now().getTime() - 400 * DAY),
    ]);
    assert.equal((await runRetentionJob(w.app.deps)).handled, 0);
    assert.deepEqual(await ids('events'), ['evt_ancient']);
  });

  it('deleting an event finds its deliveries by event_id (the cascade and the check use an index)', async () => {
    const { rows } = await db.query(
      `select indexdef from pg_indexes where tablename = 'webhook_deliveries' and indexname = 'webhook_deliveries_event_webhook_key'`,
    );
    assert.match(rows[0]?.indexdef ?? '', /UNIQUE INDEX .* \(event_id, webhook_id\)/);
    await db.query(`set enable_seqscan = off`);
    const plan = (await db.query(`explain select 1 from webhook_deliveries where event_id = 'evt_x'`)).rows.map((r) => r['QUERY PLAN']).join('\n');
    await db.query(`reset enable_seqscan`);
    assert.match(plan, /webhook_deliveries_event_webhook_key/);
  });
});
