import assert from 'node:assert/strict';
import { PreparedStatements } from '../../src/db/statements.ts';
import { nativePlaceholders } from '../../src/db/sql.ts';
import { ACCEPTED_SQL } from '../../src/modules/messages/transitions.ts';
import { LOAD_SQL } from '../../src/modules/messages/send.ts';
import { sendingWorld } from './world.ts';

describe("sending: the hot path's statements and their plans", function () {
  this.timeout(60_000);
  const w = sendingWorld();

  it('reads outbound_messages and enrollments by primary key only (outcomes, next steps and guards), however many messages are claimed and however stale the statistics', async () => {
    // Statistics taken while the queue was empty, then 300 messages claimed by a worker: the
    // `state = 'sending'` partial indexes look tiny to the planner (as in bench:send, where a
    // full scan of outbound_claimed_by_idx per statement was a quarter of PostgreSQL's CPU).
    await w.db.query('analyze outbound_messages');
    const leads = Array.from({ length: 300 }, (_, i) => ({ email: `plan${i}@lead.example` }));
    const t = await w.setup({ leads });
    const claimed = await w.db.query(
      `update outbound_messages set state = 'sending', claimed_by = 'w_plan', lease_until = now() + interval '1 hour', sender_account_id = $2
        where campaign_id = $1 and state = 'queued' returning id`,
      [t.campaignId, t.senders[0]],
    );
    assert.equal(claimed.rowCount, 300);
    // The dispatcher's settings for this statement (sending/dispatcher.ts outcomeStatements).
    const statements = new PreparedStatements(w.app.databaseUrl, 1, { indexPathsOnly: true, genericPlans: true });
    try {
      const ids = claimed.rows.slice(0, 3).map((r) => r.id as string);
      const batch = [ids.slice(0, 2), ids.slice(0, 2).map(() => new Date().toISOString()), ['250 ok', '250 ok'], ['<a@x>', '<b@x>'], ['s', 's'], [null, null], [null, null], ['msg_n1', 'msg_n2'], ['evt_1', 'evt_2']];
      const plans = [
        (await statements.run<{ 'QUERY PLAN': string }>('test.explain.accepted', `explain ${ACCEPTED_SQL}`, [...batch, 'w_plan', [ids[2]], 'w_plan'])).map((r) => r['QUERY PLAN']).join('\n'),
      ];
      // The plan the dispatcher runs is the generic one (PostgreSQL 16 and later can show it).
      const v = Number((await w.db.query(`select current_setting('server_version_num') as v`)).rows[0].v);
      if (v >= 160000) {
        await w.db.query('begin');
        try {
          await w.db.query(`set local enable_seqscan = off; set local enable_bitmapscan = off; set local enable_hashjoin = off; set local enable_mergejoin = off`);
          const generic = await w.db.query(`explain (generic_plan) ${nativePlaceholders(ACCEPTED_SQL)}`);
          plans.push(generic.rows.map((r) => r['QUERY PLAN']).join('\n'));
        } finally {
          await w.db.query('rollback');
        }
      }
      for (const plan of plans) {
        const readsOf = (table: string) =>
          [...plan.matchAll(new RegExp(`(Seq Scan|Bitmap Heap Scan|Index Scan|Index Only Scan)(?: using (\\S+))? on ${table}\\b`, 'g'))].map((m) => m[2] ?? m[1]);
        // The outcomes' lock and update, the guard; the enrollments' update (whose result decides
        // the next step) and the guard's status.
        assert.ok(readsOf('outbound_messages').length >= 3, plan);
        assert.deepEqual([...new Set(readsOf('outbound_messages'))], ['outbound_messages_pkey'], plan);
        assert.ok(readsOf('enrollments').length >= 2, plan);
        assert.deepEqual([...new Set(readsOf('enrollments'))], ['enrollments_pkey'], plan);
      }
    } finally {
      await statements.close();
    }
  });

  it("loads claimed messages and their earlier steps by key only, when statistics were taken before any message had a Message-ID", async () => {
    // Statistics of a queue where no message has been sent: outbound_message_id_key and the
    // `sent_at is not null` indexes look empty, and a plan that read one whole per message to
    // find its earlier steps cost 80 ms per claim once 10,000 had been sent (issue 20, session 19).
    const leads = Array.from({ length: 300 }, (_, i) => ({ email: `load${i}@lead.example` }));
    const t = await w.setup({ leads, steps: [{ subject: 'One', bodyHtml: '<p>1</p>' }, { subject: 'Two', bodyHtml: '<p>2</p>' }] });
    await w.db.query(`update outbound_messages set message_id_header = null, sent_at = null where message_id_header is not null or sent_at is not null`);
    await w.db.query('analyze outbound_messages');
    const { rows } = await w.db.query(
      `update outbound_messages set state = 'sending', claimed_by = 'w_load', lease_until = now() + interval '1 hour', sender_account_id = $2
        where campaign_id = $1 and state = 'queued' returning id`,
      [t.campaignId, t.senders[0]],
    );
    const ids = rows.slice(0, 50).map((r) => r.id as string);
    const statements = new PreparedStatements(w.app.databaseUrl, 1, { indexPathsOnly: true, genericPlans: true });
    try {
      const plans = [(await statements.run<{ 'QUERY PLAN': string }>('test.explain.load', `explain ${LOAD_SQL}`, [ids])).map((r) => r['QUERY PLAN']).join('\n')];
      const v = Number((await w.db.query(`select current_setting('server_version_num') as v`)).rows[0].v);
      if (v >= 160000) {
        await w.db.query('begin');
        try {
          await w.db.query(`set local enable_seqscan = off; set local enable_bitmapscan = off; set local enable_hashjoin = off; set local enable_mergejoin = off`);
          plans.push((await w.db.query(`explain (generic_plan) ${nativePlaceholders(LOAD_SQL)}`)).rows.map((r) => r['QUERY PLAN']).join('\n'));
        } finally {
          await w.db.query('rollback');
        }
      }
      for (const plan of plans) {
        const reads = [...plan.matchAll(/(Seq Scan|Bitmap Heap Scan|Index Scan|Index Only Scan)(?: using (\S+))? on outbound_messages\b/g)].map((m) => m[2] ?? m[1]);
        assert.deepEqual([...new Set(reads)].sort(), ['outbound_enrollment_step_key', 'outbound_messages_pkey'], plan);
      }
    } finally {
      await statements.close();
    }
  });
});
