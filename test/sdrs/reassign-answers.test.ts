// Which thread a prospect's answer joins once threads move between SDRs (threadOfAnswer): mail
// read from the SDRs' own mailboxes (Dovecot) by the mailbox watcher, on the real desk.
import assert from 'node:assert/strict';
import { openDesk, type Desk, SDR_EMAIL } from '../drafts/desk-fixture.ts';
import { seedSdr } from '../support/harness.ts';
import { waitFor } from '../support/wait.ts';
import { assertThreadCountsExact } from '../support/thread-counts.ts';

const NORA = 'nora@acme-sales.example';
const PROSPECT = 'dana@northwind.example';

describe('SDR desk: answers by sender after threads moved between SDRs', function () {
  this.timeout(120_000);
  let desk: Desk;
  let noraId: string;
  let noraKey: string;
  let n = 0;

  before(async () => {
    desk = await openDesk();
    desk.sink.users.set(NORA, 'pw');
    desk.imap.addUser(NORA, 'pw');
    const nora = await seedSdr(desk.app, desk.workspaceId, 'Nora Next', NORA);
    noraId = nora.sdr.id;
    noraKey = nora.sdrKey;
    const connected = await desk.app.services().sdrs.connectMail(noraId, { smtpUrl: desk.sink.url(NORA, 'pw'), imapUrl: desk.imap.url(NORA, 'pw') });
    assert.equal(connected.mailbox.healthState, 'active');
  });
  after(async () => {
    if (desk) {
      await assertThreadCountsExact(desk.db);
      await desk.close();
    }
  });

  const as = (key: string, method: string, path: string, body?: unknown) => desk.app.request(method, path, { key, body });
  /** A new mail of the prospect to `to`'s mailbox that references nothing (a new message, not a Reply); resolves to the thread it joined. */
  const freshMail = async (to: string, text: string): Promise<string> => {
    const id = `<fresh${++n}.${Date.now()}@northwind.example>`;
    await desk.imap.append(
      to,
      'pw',
      [`From: Dana Reyes <${PROSPECT}>`, `To: ${to}`, `Subject: Quick question`, `Date: ${new Date().toUTCString()}`, `Message-ID: ${id}`, 'Content-Type: text/plain; charset=utf-8', '', text, ''].join('\r\n'),
    );
    return waitFor(`${id} in a thread`, async () => {
      const [row] = (await desk.db.query(`select thread_id from thread_messages where message_id_header = $1`, [id])).rows;
      return row?.thread_id as string | undefined;
    });
  };
  const addThread = async (id: string, sdrId: string, status: string, ageDays: number) => {
    await desk.db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
       values ($1, $2, $3, $4, 'Dana Reyes', 'Re: an older conversation', $5, 'C', 10, now() - make_interval(days => $6), now() - make_interval(days => $6), now() - make_interval(days => $6))`,
      [id, desk.workspaceId, sdrId, PROSPECT, status, ageDays],
    );
    await desk.db.query(
      `insert into thread_messages (id, thread_id, direction, message_id_header, from_email, to_emails, cc_emails, subject, body_text, at, created_at)
       values ($1, $2, 'outbound', $3, $4, '{}', '{}', 'Re: an older conversation', 'Hello again', now() - make_interval(days => $5), now() - make_interval(days => $5))`,
      [`tmsg_${id}`, id, `<${id}@acme-sales.example>`, SDR_EMAIL, ageDays],
    );
  };

  it("a new mail to the old SDR's mailbox joins the conversation just moved away, not an old closed thread the old SDR still holds", async () => {
    // Sam holds a closed thread with Dana from last year, and the live one (Sam answered today).
    await addThread('thr_last_year', desk.sdrId, 'lost_timing', 200);
    const sent = await as(desk.sdrKey, 'POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { bodyText: 'Hi Dana,\nthe Team plan is $49 per rep.\nSam' });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    // Sam leaves: the live thread moves to Nora; the closed one stays with Sam.
    const moved = await as(desk.adminKey, 'POST', `/v1/sdr-profiles/${desk.sdrId}/reassign-threads`, { toSdrId: noraId });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.deepEqual(moved.body.data.threadIds, [desk.threadId]);

    // Dana writes to Sam's address afresh (no In-Reply-To, no References): by sender.
    const joined = await freshMail(SDR_EMAIL, 'Hi Sam, one more thing about the pricing: is there a discount for annual billing?');
    assert.equal(joined, desk.threadId, 'the moved conversation, whose last mail from Sam is the latest');
    const t = (await as(noraKey, 'GET', `/v1/sdr/threads/${desk.threadId}`)).body.data;
    assert.equal(t.status, 'replied', 'Nora sees the answer');
    const old = (await desk.db.query(`select status, (select count(*)::int from thread_messages where thread_id = 'thr_last_year') as n from prospect_threads where id = 'thr_last_year'`)).rows[0];
    assert.deepEqual(old, { status: 'lost_timing', n: 1 }, 'the closed thread got nothing');
  });

  it("a thread the old SDR opened with the contact after the move takes the old SDR's mail; the new SDR's mailbox keeps its own", async () => {
    // A new reply of Dana's handed to Sam after the move: a new thread of Sam's.
    await addThread('thr_after_move', desk.sdrId, 'awaiting_reply', 0);
    const toSam = await freshMail(SDR_EMAIL, 'Hi Sam, about the other team: can we talk on Friday?');
    assert.equal(toSam, 'thr_after_move');
    // Mail to Nora's mailbox: Nora's thread (never Sam's).
    const toNora = await freshMail(NORA, 'Hi Nora, Tuesday still works for me.');
    assert.equal(toNora, desk.threadId);
  });

  it('a thread moved back (Sam -> Nora -> Sam): mail to either mailbox joins it while no newer thread of the mailbox is there', async () => {
    // Moved back to Sam; Sam's thread after the move closes, so the moved thread is the live one.
    assert.equal((await as(desk.adminKey, 'POST', `/v1/sdr-profiles/${noraId}/reassign-threads`, { toSdrId: desk.sdrId, threadIds: [desk.threadId] })).status, 200);
    const toNora = await freshMail(NORA, 'Hi Nora, forwarding this to you too: see you Tuesday.');
    assert.equal(toNora, desk.threadId, "Nora's mailbox: the thread Nora held");
    const moves = (await desk.db.query(`select from_sdr_id, to_sdr_id from thread_reassignments where thread_id = $1 order by created_at, id`, [desk.threadId])).rows;
    assert.deepEqual(moves, [
      { from_sdr_id: desk.sdrId, to_sdr_id: noraId },
      { from_sdr_id: noraId, to_sdr_id: desk.sdrId },
    ]);
    const samInbox = ((await as(desk.sdrKey, 'GET', '/v1/sdr/inbox')).body.data.threads as { id: string }[]).map((t) => t.id).sort();
    assert.deepEqual(samInbox, [desk.threadId, 'thr_after_move', 'thr_last_year'].sort());
  });
});
