// outbound_messages has no foreign keys (migration 0017): its owner deletes a workspace's
// messages (and its sent tallies) when the workspace goes, in every state and of every kind, and
// leaves other workspaces' alone.
import assert from 'node:assert/strict';
import { sendingWorld, HOUR } from '../sending/world.ts';
import { recordForward } from '../../src/modules/messages/desk.ts';

describe('messages: deleting a workspace', function () {
  this.timeout(60_000);
  const w = sendingWorld();

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
    // The other campaign still sends its follow-up when it is due.
    w.clock.advance(25 * HOUR);
    await w.dispatcher.runRound();
    assert.equal(w.to('keep.a@x.example').length, 2);
  });
});
