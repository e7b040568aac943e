// Desk sends hold a transaction (and a pooled connection) across their SMTP transaction (a move
// waits for a send in progress): a slow SMTP server must not take every connection of the pool
// the API and the workers share (src/modules/sdrs/desk-slots.ts). The test app's pool has 5.
import assert from 'node:assert/strict';
import { openDesk, type Desk, SDR_EMAIL } from '../drafts/desk-fixture.ts';
import { waitFor } from '../support/wait.ts';
import { holdMailboxHealth, type HeldMailboxHealth } from '../support/mailbox-health.ts';
import { assertThreadCountsExact } from '../support/thread-counts.ts';
import { deskSendCapacity, deskSendSlots, inDeskSendSlot } from '../../src/modules/sdrs/desk-slots.ts';

const POOL = 5;

/** `p`, or a failure naming `what` when it has not settled within `ms`. */
async function within<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let timer!: NodeJS.Timeout;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('SDR desk: sends waiting on a slow SMTP server leave the pool to the API and the workers', function () {
  this.timeout(120_000);
  let desk: Desk;
  const threadIds: string[] = [];

  before(async () => {
    desk = await openDesk();
    threadIds.push(desk.threadId);
    // More of Sam's threads, one per send: sends in different threads wait for no one's lock.
    for (let i = 1; i <= POOL; i++) {
      const id = `thr_slot_${i}`;
      await desk.db.query(
        `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
         values ($1, $2, $3, $4, 'Prospect', 'Re: pricing', 'replied', 'B', 10, now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour')`,
        [id, desk.workspaceId, desk.sdrId, `p${i}@prospects.example`],
      );
      threadIds.push(id);
    }
  });
  after(async () => {
    if (desk) {
      desk.sink.hold = undefined;
      await assertThreadCountsExact(desk.db);
      await desk.close();
    }
  });

  it('pool size + 1 sends held at the server: the inbox answers, a job runs, the sends wait for a slot and then all go out once', async () => {
    assert.equal(deskSendCapacity(POOL), 2);
    desk.sink.received.length = 0;
    const ended = desk.sink.dataEnded.length;
    let accept!: () => void;
    desk.sink.hold = new Promise<void>((r) => (accept = r));
    let sends: Promise<{ status: number; body: any }>[] = [];
    try {
      // Every other one with an Idempotency-Key (the keyed send's advisory lock in the same transaction).
      sends = threadIds.map((id, i) =>
        desk.app.request('POST', `/v1/sdr/threads/${id}/send-manual`, {
          key: desk.sdrKey,
          body: { bodyText: `Hi, following up (${i}).\nSam` },
          headers: i % 2 ? { 'Idempotency-Key': `slot-${i}` } : {},
        }),
      );
      // As many sends at the server as there are slots; the others wait for one, holding no connection.
      await waitFor('the sends at the SMTP server', async () => desk.sink.dataEnded.length - ended >= deskSendCapacity(POOL));
      await waitFor('the other sends waiting for a slot', async () => deskSendSlots(desk.app.deps.orm.em).waiting === threadIds.length - deskSendCapacity(POOL));

      // The API answers meanwhile (each request needs a connection of the pool)...
      const inbox = await within('GET /v1/sdr/inbox', 5_000, desk.app.request('GET', '/v1/sdr/inbox', { key: desk.sdrKey }));
      assert.equal(inbox.status, 200, JSON.stringify(inbox.body));
      assert.equal(inbox.body.data.threads.length, threadIds.length);
      const snooze = await within(
        'a snooze of a thread not being sent',
        5_000,
        desk.app.request('POST', `/v1/sdr/threads/${threadIds.at(-1)}/snooze`, { key: desk.sdrKey, body: { until: new Date(Date.now() + 86_400_000).toISOString() } }),
      );
      assert.equal(snooze.status, 200, JSON.stringify(snooze.body));
      // ...and so does a worker's job (the follow-up round: two transactions).
      await within('the follow-up round', 5_000, desk.app.services().followups.scheduleDue());
      assert.equal(desk.sink.dataEnded.length - ended, deskSendCapacity(POOL), 'no more sends at the server than slots');
      assert.deepEqual(deskSendSlots(desk.app.deps.orm.em), { inUse: 2, capacity: 2, waiting: threadIds.length - 2 });
    } finally {
      accept();
    }
    const answers = await Promise.all(sends);
    for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(desk.sink.received.length, threadIds.length, 'one mail per send');
    assert.deepEqual(desk.sink.received.map((m) => m.to[0]).sort(), ['dana@northwind.example', ...threadIds.slice(1).map((_, i) => `p${i + 1}@prospects.example`)].sort());
    assert.equal(new Set(desk.sink.received.map((m) => m.parsed.messageId)).size, threadIds.length);
    const outbound = await desk.db.query(`select thread_id, count(*)::int as n from thread_messages where direction = 'outbound' and thread_id = any($1) group by thread_id`, [threadIds]);
    assert.equal(outbound.rows.length, threadIds.length);
    assert.ok(outbound.rows.every((r) => r.n === 1), JSON.stringify(outbound.rows));
    assert.deepEqual(deskSendSlots(desk.app.deps.orm.em), { inUse: 0, capacity: 2, waiting: 0 });
  });

  it("the thread's other writers go on while a send in it waits at the SMTP server: the prospect's answer, a snooze, the priority job", async () => {
    const ended = desk.sink.dataEnded.length;
    let accept!: () => void;
    desk.sink.hold = new Promise<void>((r) => (accept = r));
    let sending: Promise<{ status: number; body: any }> | undefined;
    try {
      sending = desk.app.request('POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { key: desk.sdrKey, body: { bodyText: 'Hi Dana, the contract is attached.\nSam' } });
      await waitFor('the send at the SMTP server', async () => desk.sink.dataEnded.length > ended);
      // The prospect answers meanwhile; the mailbox watcher adds the answer to the thread.
      await desk.imap.append(
        SDR_EMAIL,
        'pw',
        [`From: Dana Reyes <dana@northwind.example>`, `To: ${SDR_EMAIL}`, 'Subject: Re: pricing', `Date: ${new Date().toUTCString()}`, 'Message-ID: <held1@northwind.example>', 'In-Reply-To: <r1@northwind.example>', 'References: <r1@northwind.example>', 'Content-Type: text/plain; charset=utf-8', '', 'And can we add two more seats later?', ''].join('\r\n'),
      );
      await waitFor(
        'the answer in the thread while the send is held',
        async () => (await desk.db.query(`select 1 from thread_messages where thread_id = $1 and message_id_header = '<held1@northwind.example>'`, [desk.threadId])).rows.length > 0,
        10_000,
      );
      const snooze = await within(
        'a snooze of the thread being sent',
        5_000,
        desk.app.request('POST', `/v1/sdr/threads/${desk.threadId}/snooze`, { key: desk.sdrKey, body: { until: new Date(Date.now() + 86_400_000).toISOString() } }),
      );
      assert.equal(snooze.status, 200, JSON.stringify(snooze.body));
      // A stale score (the answer computed it again), so that the priority job writes the thread.
      await within('a write of the score', 5_000, desk.db.query(`update prospect_threads set priority_score = 0 where id = $1`, [desk.threadId]));
      assert.ok((await within('the priority job', 5_000, desk.app.services().sdrThreads.refreshPriorities())) >= 1, 'the priority job wrote the thread');
      assert.equal(desk.sink.received.filter((m) => m.to[0] === 'dana@northwind.example' && /contract is attached/.test(m.parsed.text ?? '')).length, 0, 'still held at the server');
    } finally {
      accept();
    }
    const sent = await sending!;
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const t = (await desk.db.query(`select status, priority_score from prospect_threads where id = $1`, [desk.threadId])).rows[0];
    assert.equal(t.status, 'awaiting_reply', 'the send, recorded after the answer, awaits the next');
    assert.ok(Number(t.priority_score) > 0);
  });

  it('a send that finds every slot taken for too long is answered 503 temporarily_unavailable, and the slots are handed on in order', async () => {
    const em = desk.app.deps.orm.em;
    const releases: Array<() => void> = [];
    const held = [0, 1].map(() => inDeskSendSlot(em, () => new Promise<void>((r) => releases.push(r))));
    await waitFor('both slots taken', async () => releases.length === 2);
    await assert.rejects(
      inDeskSendSlot(em, async () => 'never', 200),
      (err: any) => err.status === 503 && err.code === 'temporarily_unavailable' && err.retryAfter === 5,
    );
    const order: string[] = [];
    const queued = ['first', 'second'].map((n) => inDeskSendSlot(em, async () => void order.push(n)));
    releases[0]();
    releases[1]();
    await Promise.all([...held, ...queued]);
    assert.deepEqual(order, ['first', 'second']);
    assert.deepEqual(deskSendSlots(em), { inUse: 0, capacity: 2, waiting: 0 });
  });

  it('a send that waited for a slot goes out through the mailbox as it is then: disconnected meanwhile, 409 mail_not_connected and nothing sent', async () => {
    const em = desk.app.deps.orm.em;
    const releases: Array<() => void> = [];
    const slots = [0, 1].map(() => inDeskSendSlot(em, () => new Promise<void>((r) => releases.push(r))));
    await waitFor('both slots taken', async () => releases.length === 2);
    const mails = desk.sink.received.length;
    let sending: Promise<{ status: number; body: any }> | undefined;
    let held: HeldMailboxHealth | undefined;
    try {
      sending = desk.app.request('POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { key: desk.sdrKey, body: { bodyText: 'One last thing before I log off.\nSam' } });
      await waitFor('the send waiting for a slot', async () => deskSendSlots(em).waiting === 1);
      // The mailbox's login is refused meanwhile (the watcher found out, or the SDR changed the
      // password); held until the answer, as a watcher session logging in could set it
      // active again.
      held = await holdMailboxHealth(desk.app.databaseUrl, desk.sdrId, 'needs_reauth');
    } finally {
      releases.forEach((r) => r());
    }
    try {
      await Promise.all(slots);
      const res = await sending!;
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'mail_not_connected');
      assert.match(res.body.error.message, /needs_reauth/);
      assert.equal(desk.sink.received.length, mails, 'nothing sent');
    } finally {
      await held?.release();
    }
  });
});
