// outbound_messages has no foreign keys (migration 0017): its owner deletes a workspace's
// messages (and its sent tallies) when the workspace goes, in every state and of every kind, and
// leaves other workspaces' alone.
import assert from 'node:assert/strict';
import { sendingWorld, HOUR } from '../sending/world.ts';
import pg from 'pg';
import { recordForward } from '../../src/modules/messages/desk.ts';
import { transactionRetries } from '../../src/db/transaction.ts';

describe('messages: deleting a workspace', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  /** A connection of its own, for a transaction held open across the steps of a race. */
  const connect = async () => {
    const c = new pg.Client({ connectionString: w.app.databaseUrl });
    await c.connect();
    return c;
  };

  const countOf = async (workspaceId: string) =>
    (await w.db.query(`select state, kind, count(*)::int as n from outbound_messages where workspace_id = $1 group by 1, 2 order by 1, 2`, [workspaceId])).rows;

  it('deletes its sent, scheduled and queued campaign messages and its forwards; another workspace keeps its own', async () => {
    const steps = [
      { subject: 'One', bodyHtml: '<p>1</p>' },
      { subject: 'Two', bodyHtml: '<p>2</p>', delayHours: 24 },
    ];
    const gone = await w.setup({ leads: [{ email: 'del.a@x.example' }, { email: 'del.b@x.example' }], steps });
    const kept = await w.setup({ leads: [{ email: 'keep.a@x.example' }], steps });
    await w.dispatcher.runRound();
    // A lead enrolled into the running campaign afterwards: its step 0 waits, queued.
    const enrolled = await w.app.request('POST', `/v1/campaigns/${gone.campaignId}/leads/bulk`, { key: gone.key, body: { leads: [{ email: 'del.c@x.example' }] } });
    assert.equal(enrolled.status, 200);
    const { rows: [sent] } = await w.db.query(`select id, lead_id from outbound_messages where workspace_id = $1 and state = 'sent' limit 1`, [gone.workspaceId]);
    await w.app.deps.orm.em.fork().transactional((em) =>
      recordForward(
        em,
        { id: 'msg_forward_del', workspaceId: gone.workspaceId, campaignId: gone.campaignId, leadId: sent.lead_id, senderAccountId: gone.senders[0], to: 'sdr@x.example', subject: 'Fwd: One', messageIdHeader: '<fwd.del@x.example>', response: '250 ok' },
        w.clock.now(),
      ),
    );
    assert.deepEqual(await countOf(gone.workspaceId), [
      { state: 'queued', kind: 'campaign', n: 1 },
      { state: 'scheduled', kind: 'campaign', n: 2 },
      { state: 'sent', kind: 'campaign', n: 2 },
      { state: 'sent', kind: 'forward', n: 1 },
    ]);
    const tallies = async (workspaceId: string) => (await w.db.query(`select coalesce(sum(n), 0)::int as n from sent_tallies where workspace_id = $1`, [workspaceId])).rows[0].n;
    // Pool and account, per message sent; the forward is the account's alone.
    assert.equal(await tallies(gone.workspaceId), 2 * 2 + 1);
    const keptTallies = await tallies(kept.workspaceId);
    assert.equal(keptTallies, 2);
    const keptBefore = await countOf(kept.workspaceId);
    assert.deepEqual(keptBefore, [
      { state: 'scheduled', kind: 'campaign', n: 1 },
      { state: 'sent', kind: 'campaign', n: 1 },
    ]);

    await w.app.services().workspaces.delete(gone.workspaceId);
    assert.deepEqual(await countOf(gone.workspaceId), []);
    assert.deepEqual(await countOf(kept.workspaceId), keptBefore);
    assert.equal(await tallies(gone.workspaceId), 0, "the workspace's sent tallies go with its messages");
    assert.equal(await tallies(kept.workspaceId), keptTallies);
    // Nothing of it is left in any table (its keys stay, with no workspace: decisions.md).
    const { rows: tables } = await w.db.query(
      `select table_name from information_schema.columns where table_schema = 'public' and column_name = 'workspace_id' and table_name <> 'api_keys' order by 1`,
    );
    const left: string[] = [];
    for (const { table_name } of tables) {
      const { rows } = await w.db.query(`select count(*)::int as n from ${table_name} where workspace_id = $1`, [gone.workspaceId]);
      if (rows[0].n) left.push(`${table_name}: ${rows[0].n}`);
    }
    assert.deepEqual(left, []);
    // The other campaign still sends its follow-up when it is due.
    w.clock.advance(25 * HOUR);
    await w.dispatcher.runRound();
    assert.equal(w.to('keep.a@x.example').length, 2);
  });

  // PostgreSQL runs a foreign key's `on delete` action once per deleted row; a key without an
  // index under its column read the whole referencing table each time (every workspace's rows).
  // Deleting 10,000 messages against 20,000 inbound mails took 8 s before migration 0027.
  it("is not slowed by other workspaces' data: every key on a table it deletes in bulk has an index", async () => {
    // (A speed to check belongs in bench/, not here: the catalogue says whether the reads are
    // by index, whatever the machine's pace.)
    // The keys whose referenced rows are deleted many at a time (a workspace's messages,
    // enrollments, leads, inbound mail, threads, drafts) all have an index on their column.
    // Those left without one reference rows deleted one at a time (a workspace, an SDR, a pool,
    // a follow-up rule): one read of the table per deletion.
    const { rows } = await w.db.query(
      `select c.conrelid::regclass::text as t, a.attname as col, c.confrelid::regclass::text as ref
         from pg_constraint c join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
        where c.contype = 'f'
          and c.confrelid::regclass::text not in ('workspaces', 'sdrs', 'sender_pools', 'followup_rules')
          and not exists (select 1 from pg_index i where i.indrelid = c.conrelid and i.indkey[0] = c.conkey[1])
        order by 1, 2`,
    );
    assert.deepEqual(rows, []);
  });

  // markSent (messages/transitions.ts) locks its messages, then writes their message.sent events
  // in the same statement; the events' foreign key to workspaces took a key-share lock on the
  // workspace row there. A deletion holds that row (lockWorkspaceWebhooks) and then deletes the
  // messages: the two waited for each other, PostgreSQL aborted the deletion after a second, and
  // meanwhile every outcome of that worker's batch (other workspaces' too) waited for it.
  it("a message's sent outcome written while its workspace is deleted: no lock cycle, no event left", async () => {
    const s = await w.setup({ leads: [{ email: 'race.a@x.example' }], steps: [{ subject: 'One', bodyHtml: '<p>1</p>' }] });
    const { rows: [m] } = await w.db.query(`select id from outbound_messages where workspace_id = $1 limit 1`, [s.workspaceId]);
    const { rows: [hook] } = await w.db.query(`select id from webhooks where workspace_id = $1 limit 1`, [s.workspaceId]);
    const waiting = async (pid: number) => {
      for (let i = 0; i < 200; i++) {
        const { rows } = await w.db.query(`select wait_event_type from pg_stat_activity where pid = $1`, [pid]);
        if (rows[0]?.wait_event_type === 'Lock') return;
        await new Promise((res) => setTimeout(res, 10));
      }
      throw new Error(`backend ${pid} never waited`);
    };
    // A fan-out holding the webhook (FOR KEY SHARE) stops the deletion right after it took the
    // workspace row, so the outcome below comes between the two.
    const fan = await connect();
    const outcome = await connect();
    const retriesBefore = transactionRetries(w.app.deps.orm);
    try {
      await fan.query('begin');
      await fan.query(`select id from webhooks where id = $1 for key share`, [hook.id]);
      const deleting = w.app.services().workspaces.delete(s.workspaceId);
      const deletingPid = async () => (await w.db.query(`select pid from pg_stat_activity where query like 'select id from webhooks where workspace_id%for update' and state = 'active'`)).rows[0]?.pid;
      for (let i = 0; i < 200 && !(await deletingPid()); i++) await new Promise((res) => setTimeout(res, 10));
      await waiting(await deletingPid());
      // markSent's order, one step at a time: the message, then its event.
      await outcome.query('begin');
      await outcome.query(`select id from outbound_messages where id = $1 for update`, [m.id]);
      const inserting = outcome
        .query(`insert into events (id, workspace_id, type, data, created_at, webhook_ids) values ('evt_race', $1, 'message.sent', '{}', now(), array[$2])`, [
          s.workspaceId,
          hook.id,
        ])
        .then(() => outcome.query('commit'))
        .then(() => undefined)
        .catch(async (err) => {
          await outcome.query('rollback');
          return err;
        });
      // Past the outcome's own deadlock check (1 s), so that the deletion is the one to find the cycle.
      await new Promise((res) => setTimeout(res, 1200));
      await fan.query('commit');
      // The deletion now waits for the message: with the outcome waiting for the workspace row,
      // PostgreSQL found the cycle after a second and aborted the deletion (then run again).
      await deleting;
      assert.equal(await inserting, undefined, 'the outcome commits');
      assert.equal(transactionRetries(w.app.deps.orm), retriesBefore, 'no deadlock, no retry');
    } finally {
      await fan.end();
      await outcome.end();
    }
    assert.deepEqual(await countOf(s.workspaceId), []);
    assert.equal((await w.db.query(`select count(*)::int as n from events where workspace_id = $1`, [s.workspaceId])).rows[0].n, 0, 'the event written meanwhile goes too');
  });

  // An event written during the deletion (above) can be taken by a fan-out, which then waits
  // for the webhooks the deletion holds: the deletion leaves that event to it rather than wait.
  it('an event written during the deletion and held by a fan-out: no lock cycle; the fan-out finds no webhook', async () => {
    const s = await w.setup({ leads: [{ email: 'race.f@x.example' }], steps: [{ subject: 'One', bodyHtml: '<p>1</p>' }] });
    const { rows: [m] } = await w.db.query(`select id from outbound_messages where workspace_id = $1 limit 1`, [s.workspaceId]);
    const { rows: [hook] } = await w.db.query(`select id from webhooks where workspace_id = $1 limit 1`, [s.workspaceId]);
    const lockWaiter = async (like: string) => {
      for (let i = 0; i < 300; i++) {
        const { rows } = await w.db.query(`select 1 from pg_stat_activity where query like $1 and wait_event_type = 'Lock'`, [like]);
        if (rows.length) return;
        await new Promise((res) => setTimeout(res, 10));
      }
      throw new Error(`nothing waits on ${like}`);
    };
    const outcome = await connect();
    const fan = await connect();
    const retriesBefore = transactionRetries(w.app.deps.orm);
    try {
      // An outcome holds one of its messages: the deletion, past its locks (the webhooks
      // included), waits for it at the messages' delete.
      await outcome.query('begin');
      await outcome.query(`select id from outbound_messages where id = $1 for update`, [m.id]);
      const deleting = w.app.services().workspaces.delete(s.workspaceId);
      await lockWaiter('delete from outbound_messages where workspace_id%');
      // An event of the workspace written meanwhile (another outcome's), then a fan-out in its
      // order: the event, then the webhooks it writes for (held by the deletion).
      await w.db.query(`insert into events (id, workspace_id, type, data, created_at, webhook_ids) values ('evt_race_fan', $1, 'message.sent', '{}', now(), array[$2])`, [
        s.workspaceId,
        hook.id,
      ]);
      await fan.query('begin');
      assert.equal((await fan.query(`select id from events where id = 'evt_race_fan' for update skip locked`)).rows.length, 1);
      const fanning = fan.query(`select id from webhooks where id = $1 for key share`, [hook.id]);
      await lockWaiter('select id from webhooks where id = $1 for key share');
      await outcome.query('commit');
      await deleting;
      assert.deepEqual((await fanning).rows, [], 'the fan-out finds the webhook gone');
      await fan.query('commit');
      assert.equal(transactionRetries(w.app.deps.orm), retriesBefore, 'no deadlock, no retry');
    } finally {
      await outcome.end();
      await fan.end();
    }
    assert.deepEqual(await countOf(s.workspaceId), []);
  });
});
