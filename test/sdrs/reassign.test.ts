// Reassigning prospect threads from one SDR to another (POST /v1/sdr-profiles/:sdrId/reassign-threads),
// end to end on the real desk: a campaign reply caught over IMAP and assigned (a real forward),
// the SDRs' own mailboxes on the SMTP sink and Dovecot, watched by the mailbox watcher.
import assert from 'node:assert/strict';
import { openDesk, type Desk, SDR_EMAIL } from '../drafts/desk-fixture.ts';
import { seedSdr, seedWorkspace } from '../support/harness.ts';
import { waitFor, waitForLockWait } from '../support/wait.ts';
import { holdMailboxHealth } from '../support/mailbox-health.ts';
import { assertThreadCountsExact } from '../support/thread-counts.ts';

const NORA = 'nora@acme-sales.example';
const PROSPECT = 'dana@northwind.example';

describe('SDR desk: reassigning threads to another SDR', function () {
  this.timeout(120_000);
  let desk: Desk;
  let noraId: string;
  let noraKey: string;
  let olgaId: string;

  before(async () => {
    desk = await openDesk();
    desk.sink.users.set(NORA, 'pw');
    desk.imap.addUser(NORA, 'pw');
    const nora = await seedSdr(desk.app, desk.workspaceId, 'Nora Next', NORA);
    noraId = nora.sdr.id;
    noraKey = nora.sdrKey;
    const connected = await desk.app.services().sdrs.connectMail(noraId, { smtpUrl: desk.sink.url(NORA, 'pw'), imapUrl: desk.imap.url(NORA, 'pw') });
    assert.equal(connected.mailbox.healthState, 'active');
    olgaId = (await desk.db.query(`select id from sdrs where email = 'olga@acme-sales.example'`)).rows[0].id;
  });
  after(async () => {
    if (desk) {
      await assertThreadCountsExact(desk.db);
      await desk.close();
    }
  });

  const reassign = (from: string, body: unknown, key = desk.adminKey) => desk.app.request('POST', `/v1/sdr-profiles/${from}/reassign-threads`, { key, body });
  const as = (key: string, method: string, path: string, body?: unknown) => desk.app.request(method, path, { key, body });
  const inboxIds = async (key: string) => ((await as(key, 'GET', '/v1/sdr/inbox')).body.data.threads as { id: string }[]).map((t) => t.id);
  /** Everything a reassignment writes, to compare before and after a refused one. */
  const state = async () => ({
    threads: (await desk.db.query(`select id, sdr_id, status, snoozed_until, updated_at from prospect_threads order by id`)).rows,
    drafts: (await desk.db.query(`select id, sdr_id, state, updated_at from drafts order by id`)).rows,
    tasks: (await desk.db.query(`select id, sdr_id, status, due_at from followup_tasks order by id`)).rows,
    moves: (await desk.db.query(`select * from thread_reassignments order by id`)).rows,
  });
  const mailsOf = async (user: string) => desk.sink.received.filter((m) => m.user === user);

  it('refuses every bad request in the contract envelope, and a refused request moves nothing', async () => {
    const before = await state();
    const cases: Array<[string, string, unknown, number, string, string?]> = [
      ['an SDR key', desk.sdrId, { toSdrId: noraId }, 403, 'forbidden'],
      ['an unknown SDR', 'sdr_nope', { toSdrId: noraId }, 404, 'sdr_not_found'],
      ['no toSdrId', desk.sdrId, {}, 400, 'invalid_request', 'toSdrId'],
      ['a toSdrId of the wrong type', desk.sdrId, { toSdrId: 42 }, 400, 'invalid_request', 'toSdrId'],
      ['an unknown field', desk.sdrId, { toSdrId: noraId, force: true }, 400, 'invalid_request'],
      ['an empty threadIds', desk.sdrId, { toSdrId: noraId, threadIds: [] }, 400, 'invalid_request', 'threadIds'],
      ['threadIds not a list', desk.sdrId, { toSdrId: noraId, threadIds: desk.threadId }, 400, 'invalid_request', 'threadIds'],
      ['the same SDR', desk.sdrId, { toSdrId: desk.sdrId }, 422, 'validation_failed', 'toSdrId'],
      ['a target that is no SDR of the workspace', desk.sdrId, { toSdrId: 'sdr_nope' }, 422, 'validation_failed', 'toSdrId'],
      ['a target without a mailbox', desk.sdrId, { toSdrId: olgaId }, 409, 'mail_not_connected'],
      ['a thread the SDR does not hold', desk.sdrId, { toSdrId: noraId, threadIds: [desk.threadId, 'thr_nope'] }, 422, 'validation_failed', 'threadIds'],
    ];
    for (const [name, from, body, status, code, field] of cases) {
      const res = await reassign(from, body, name === 'an SDR key' ? desk.sdrKey : desk.adminKey);
      assert.equal(res.status, status, `${name}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, code, name);
      assert.equal(typeof res.body.error.message, 'string', name);
      if (field) assert.ok((res.body.errors as { field: string }[]).some((e) => e.field === field), `${name}: ${JSON.stringify(res.body)}`);
    }
    const unknownThread = await reassign(desk.sdrId, { toSdrId: noraId, threadIds: [desk.threadId, 'thr_nope'] });
    assert.deepEqual(unknownThread.body.errors, [{ index: 1, field: 'threadIds', value: 'thr_nope', message: 'is not a thread of Sam Rivera' }]);

    // Another workspace's SDR is invisible: as a target (422) and as the SDR whose threads move (404).
    const other = await seedWorkspace(desk.app, 'elsewhere');
    const stranger = await seedSdr(desk.app, other.workspace.id, 'Sid Stranger', 'sid@elsewhere.example');
    assert.equal((await reassign(desk.sdrId, { toSdrId: stranger.sdr.id })).status, 422);
    assert.equal((await reassign(stranger.sdr.id, { toSdrId: noraId })).body.error.code, 'sdr_not_found');

    // A deactivated target: 409 sdr_inactive.
    assert.equal((await desk.app.request('PATCH', `/v1/sdr-profiles/${noraId}`, { key: desk.adminKey, body: { active: false } })).status, 200);
    const inactive = await reassign(desk.sdrId, { toSdrId: noraId });
    assert.equal(inactive.status, 409);
    assert.equal(inactive.body.error.code, 'sdr_inactive');
    assert.equal((await desk.app.request('PATCH', `/v1/sdr-profiles/${noraId}`, { key: desk.adminKey, body: { active: true } })).status, 200);

    // A target whose mailbox refused its login cannot answer the threads either (the state held
    // while the request runs: a watcher session logging in could set it active again).
    const reauthHeld = await holdMailboxHealth(desk.app.databaseUrl, noraId, 'needs_reauth');
    try {
      const reauth = await reassign(desk.sdrId, { toSdrId: noraId });
      assert.equal(reauth.status, 409);
      assert.equal(reauth.body.error.code, 'mail_not_connected');
      assert.match(reauth.body.error.message, /needs_reauth/);
    } finally {
      await reauthHeld.release();
    }

    const after = await state();
    assert.deepEqual(
      after.threads.map((t) => [t.id, t.sdr_id]),
      before.threads.map((t) => [t.id, t.sdr_id]),
    );
    assert.deepEqual(after.drafts, before.drafts);
    assert.deepEqual(after.tasks, before.tasks);
    assert.deepEqual(after.moves, []);
  });

  it("moves the SDR's open threads with their pending follow-up (due as before), status and snooze; open drafts are discarded; the handoff keeps who it was handed to", async () => {
    // Sam answered the prospect, a follow-up is pending, an AI draft is open, the thread is snoozed.
    const sent = await as(desk.sdrKey, 'POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { bodyText: 'Hi Dana,\nthe Team plan is $49 per rep.\nSam' });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await desk.app.services().followups.scheduleDue();
    const [task] = (await desk.db.query(`select id, due_at from followup_tasks where thread_id = $1 and status = 'pending'`, [desk.threadId])).rows;
    assert.ok(task, 'a pending follow-up');
    const [draft] = (await as(desk.sdrKey, 'POST', '/v1/sdr/drafts/generate', { threadId: desk.threadId, variantCount: 1 })).body.data.drafts;
    assert.equal(draft.state, 'generated');
    const until = new Date(Date.now() + 2 * 86_400_000).toISOString();
    assert.equal((await as(desk.sdrKey, 'POST', `/v1/sdr/threads/${desk.threadId}/snooze`, { until })).status, 200);
    // A closed thread of Sam's stays with Sam when no threadIds are given.
    const closedId = 'thr_closed_sam';
    await desk.db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
       values ($1, $2, $3, 'old@lead.example', 'Old Lead', 'Re: last year', 'won', 'C', 10, now() - interval '30 days', now() - interval '30 days', now() - interval '30 days')`,
      [closedId, desk.workspaceId, desk.sdrId],
    );
    // Sam deactivated (on leave): the admin moves the threads.
    assert.equal((await desk.app.request('PATCH', `/v1/sdr-profiles/${desk.sdrId}`, { key: desk.adminKey, body: { active: false } })).status, 200);

    const res = await reassign(desk.sdrId, { toSdrId: noraId });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.data, { fromSdrId: desk.sdrId, toSdrId: noraId, threadIds: [desk.threadId], discardedDraftIds: [draft.id], followupIds: [task.id] });

    // Sam (active again) sees neither the thread, its draft nor its follow-up; Nora sees them all.
    assert.equal((await desk.app.request('PATCH', `/v1/sdr-profiles/${desk.sdrId}`, { key: desk.adminKey, body: { active: true } })).status, 200);
    assert.deepEqual(await inboxIds(desk.sdrKey), [closedId]);
    assert.equal((await as(desk.sdrKey, 'GET', `/v1/sdr/threads/${desk.threadId}`)).body.error.code, 'thread_not_found');
    assert.equal((await as(desk.sdrKey, 'GET', `/v1/sdr/drafts/${draft.id}`)).status, 404);
    assert.deepEqual((await as(desk.sdrKey, 'GET', '/v1/sdr/followups/due?includeUpcoming=true')).body.data, []);
    assert.deepEqual(await inboxIds(noraKey), [desk.threadId]);
    const t = (await as(noraKey, 'GET', `/v1/sdr/threads/${desk.threadId}`)).body.data;
    assert.equal(t.status, 'awaiting_reply');
    assert.equal(t.snoozedUntil, until, 'the snooze is kept');
    assert.equal(t.drafts[0].state, 'discarded');
    assert.equal(t.handoff.toEmail, SDR_EMAIL, "the handoff is the history: the reply was forwarded to Sam");
    const fups = (await as(noraKey, 'GET', '/v1/sdr/followups/due?includeUpcoming=true')).body.data;
    assert.deepEqual(
      fups.map((f: { id: string; dueAt: string }) => [f.id, f.dueAt]),
      [[task.id, new Date(task.due_at).toISOString()]],
      'the follow-up moved, due when it was',
    );
    const [handoff] = (await desk.db.query(`select sdr_id from handoffs where thread_id = $1`, [desk.threadId])).rows;
    assert.equal(handoff.sdr_id, desk.sdrId);
    const moves = (await desk.db.query(`select thread_id, from_sdr_id, to_sdr_id, drafts_discarded from thread_reassignments`)).rows;
    assert.deepEqual(moves, [{ thread_id: desk.threadId, from_sdr_id: desk.sdrId, to_sdr_id: noraId, drafts_discarded: 1 }]);
    // Sam's send in the moved thread is refused (the thread is no longer theirs); nothing goes out.
    const before = desk.sink.received.length;
    const late = await as(desk.sdrKey, 'POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { bodyText: 'One more thing' });
    assert.equal(late.status, 404);
    assert.equal(late.body.error.code, 'thread_not_found');
    assert.equal(desk.sink.received.length, before);
    await assertThreadCountsExact(desk.db);
  });

  it("the conversation goes on: Nora's send leaves from Nora's mailbox in the prospect's mail thread, and answers to either mailbox join the thread", async () => {
    const sam = (await mailsOf(SDR_EMAIL)).at(-1)!.parsed;
    desk.sink.received.length = 0;
    const res = await as(noraKey, 'POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { bodyText: 'Hi Dana, I am taking over from Sam while he is away. Does Tuesday 10am work?\nNora' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(desk.sink.received.length, 1);
    const mail = desk.sink.received[0];
    assert.equal(mail.user, NORA, "through Nora's own SMTP login");
    assert.equal(mail.parsed.from!.value[0].address, NORA);
    assert.deepEqual(mail.to, [PROSPECT]);
    // In-Reply-To: the thread's last message a person wrote (Sam's answer); References: the whole chain.
    assert.equal(mail.parsed.inReplyTo, sam.messageId);
    const refs = ([] as string[]).concat(mail.parsed.references ?? []);
    assert.ok(refs.includes('<r1@northwind.example>') && refs.includes(sam.messageId!), JSON.stringify(refs));
    assert.match(mail.parsed.messageId!, /@acme-sales\.example>$/);

    // The prospect answers Sam's earlier mail: it arrives in Sam's (still watched) mailbox.
    await desk.imap.append(
      SDR_EMAIL,
      'pw',
      [`From: Dana Reyes <${PROSPECT}>`, `To: ${SDR_EMAIL}`, `Subject: Re: ${sam.subject}`, `Date: ${new Date().toUTCString()}`, 'Message-ID: <r2@northwind.example>', `In-Reply-To: ${sam.messageId}`, `References: <r1@northwind.example> ${sam.messageId}`, 'Content-Type: text/plain; charset=utf-8', '', 'Thanks Sam, can you send the contract draft?', ''].join('\r\n'),
    );
    const joined = await waitFor('the answer to the old mailbox in the moved thread', async () => {
      const t = (await as(noraKey, 'GET', `/v1/sdr/threads/${desk.threadId}`)).body.data;
      return t.messages.some((m: { messageIdHeader: string }) => m.messageIdHeader === '<r2@northwind.example>') ? t : undefined;
    });
    assert.equal(joined.status, 'replied');
    // And an answer to Nora's mail, in Nora's mailbox.
    await desk.imap.append(
      NORA,
      'pw',
      [`From: Dana Reyes <${PROSPECT}>`, `To: ${NORA}`, `Subject: Re: ${mail.parsed.subject}`, `Date: ${new Date().toUTCString()}`, 'Message-ID: <r3@northwind.example>', `In-Reply-To: ${mail.parsed.messageId}`, `References: <r1@northwind.example> ${sam.messageId} ${mail.parsed.messageId}`, 'Content-Type: text/plain; charset=utf-8', '', 'Tuesday 10am works, Nora.', ''].join('\r\n'),
    );
    const both = await waitFor('the answer to the new mailbox in the thread', async () => {
      const t = (await as(noraKey, 'GET', `/v1/sdr/threads/${desk.threadId}`)).body.data;
      return t.messages.some((m: { messageIdHeader: string }) => m.messageIdHeader === '<r3@northwind.example>') ? t : undefined;
    });
    // Each once, wherever it sorts: the thread is ordered by time, and an answer's Date has whole
    // seconds, so within a second it may sort before Nora's send or Sam's last one (the last
    // three by position left r2 out in CI).
    const seen = both.messages.map((m: { direction: string; fromEmail: string; messageIdHeader: string }) => `${m.direction} ${m.fromEmail} ${m.messageIdHeader}`);
    assert.equal(new Set(seen).size, seen.length, `no message twice: ${JSON.stringify(seen)}`);
    for (const want of [`inbound ${PROSPECT} <r2@northwind.example>`, `inbound ${PROSPECT} <r3@northwind.example>`, `outbound ${NORA} ${mail.parsed.messageId}`])
      assert.ok(seen.includes(want), `${want} in ${JSON.stringify(seen)}`);
    assert.equal(seen.filter((m: string) => m.startsWith(`outbound ${NORA} `)).length, 1, "Nora's one send");
    assert.equal((await desk.db.query(`select count(*)::int as n from prospect_threads where contact_email = $1`, [PROSPECT])).rows[0].n, 1, 'no second thread');
    assert.deepEqual(await inboxIds(desk.sdrKey), ['thr_closed_sam'], 'the answers do not bring the thread back to Sam');
  });

  it("a send of the old SDR in progress finishes first: the reassignment waits for it, and the mail leaves once, from the old SDR's mailbox", async () => {
    desk.sink.received.length = 0;
    const ended = desk.sink.dataEnded.length;
    let accept!: () => void;
    desk.sink.hold = new Promise<void>((r) => (accept = r));
    try {
      const sending = as(noraKey, 'POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { bodyText: 'Confirmed: Tuesday 10am. Invite on its way.\nNora' });
      await waitFor('the send at the SMTP server', async () => desk.sink.dataEnded.length > ended);
      let answered = false;
      const moving = reassign(noraId, { toSdrId: desk.sdrId }).then((r) => ((answered = true), r));
      await waitForLockWait(desk.app.databaseUrl, 'the reassignment waiting for the thread', 'prospect_threads');
      assert.equal(answered, false, 'the reassignment waits for the send in progress');
      accept();
      const [s, m] = await Promise.all([sending, moving]);
      assert.equal(s.status, 200, JSON.stringify(s.body));
      assert.equal(m.status, 200, JSON.stringify(m.body));
      assert.deepEqual(m.body.data.threadIds, [desk.threadId]);
    } finally {
      desk.sink.hold = undefined;
    }
    assert.equal(desk.sink.received.length, 1, 'one mail');
    assert.equal(desk.sink.received[0].user, NORA);
    const t = (await as(desk.sdrKey, 'GET', `/v1/sdr/threads/${desk.threadId}`)).body.data;
    assert.equal(t.messages.at(-1).fromEmail, NORA, 'the send is recorded in the thread, now back with Sam');
    assert.equal(t.status, 'awaiting_reply');
    assert.equal((await as(noraKey, 'GET', `/v1/sdr/threads/${desk.threadId}`)).status, 404);
  });

  it("a draft send of the old SDR racing the reassignment: sent before it (once, from the old mailbox), or refused after it", async () => {
    // The thread is Sam's again. A draft of Sam's goes out while the admin moves the thread to Nora.
    const [d1] = (await as(desk.sdrKey, 'POST', '/v1/sdr/drafts/generate', { threadId: desk.threadId, variantCount: 1 })).body.data.drafts;
    desk.sink.received.length = 0;
    const ended = desk.sink.dataEnded.length;
    let accept!: () => void;
    desk.sink.hold = new Promise<void>((r) => (accept = r));
    try {
      const sending = as(desk.sdrKey, 'POST', `/v1/sdr/drafts/${d1.id}/send`, {});
      await waitFor('the draft at the SMTP server', async () => desk.sink.dataEnded.length > ended);
      let answered = false;
      const moving = reassign(desk.sdrId, { toSdrId: noraId, threadIds: [desk.threadId] }).then((r) => ((answered = true), r));
      await waitForLockWait(desk.app.databaseUrl, 'the reassignment waiting for the draft being sent', 'from drafts');
      assert.equal(answered, false, 'the reassignment waits for the draft in flight');
      accept();
      const [s, m] = await Promise.all([sending, moving]);
      assert.equal(s.status, 200, JSON.stringify(s.body));
      assert.equal(m.status, 200, JSON.stringify(m.body));
      assert.deepEqual(m.body.data.discardedDraftIds, [], 'the draft was sent, not discarded');
    } finally {
      desk.sink.hold = undefined;
    }
    assert.equal(desk.sink.received.length, 1);
    assert.equal(desk.sink.received[0].user, SDR_EMAIL);

    // Now Nora's: a draft of Nora's, the thread moved back to Sam, then Nora sends it: refused.
    const [d2] = (await as(noraKey, 'POST', '/v1/sdr/drafts/generate', { threadId: desk.threadId, variantCount: 1 })).body.data.drafts;
    const back = await reassign(noraId, { toSdrId: desk.sdrId });
    assert.deepEqual(back.body.data.discardedDraftIds, [d2.id]);
    const late = await as(noraKey, 'POST', `/v1/sdr/drafts/${d2.id}/send`, {});
    assert.equal(late.status, 404, JSON.stringify(late.body));
    // Sam cannot send Nora's draft (written in Nora's voice) either: it was discarded.
    const samSends = await as(desk.sdrKey, 'POST', `/v1/sdr/drafts/${d2.id}/send`, {});
    assert.equal(samSends.status, 409);
    assert.equal(samSends.body.error.code, 'draft_not_sendable');
    assert.equal(desk.sink.received.length, 1, 'nothing more went out');
  });

  it('a send or a draft that reaches its lock after a move committed is refused: nothing goes out from the old mailbox, no draft lands in the moved thread', async () => {
    // The thread is Sam's. A move in progress (uncommitted, holding the thread's row `for update`
    // as lockThreadsOfSdr does) commits while Sam's requests wait for their locks.
    const moveMeanwhile = async (request: () => Promise<{ status: number; body: any }>) => {
      await desk.db.query('begin');
      await desk.db.query(`select id from prospect_threads where id = $1 for update`, [desk.threadId]);
      await desk.db.query(`update prospect_threads set sdr_id = $1 where id = $2`, [noraId, desk.threadId]);
      const pending = request();
      await waitForLockWait(desk.app.databaseUrl, "the request waiting for the thread's lock");
      await desk.db.query('commit');
      const res = await pending;
      await desk.db.query(`update prospect_threads set sdr_id = $1 where id = $2`, [desk.sdrId, desk.threadId]);
      return res;
    };
    desk.sink.received.length = 0;
    const drafts = async () => Number((await desk.db.query(`select count(*)::int as n from drafts where thread_id = $1`, [desk.threadId])).rows[0].n);
    const before = await drafts();
    const generated = await moveMeanwhile(() => as(desk.sdrKey, 'POST', '/v1/sdr/drafts/generate', { threadId: desk.threadId, variantCount: 1 }));
    assert.equal(generated.status, 404, JSON.stringify(generated.body));
    assert.equal(generated.body.error.code, 'thread_not_found');
    assert.equal(await drafts(), before, 'no draft written in Sam’s voice into the moved thread');
    const manual = await moveMeanwhile(() => as(desk.sdrKey, 'POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { bodyText: 'Quick one before I go' }));
    assert.equal(manual.status, 404, JSON.stringify(manual.body));
    assert.equal(manual.body.error.code, 'thread_not_found');
    const keyed = await moveMeanwhile(() => desk.app.request('POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { key: desk.sdrKey, body: { bodyText: 'Quick one before I go' }, headers: { 'Idempotency-Key': 'k-race' } }));
    assert.equal(keyed.status, 404, JSON.stringify(keyed.body));
    assert.equal(desk.sink.received.length, 0, 'nothing went out');
    await assertThreadCountsExact(desk.db);
  });

  it('moves listed threads of any status; refuses a thread whose reply the target already holds', async () => {
    const moved = await reassign(desk.sdrId, { toSdrId: noraId, threadIds: ['thr_closed_sam'] });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.deepEqual(moved.body.data.threadIds, ['thr_closed_sam']);
    assert.equal((await as(noraKey, 'GET', '/v1/sdr/threads/thr_closed_sam')).body.data.status, 'won');
    // Nora gets a thread of the same reply as Sam's (the reply forwarded to her too).
    const replyId = (await desk.db.query(`select reply_id from prospect_threads where id = $1`, [desk.threadId])).rows[0].reply_id;
    await desk.db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, reply_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
       values ('thr_same_reply', $1, $2, $3, $4, 'Dana', 'Re: x', 'new', 'B', 10, now(), now(), now())`,
      [desk.workspaceId, noraId, replyId, PROSPECT],
    );
    const before = await state();
    const clash = await reassign(desk.sdrId, { toSdrId: noraId });
    assert.equal(clash.status, 409, JSON.stringify(clash.body));
    assert.equal(clash.body.error.code, 'reply_already_assigned');
    assert.deepEqual(clash.body.threadIds, [desk.threadId]);
    assert.deepEqual(await state(), before, 'nothing moved');
    // An SDR with no open threads: nothing to move, 200 with an empty list.
    const none = await reassign(olgaId, { toSdrId: noraId });
    assert.equal(none.status, 200, JSON.stringify(none.body));
    assert.deepEqual(none.body.data.threadIds, []);
    await assertThreadCountsExact(desk.db);
  });
});
