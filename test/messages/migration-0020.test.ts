import assert from 'node:assert/strict';
import { emptyDatabaseForMigration } from '../support/harness.ts';
import { nativePlaceholders } from '../../src/db/sql.ts';
import { tallyWindow, usedSql } from '../../src/modules/messages/tallies.ts';

// 0020 creates the sent tallies and tallies the messages already sent: on a database upgraded
// with a day's sends in it, the claim's count from the tallies equals the messages' own count
// from the first claim on.
describe('migration 0020: the messages already sent are tallied', function () {
  this.timeout(60_000);
  const scratch = emptyDatabaseForMigration();

  it("tallies every pool's and account's messages of the last two days; the window's count equals the messages' at every moment after", async () => {
    await scratch.orm.getMigrator().up({ to: '0019_webhook_fanouts' });
    // Campaign messages of two pools and three accounts over the last 60 hours (one every 7
    // minutes and 13 seconds), a forward (an account's, no pool), and messages never sent.
    await scratch.db.query(
      `insert into outbound_messages (id, workspace_id, campaign_id, step_index, kind, state, due_at, pool_id, sender_account_id, to_email, message_id_header, sent_at, created_at, updated_at)
       select 'msg_old_' || g, 'wsp_1', 'cmp_1', g, 'campaign', case when g % 11 = 0 then 'bounced' else 'sent' end, t,
              case when g % 2 = 0 then 'pool_a' else 'pool_b' end, 'snd_' || (g % 3), 'l' || g || '@x.example', '<old.' || g || '@x.example>', t, t, t
         from generate_series(1, 500) g, lateral (select now() - g * interval '433 seconds' as t) x`,
    );
    await scratch.db.query(
      `insert into outbound_messages (id, workspace_id, campaign_id, lead_id, step_index, kind, state, due_at, sender_account_id, to_email, sent_at, created_at, updated_at)
       values ('msg_fwd', 'wsp_1', 'cmp_1', 'lead_1', 0, 'forward', 'sent', now(), 'snd_1', 'sdr@x.example', now() - interval '3 hours', now(), now())`,
    );
    await scratch.db.query(
      `insert into outbound_messages (id, workspace_id, campaign_id, step_index, kind, state, due_at, pool_id, sender_account_id, to_email, created_at, updated_at)
       values ('msg_queued', 'wsp_1', 'cmp_1', 0, 'campaign', 'queued', now(), null, null, 'q@x.example', now(), now()),
              ('msg_sending', 'wsp_1', 'cmp_1', 1, 'campaign', 'sending', now(), 'pool_a', 'snd_0', 's@x.example', now(), now())`,
    );
    await scratch.orm.getMigrator().up();

    const { rows: [dbNow] } = await scratch.db.query(`select now() as t`);
    const start = new Date(dbNow.t).getTime();
    let compared = 0;
    for (let at = start; at <= start + 25 * 3_600_000; at += 37 * 60_000 + 11_000) {
      const w = tallyWindow(new Date(at));
      for (const [owner, column] of [['pool_a', 'pool_id'], ['pool_b', 'pool_id'], ['snd_0', 'sender_account_id'], ['snd_1', 'sender_account_id'], ['snd_2', 'sender_account_id']] as const) {
        const { rows: [got] } = await scratch.db.query(nativePlaceholders(`select ${usedSql('?::text', column)}::int as n`), [owner, w.edgeEnd, owner, w.since, w.edgeEnd]);
        const { rows: [want] } = await scratch.db.query(`select count(*)::int as n from outbound_messages where ${column} = $1 and sent_at > $2`, [owner, w.since]);
        assert.equal(got.n, want.n, `${owner} at ${new Date(at).toISOString()}`);
        if (at === start) assert.ok(want.n > 0, `${owner} sent in the last day`);
        compared++;
      }
    }
    assert.ok(compared > 150);
    // Only the two days before the migration are tallied: nothing older, nothing not sent.
    const { rows: [t] } = await scratch.db.query(`select sum(n)::int as n, min(bucket) as oldest from sent_tallies`);
    const { rows: [m] } = await scratch.db.query(`select count(*)::int as n from outbound_messages where sent_at > now() - interval '48 hours'`);
    assert.equal(t.n, 2 * m.n - 1, 'a pool and an account per campaign message, an account alone for the forward');
    assert.ok(new Date(t.oldest).getTime() >= start - 48 * 3_600_000 - 5 * 60_000);
  });
});
