// A reassignment racing an assignment of the same reply to the target SDR (sdrs/assign.ts opens
// the target's thread of the reply under the reply's assignment lock): the target never ends
// with two threads of one reply.
import assert from 'node:assert/strict';
import { openDesk, type Desk } from '../drafts/desk-fixture.ts';
import { seedSdr } from '../support/harness.ts';
import { waitForLockWait } from '../support/wait.ts';
import { assertThreadCountsExact } from '../support/thread-counts.ts';

const NORA = 'nora@acme-sales.example';

describe('SDR desk: a reassignment and an assignment of the same reply to the target', function () {
  this.timeout(120_000);
  let desk: Desk;
  let noraId: string;

  before(async () => {
    desk = await openDesk();
    desk.sink.users.set(NORA, 'pw');
    desk.imap.addUser(NORA, 'pw');
    noraId = (await seedSdr(desk.app, desk.workspaceId, 'Nora Next', NORA)).sdr.id;
    const connected = await desk.app.services().sdrs.connectMail(noraId, { smtpUrl: desk.sink.url(NORA, 'pw'), imapUrl: desk.imap.url(NORA, 'pw') });
    assert.equal(connected.mailbox.healthState, 'active');
  });
  after(async () => {
    if (desk) {
      await assertThreadCountsExact(desk.db);
      await desk.close();
    }
  });

  it('the move waits for an assignment of the reply in progress, then refuses with 409 reply_already_assigned; nothing moved', async () => {
    const replyId = (await desk.db.query(`select reply_id from prospect_threads where id = $1`, [desk.threadId])).rows[0].reply_id;
    // The assignment of the reply to Nora, as assign.ts writes it: the reply's assignment lock,
    // then Nora's new thread of the reply, not yet committed (its forward still at the server).
    await desk.db.query('begin');
    await desk.db.query(`select pg_advisory_xact_lock(hashtextextended($1, 0))`, [`assign:${replyId}`]);
    await desk.db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, reply_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
       values ('thr_nora_assigned', $1, $2, $3, 'dana@northwind.example', 'Dana Reyes', 'Re: Coaching', 'new', 'B', 10, now(), now(), now())`,
      [desk.workspaceId, noraId, replyId],
    );
    let answered = false;
    const moving = desk.app
      .request('POST', `/v1/sdr-profiles/${desk.sdrId}/reassign-threads`, { key: desk.adminKey, body: { toSdrId: noraId } })
      .then((r) => ((answered = true), r));
    await waitForLockWait(desk.app.databaseUrl, "the move waiting for the reply's assignment lock");
    const waited = !answered;
    await desk.db.query('commit');
    const res = await moving;
    assert.ok(waited, `the move waits for the assignment in progress (it answered ${res.status} first)`);
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'reply_already_assigned');
    assert.deepEqual(res.body.threadIds, [desk.threadId]);
    const ofReply = (await desk.db.query(`select id, sdr_id from prospect_threads where reply_id = $1 order by id`, [replyId])).rows;
    assert.deepEqual(ofReply, [
      { id: 'thr_nora_assigned', sdr_id: noraId },
      { id: desk.threadId, sdr_id: desk.sdrId },
    ].sort((a, b) => (a.id < b.id ? -1 : 1)));
    assert.equal((await desk.db.query(`select count(*)::int as n from thread_reassignments`)).rows[0].n, 0);
  });
});
