import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, subscribeEvents, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { arfReport, dsn } from '../support/mail.ts';
import { runCliCaptured } from '../support/cli.ts';
import { waitFor } from '../support/wait.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { SendOutcomeRecorder, type SentMessage } from '../../src/modules/sending/outcomes.ts';
import { PreparedStatements } from '../../src/db/statements.ts';
import { transactionRetries } from '../../src/db/transaction.ts';

// An operator corrects a reply's classification (PATCH /v1/replies/:replyId, `mailgate reply
// update`; docs/decisions.md "Correcting a reply's classification"). Step 1 of a two-step
// campaign goes out through smtp-server; the leads' answers are parsed, classified and matched
// by the inbound service as the mailbox watcher hands them over; the effects are read back
// through the API and from PostgreSQL.

const lines = (xs: string[]) => xs.join('\r\n') + '\r\n';

describe("PATCH /v1/replies/:replyId: an operator corrects a reply's classification", function () {
  this.timeout(90_000);
  const secret = randomBytes(32);
  const sink = new SmtpSink();
  let app: TestApp;
  let db: pg.Client;
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;
  let uid = 0;

  before(async () => {
    await sink.start();
    app = await startTestApp({ secretKey: secret });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 2 });
    dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000] });
  });
  after(async () => {
    await messenger.close();
    await dispatcher.close();
    await db.end();
    await app.close();
    await sink.stop();
  });

  interface World {
    key: string;
    keyId: string;
    workspaceId: string;
    campaignId: string;
    watchId: string;
    accountId: string;
    sender: string;
    sent: Map<string, string>;
  }

  /** A running two-step campaign whose step 1 went out to `leads`; step 2 waits 48 hours. */
  async function campaign(leads: string[]): Promise<World> {
    const { adminKey: key, adminKeyId: keyId, workspace } = await seedWorkspace(app);
    await subscribeEvents(app, workspace.id);
    const sender = `alice.${randomBytes(3).toString('hex')}@acme.example`;
    sink.users.set(sender, 'pw');
    const s = app.services();
    const account = await s.senders.add({ workspaceId: workspace.id, email: sender, name: 'Alice', smtpUrl: sink.url(sender, 'pw'), imapUrl: 'imap://alice:pw@127.0.0.1:1' });
    const pool = await s.senders.createPool(workspace.id, 'p', 1000, [account.id]);
    const res = await app.request('POST', '/v1/campaigns', {
      key,
      body: { name: 'Fix the class', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Quick question', bodyHtml: '<p>Hi</p>' }, { subject: '', bodyHtml: '<p>Bump</p>', delayHours: 48 }] },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    await app.request('POST', `/v1/campaigns/${res.body.id}/leads/bulk`, { key, body: { leads: leads.map((e) => ({ email: e })) } });
    assert.equal((await app.request('POST', `/v1/campaigns/${res.body.id}/start`, { key })).status, 200);
    sink.received.length = 0;
    await dispatcher.runRound();
    const sent = new Map(sink.received.filter((r) => leads.includes(r.to[0])).map((r) => [r.to[0], r.parsed.messageId!]));
    assert.equal(sent.size, leads.length);
    // The watcher's lease and cursor, as MailboxWatcher holds them while it reads the mailbox.
    const { rows } = await db.query(`update mailbox_watches set lease_owner = 'test', uid_validity = 1 where sender_account_id = $1 returning id`, [account.id]);
    return { key, keyId, workspaceId: workspace.id, campaignId: res.body.id, watchId: rows[0].id, accountId: account.id, sender, sent };
  }

  /** Mail in the account's mailbox, ingested as the watcher ingests it. */
  async function ingest(w: World, raw: string): Promise<string> {
    return app.services().inbound.ingest({
      watchId: w.watchId,
      workspaceId: w.workspaceId,
      senderAccountId: w.accountId,
      owner: 'test',
      uidValidity: 1n,
      uid: ++uid,
      raw: Buffer.from(raw),
      receivedAt: new Date(),
    });
  }

  /** The lead's answer to step 1 (an auto-reply with `auto`); returns its reply as GET /v1/replies lists it. */
  async function answer(w: World, from: string, body: string, opts: { auto?: boolean } = {}) {
    const raw = lines([
      `From: ${from}`,
      `To: ${w.sender}`,
      `Subject: ${opts.auto ? 'Automatic reply: Quick question' : 'Re: Quick question'}`,
      `Date: ${new Date().toUTCString()}`,
      `Message-ID: <r${++uid}.${Date.now()}@lead.example>`,
      `In-Reply-To: ${w.sent.get(from)}`,
      `References: ${w.sent.get(from)}`,
      ...(opts.auto ? ['Auto-Submitted: auto-replied'] : []),
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      body,
    ]);
    assert.equal(await ingest(w, raw), 'reply');
    return replyOf(w, from);
  }

  async function replyOf(w: World, from: string) {
    const res = await app.request('GET', `/v1/replies?campaignId=${w.campaignId}`, { key: w.key });
    assert.equal(res.status, 200);
    return (res.body as Array<Record<string, any>>).find((r) => r.email === from)!;
  }

  // No return date: the next step moves by MAILGATE_OOO_DEFAULT_DELAY (7 days) and stays scheduled.
  const OOO = 'I am currently out of the office with limited access to email.';
  const INTERESTED = "Yes, this is relevant for us, let's talk on Thursday.";
  const UNSUBSCRIBE = 'Please take me off your list.';

  const reclassify = (w: World, replyId: string, classification: unknown, key = w.key) => app.request('PATCH', `/v1/replies/${replyId}`, { key, body: { classification } });
  const stats = async (w: World) => (await app.request('GET', `/v1/campaigns/${w.campaignId}/stats`, { key: w.key })).body;
  const leads = async (w: World, q = '') => (await app.request('GET', `/v1/campaigns/${w.campaignId}/leads${q}`, { key: w.key })).body.data as Array<{ email: string; status: string; nextSendAt: string | null }>;
  const lead = async (w: World, email: string) => (await leads(w)).find((l) => l.email === email)!;
  const repliedLeads = async (w: World) => (await leads(w, '?replied=true')).map((l) => l.email).sort();
  const events = async (w: World) => (await db.query(`select count(*)::int as n from events where workspace_id = $1`, [w.workspaceId])).rows[0].n as number;
  const step2 = async (w: World, email: string) =>
    (await db.query(`select m.state, m.cancel_reason from outbound_messages m join leads l on l.id = m.lead_id where m.campaign_id = $1 and l.email = $2 and m.step_index = 1`, [w.campaignId, email])).rows[0];

  it('an out-of-office that was a person\'s answer becomes interested: the sequence stops, replied counts it, the list and the ?replied filter agree; the classifier\'s decision and who changed it are kept', async () => {
    const w = await campaign(['away@lead.example', 'other@lead.example']);
    const ooo = await answer(w, 'away@lead.example', OOO, { auto: true });
    assert.equal(ooo.classification, 'out_of_office');
    assert.equal((await lead(w, 'away@lead.example')).status, 'active', 'an out-of-office leaves the sequence going');
    assert.deepEqual([(await stats(w)).replied, (await stats(w)).scheduled], [0, 2]);
    const eventsBefore = await events(w);

    const res = await reclassify(w, ooo.id, 'interested');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.classification, 'interested');
    assert.equal(res.body.classifierClassification, 'out_of_office');
    assert.equal(res.body.decidedBy, 'header:auto-submitted');
    assert.equal(res.body.reclassifiedBy, `key:${w.keyId}`);
    assert.ok(Date.now() - Date.parse(res.body.reclassifiedAt) < 60_000);
    assert.deepEqual(res.body.effects, { changed: true, from: 'out_of_office', replied: 1, sequenceStopped: true, leadStatus: 'replied', suppressed: false, addressSuppressed: false, notes: [] });
    // As an interested reply ingested would have: the lead's sequence ended, its waiting step cancelled, counted once.
    const away = await lead(w, 'away@lead.example');
    assert.deepEqual([away.status, away.nextSendAt], ['replied', null]);
    assert.deepEqual(await step2(w, 'away@lead.example'), { state: 'cancelled', cancel_reason: 'replied' });
    assert.equal((await lead(w, 'other@lead.example')).status, 'active', "another lead's sequence goes on");
    const s = await stats(w);
    assert.deepEqual([s.replied, s.scheduled], [1, 1]);
    assert.deepEqual(await repliedLeads(w), ['away@lead.example']);
    // GET /v1/replies tells both: what it is now and what the classifier said.
    const listed = await replyOf(w, 'away@lead.example');
    assert.deepEqual(
      [listed.classification, listed.classifierClassification, listed.reclassifiedBy, listed.reclassifiedAt],
      ['interested', 'out_of_office', `key:${w.keyId}`, res.body.reclassifiedAt],
    );
    const filtered = (await app.request('GET', `/v1/replies?campaignId=${w.campaignId}&classification=interested`, { key: w.key })).body;
    assert.deepEqual(filtered.map((r: { id: string }) => r.id), [ooo.id]);
    assert.equal(await events(w), eventsBefore, 'no webhook event: reply.received went out when it was received');

    // The same again: a no-op, nothing counted twice.
    const again = await reclassify(w, ooo.id, 'interested');
    assert.equal(again.status, 200);
    assert.deepEqual([again.body.effects.changed, again.body.effects.replied, again.body.reclassifiedAt], [false, 0, res.body.reclassifiedAt]);
    assert.equal((await stats(w)).replied, 1);

    // And back: replied drops, the stopped sequence stays stopped (and says so).
    const back = await reclassify(w, ooo.id, 'out_of_office');
    assert.equal(back.status, 200);
    assert.deepEqual([back.body.classification, back.body.classifierClassification], ['out_of_office', 'out_of_office']);
    assert.deepEqual(
      { ...back.body.effects, notes: back.body.effects.notes.length },
      { changed: true, from: 'interested', replied: -1, sequenceStopped: false, leadStatus: 'replied', suppressed: false, addressSuppressed: false, notes: 1 },
    );
    assert.match(back.body.effects.notes[0], /stays ended \(replied\): a corrected classification does not start a stopped sequence again/);
    assert.equal((await stats(w)).replied, 0);
    assert.deepEqual(await repliedLeads(w), []);
    assert.deepEqual(await step2(w, 'away@lead.example'), { state: 'cancelled', cancel_reason: 'replied' });
    assert.equal(await events(w), eventsBefore);
  });

  it('into unsubscribe: the address is suppressed and the lead ends unsubscribed, as an ingested unsubscribe; out of it the suppression stays, and the answer says so', async () => {
    const w = await campaign(['keen@lead.example']);
    const r = await answer(w, 'keen@lead.example', INTERESTED);
    assert.equal(r.classification, 'interested');
    assert.deepEqual([(await stats(w)).replied, (await lead(w, 'keen@lead.example')).status], [1, 'replied']);

    const unsub = await reclassify(w, r.id, 'unsubscribe');
    assert.equal(unsub.status, 200, JSON.stringify(unsub.body));
    assert.deepEqual(unsub.body.effects, { changed: true, from: 'interested', replied: 0, sequenceStopped: false, leadStatus: 'unsubscribed', suppressed: true, addressSuppressed: true, notes: [] });
    const suppressed = (await db.query(`select reason, source from suppressions where workspace_id = $1 and email_key = 'keen@lead.example'`, [w.workspaceId])).rows;
    assert.deepEqual(suppressed, [{ reason: 'reply_unsubscribe', source: r.id }]);
    const s = await stats(w);
    assert.deepEqual([s.replied, s.unsubscribed], [1, 1], 'an unsubscribe is a person\'s answer: still counted once in replied');
    assert.deepEqual(await repliedLeads(w), ['keen@lead.example']);

    const out = await reclassify(w, r.id, 'not_interested');
    assert.equal(out.status, 200);
    assert.deepEqual(
      { ...out.body.effects, notes: out.body.effects.notes.length },
      { changed: true, from: 'unsubscribe', replied: 0, sequenceStopped: false, leadStatus: 'unsubscribed', suppressed: false, addressSuppressed: true, notes: 1 },
    );
    assert.match(out.body.effects.notes[0], /^keen@lead\.example stays on the suppression list: taking it off is a separate step/);
    assert.equal((await db.query(`select count(*)::int as n from suppressions where workspace_id = $1 and email_key = 'keen@lead.example'`, [w.workspaceId])).rows[0].n, 1);
    const after = await stats(w);
    assert.deepEqual([after.replied, after.unsubscribed], [1, 1]);
    assert.equal((await lead(w, 'keen@lead.example')).status, 'unsubscribed');
  });

  it('an out-of-office made an unsubscribe stops the running sequence and suppresses, as an ingested unsubscribe', async () => {
    const w = await campaign(['gone@lead.example']);
    const r = await answer(w, 'gone@lead.example', OOO, { auto: true });
    const res = await reclassify(w, r.id, 'unsubscribe');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.effects, { changed: true, from: 'out_of_office', replied: 1, sequenceStopped: true, leadStatus: 'unsubscribed', suppressed: true, addressSuppressed: true, notes: [] });
    assert.deepEqual(await step2(w, 'gone@lead.example'), { state: 'cancelled', cancel_reason: 'unsubscribed' });
    const s = await stats(w);
    assert.deepEqual([s.replied, s.unsubscribed, s.scheduled], [1, 1, 0]);
  });

  it('a bounce and a feedback-loop complaint keep their class, and no reply becomes a bounce: 409; bad values 422 or 400, unknown and foreign replies 404; nothing is written', async () => {
    const w = await campaign(['bounced@lead.example', 'complainer@lead.example', 'fine@lead.example']);
    assert.equal(
      await ingest(
        w,
        dsn({ to: w.sender, messageId: `<dsn${++uid}@mx.lead.example>`, original: w.sent.get('bounced@lead.example')!, recipient: 'bounced@lead.example', status: '5.1.1', diagnostic: '550 5.1.1 No such user' }),
      ),
      'bounce',
    );
    assert.equal(await ingest(w, arfReport({ sender: w.sender, original: w.sent.get('complainer@lead.example')!, lead: 'complainer@lead.example', messageId: `<arf-${randomBytes(3).toString('hex')}@feedback.mailbox-provider.example>` })), 'complaint');
    const bounce = await replyOf(w, 'bounced@lead.example');
    const complaint = await replyOf(w, 'complainer@lead.example');
    const fine = await answer(w, 'fine@lead.example', INTERESTED);
    assert.equal(bounce.classification, 'bounce');
    assert.deepEqual([complaint.classification, complaint.decidedBy], ['unsubscribe', 'arf:rfc5965:abuse']);

    const snapshot = async () => ({
      replies: (await db.query(`select id, classification, classifier_classification, reclassified_at, reclassified_by from replies where workspace_id = $1 order by id`, [w.workspaceId])).rows,
      counters: (await db.query(`select * from campaign_counters where campaign_id = $1`, [w.campaignId])).rows,
      enrollments: (await db.query(`select id, status, updated_at from enrollments where campaign_id = $1 order by id`, [w.campaignId])).rows,
      suppressions: (await db.query(`select email_key, reason from suppressions where workspace_id = $1 order by email_key`, [w.workspaceId])).rows,
      events: await events(w),
    });
    const before = await snapshot();
    const other = await seedWorkspace(app);
    const cases: Array<[string, string, unknown, number, string, string?]> = [
      ['a bounce', bounce.id, 'interested', 409, 'reply_not_reclassifiable', 'is a bounce'],
      ['a complaint', complaint.id, 'not_interested', 409, 'reply_not_reclassifiable', 'is a feedback-loop complaint'],
      ['into a bounce', fine.id, 'bounce', 409, 'reply_not_reclassifiable', 'cannot become a bounce'],
      ['an unknown value', fine.id, 'meeting_booked', 422, 'validation_failed', 'classification: "meeting_booked" is not one of'],
      ['an empty value', fine.id, '', 422, 'validation_failed', 'is not one of'],
      ['a number', fine.id, 1, 400, 'invalid_request'],
      ['no classification', fine.id, undefined, 400, 'invalid_request'],
      ['an unknown reply', 'rpl_nope', 'interested', 404, 'reply_not_found', 'reply rpl_nope not found'],
      ["another workspace's key", fine.id, 'not_interested', 404, 'reply_not_found'],
    ];
    for (const [what, id, classification, status, code, words] of cases) {
      const res =
        what === 'no classification'
          ? await app.request('PATCH', `/v1/replies/${id}`, { key: w.key, body: {} })
          : await reclassify(w, id, classification, what === "another workspace's key" ? other.adminKey : w.key);
      assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, code, what);
      assert.equal(typeof res.body.error.message, 'string', what);
      if (words) assert.ok(res.body.error.message.includes(words), `${what}: ${res.body.error.message}`);
      if (status === 422) assert.deepEqual(res.body.errors, [{ field: 'classification', value: classification, message: 'is not one of interested, not_interested, out_of_office, bounce, unsubscribe' }]);
    }
    const extra = await app.request('PATCH', `/v1/replies/${fine.id}`, { key: w.key, body: { classification: 'not_interested', note: 'x' } });
    assert.deepEqual([extra.status, extra.body.error.code], [400, 'invalid_request']);
    const sdr = await seedSdr(app, w.workspaceId);
    const bySdr = await reclassify(w, fine.id, 'not_interested', sdr.sdrKey);
    assert.deepEqual([bySdr.status, bySdr.body.error.code], [403, 'forbidden']);
    assert.deepEqual(await snapshot(), before, 'nothing written by a refused request');
    // A bounce "made" a bounce again changes nothing: the same classification is a no-op for any reply.
    const same = await reclassify(w, bounce.id, 'bounce');
    assert.deepEqual([same.status, same.body.effects.changed], [200, false]);
    assert.deepEqual(await snapshot(), before);
  });

  /**
   * Runs `work` while another transaction holds the lead's enrollment (as a worker's or an
   * ingestion's would), and lets go once `waiters` of the app's transactions wait for a lock:
   * what `work` starts then really runs side by side, not one request after the other.
   */
  async function sideBySide<T>(w: World, email: string, waiters: number, work: () => Promise<T>): Promise<T> {
    const holder = new pg.Client({ connectionString: app.databaseUrl });
    await holder.connect();
    try {
      const holderPid = (await holder.query('select pg_backend_pid() as pid')).rows[0].pid;
      await holder.query('begin');
      await holder.query(`select 1 from enrollments e join leads l on l.id = e.lead_id where e.campaign_id = $1 and l.email = $2 for update of e`, [w.campaignId, email]);
      const running = work();
      await waitFor(`${waiters} transactions waiting`, async () => {
        const { rows } = await db.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> $1`, [holderPid]);
        return rows[0].n >= waiters;
      });
      await holder.query('rollback');
      return await running;
    } finally {
      await holder.end();
    }
  }

  it('two changes at once, and a change beside an ingested reply of the same lead, move replied once', async () => {
    const w = await campaign(['racer@lead.example', 'late@lead.example']);
    const r = await answer(w, 'racer@lead.example', OOO, { auto: true });
    // Two PATCHes to interested, both in flight while the lead's enrollment is held: one changes
    // it, the other waits for it and finds it done.
    const both = await sideBySide(w, 'racer@lead.example', 2, () => Promise.all([reclassify(w, r.id, 'interested'), reclassify(w, r.id, 'interested')]));
    assert.deepEqual(both.map((b) => b.status), [200, 200]);
    assert.deepEqual(both.map((b) => b.body.effects.changed).sort(), [false, true]);
    assert.deepEqual(both.map((b) => b.body.effects.replied).sort(), [0, 1]);
    assert.equal((await stats(w)).replied, 1);
    // Opposite changes at once, several rounds: whatever order they ran in, each saw the one
    // before it, and the counter is what the list says.
    for (let round = 0; round < 3; round++) {
      const before = (await replyOf(w, 'racer@lead.example')).classification;
      const answers = await sideBySide(w, 'racer@lead.example', 3, () =>
        Promise.all([reclassify(w, r.id, 'out_of_office'), reclassify(w, r.id, 'not_interested'), reclassify(w, r.id, 'interested')]),
      );
      assert.deepEqual(answers.map((a) => a.status), [200, 200, 200], JSON.stringify(answers.map((a) => a.body)));
      const now = (await replyOf(w, 'racer@lead.example')).classification;
      // They ran one after the other, each from where the one before it left the reply (a no-op
      // included): what they started from is the first class and every class but the last.
      const froms = answers.map((a) => a.body.effects.from);
      const tos = answers.map((a) => a.body.classification);
      assert.deepEqual([...froms, now].sort(), [before, ...tos].sort(), JSON.stringify({ before, froms, tos }));
      const counted = now === 'out_of_office' ? 0 : 1;
      assert.equal((await stats(w)).replied, counted, `round ${round}: ${now}`);
      assert.deepEqual(await repliedLeads(w), counted ? ['racer@lead.example'] : []);
      assert.equal(answers.reduce((n, a) => n + a.body.effects.replied, 0), counted - (before === 'out_of_office' ? 0 : 1), 'the answers add up to the move of the counter');
    }

    // A change of the lead's out-of-office to interested while their real answer is ingested: one lead, counted once.
    const late = await answer(w, 'late@lead.example', OOO, { auto: true });
    const before = (await stats(w)).replied;
    const raw = lines([
      'From: late@lead.example',
      `To: ${w.sender}`,
      'Subject: Re: Quick question',
      `Date: ${new Date().toUTCString()}`,
      `Message-ID: <late${++uid}@lead.example>`,
      `In-Reply-To: ${w.sent.get('late@lead.example')}`,
      'Content-Type: text/plain; charset=utf-8',
      '',
      INTERESTED,
    ]);
    const [patched, ingested] = await sideBySide(w, 'late@lead.example', 2, () => Promise.all([reclassify(w, late.id, 'interested'), ingest(w, raw)]));
    assert.deepEqual([patched.status, ingested], [200, 'reply']);
    assert.equal((await stats(w)).replied, before + 1);
    assert.equal((await lead(w, 'late@lead.example')).status, 'replied');
    assert.ok((await repliedLeads(w)).includes('late@lead.example'));
  });

  it("a reply handed to an SDR: its thread's opening message is automatic exactly when it is an out-of-office, and its priority follows", async () => {
    const w = await campaign(['handed@lead.example']);
    const r = await answer(w, 'handed@lead.example', INTERESTED);
    const { sdr } = await seedSdr(app, w.workspaceId);
    const assigned = await app.request('POST', `/v1/replies/${r.id}/assign`, { key: w.key, body: { sdrId: sdr.id, skipIcpCheck: true } });
    assert.equal(assigned.status, 200, JSON.stringify(assigned.body));
    const threadId = assigned.body.data.threadId;
    const thread = async () =>
      (
        await db.query(
          `select t.priority_score, m.automatic from prospect_threads t join thread_messages m on m.thread_id = t.id and m.direction = 'inbound' and m.inbound_message_id is null where t.id = $1`,
          [threadId],
        )
      ).rows[0] as { priority_score: number; automatic: boolean };
    const first = await thread();
    assert.equal(first.automatic, false);

    const res = await reclassify(w, r.id, 'out_of_office');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.assignedTo, [{ sdrId: sdr.id, name: sdr.name }]);
    const after = await thread();
    assert.equal(after.automatic, true);
    // The classification's weight: interested 20, out_of_office 5 (sdrs/priority.ts); recency moved a little meanwhile.
    assert.ok(Math.abs(first.priority_score - after.priority_score - 15) < 0.5, `${first.priority_score} -> ${after.priority_score}`);
    const back = await reclassify(w, r.id, 'interested');
    assert.equal(back.status, 200);
    const restored = await thread();
    assert.equal(restored.automatic, false);
    assert.ok(Math.abs(restored.priority_score - first.priority_score) < 0.5, `${first.priority_score} -> ${restored.priority_score}`);
  });

  it('an assignment that waited for a change of the reply goes by the class the change left: a reply made an unsubscribe meanwhile is not forwarded', async () => {
    const w = await campaign(['turned@lead.example']);
    const r = await answer(w, 'turned@lead.example', INTERESTED);
    const { sdr } = await seedSdr(app, w.workspaceId);
    const forwards = () => sink.received.filter((m) => m.to.includes(sdr.email)).length;
    const waiting = async (n: number) =>
      waitFor(`${n} waiting`, async () => (await db.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows[0].n >= n);
    // The reply's assignment lock held elsewhere: the change queues for it first, the assignment
    // (its checks made on the reply as it was: interested) after it.
    const holder = new pg.Client({ connectionString: app.databaseUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`assign:${r.id}`]);
      const change = reclassify(w, r.id, 'unsubscribe');
      await waiting(1);
      const assign = app.request('POST', `/v1/replies/${r.id}/assign`, { key: w.key, body: { sdrId: sdr.id, skipIcpCheck: true } });
      await waiting(2);
      await holder.query('rollback');
      const [changed, assigned] = await Promise.all([change, assign]);
      assert.equal(changed.status, 200);
      assert.equal(assigned.status, 409, JSON.stringify(assigned.body));
      assert.equal(assigned.body.error.code, 'reply_not_assignable');
    } finally {
      await holder.end();
    }
    assert.equal(forwards(), 0, 'nothing forwarded');
    assert.equal((await db.query(`select count(*)::int as n from prospect_threads where reply_id = $1`, [r.id])).rows[0].n, 0);
    assert.equal((await replyOf(w, 'turned@lead.example')).forwardedAt, null);
  });

  /** Connections' pids of this database waiting for a lock (not `except`'s). */
  const lockWaiters = async (except: number[] = []) =>
    (await db.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and not (pid = any($1::int[]))`, [except])).rows[0].n as number;

  it("a change waiting for a thread a desk send holds (through its SMTP transaction) holds neither the lead's enrollment nor the campaign's counters meanwhile", async () => {
    const w = await campaign(['desk@lead.example']);
    const r = await answer(w, 'desk@lead.example', INTERESTED);
    const { sdr } = await seedSdr(app, w.workspaceId);
    const assigned = await app.request('POST', `/v1/replies/${r.id}/assign`, { key: w.key, body: { sdrId: sdr.id, skipIcpCheck: true } });
    assert.equal(assigned.status, 200, JSON.stringify(assigned.body));
    const enrollmentId = (await db.query(`select enrollment_id from replies where id = $1`, [r.id])).rows[0].enrollment_id as string;
    // The thread's row as a desk send holds it while the SDR's server answers (sdrs/desk-mail.ts lockForSend).
    const send = new pg.Client({ connectionString: app.databaseUrl });
    const probe = new pg.Client({ connectionString: app.databaseUrl });
    await send.connect();
    await probe.connect();
    try {
      const sendPid = (await send.query('select pg_backend_pid() as pid')).rows[0].pid;
      await send.query('begin');
      await send.query(`select 1 from prospect_threads where id = $1 for update`, [assigned.body.data.threadId]);
      const change = reclassify(w, r.id, 'unsubscribe');
      await waitFor('the change waiting for the thread', async () => (await lockWaiters([sendPid])) >= 1);
      // What the campaign's sending needs meanwhile: the counters (every outcome of the
      // campaign's messages) and the lead's enrollment. Neither waits for the SDR's server.
      await probe.query('begin');
      const free = async (what: string, q: string, id: string) => {
        try {
          await probe.query('savepoint s');
          await probe.query(q, [id]);
          await probe.query('release savepoint s');
          return `${what} free`;
        } catch (err) {
          await probe.query('rollback to savepoint s');
          return `${what} held: ${(err as { code?: string }).code}`;
        }
      };
      assert.deepEqual(
        [
          await free('counters', `select 1 from campaign_counters where campaign_id = $1 for no key update nowait`, w.campaignId),
          await free('enrollment', `select 1 from enrollments where id = $1 for no key update nowait`, enrollmentId),
        ],
        ['counters free', 'enrollment free'],
      );
      await probe.query('rollback');
      await send.query('rollback');
      const res = await change;
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body.effects, { changed: true, from: 'interested', replied: 0, sequenceStopped: false, leadStatus: 'unsubscribed', suppressed: true, addressSuppressed: true, notes: [] });
    } finally {
      await send.end();
      await probe.end();
    }
    const s = await stats(w);
    assert.deepEqual([s.replied, s.unsubscribed], [1, 1]);
  });

  /**
   * The lead's step 2 as a worker claimed it before the lead's answer came in (a message being
   * sent finishes: endEnrollments cancels only waiting ones), as the claim leaves it: sending,
   * counted queued. Returns it as the worker's outcome writer knows it.
   */
  async function inFlight(w: World, replyId: string, email: string): Promise<SentMessage> {
    const { rows } = await db.query(
      `update outbound_messages m set state = 'sending', cancel_reason = null, claimed_by = 'w-inflight', lease_until = now() + interval '10 minutes',
              pool_id = s.pool_id, sender_account_id = s.sender_account_id, smtp_started_at = now()
         from outbound_messages s
        where s.enrollment_id = m.enrollment_id and s.step_index = 0 and m.step_index = 1 and m.kind = 'campaign'
          and m.enrollment_id = (select enrollment_id from replies where id = $1)
        returning m.id, m.enrollment_id, m.lead_id, m.sender_account_id`,
      [replyId],
    );
    assert.equal(rows.length, 1);
    await db.query(`update campaign_counters set queued = queued + 1 where campaign_id = $1`, [w.campaignId]);
    return {
      id: rows[0].id,
      workspaceId: w.workspaceId,
      campaignId: w.campaignId,
      enrollmentId: rows[0].enrollment_id,
      leadId: rows[0].lead_id,
      stepIndex: 1,
      toEmail: email,
      senderAccountId: rows[0].sender_account_id,
      messageIdHeader: `<inflight.${++uid}@acme.example>`,
      subject: 'Re: Quick question',
      inReplyTo: w.sent.get(email)!,
      references: w.sent.get(email)!,
    };
  }

  it("a change into unsubscribe beside a hard bounce of the lead's message in flight (its enrollment ended already): no deadlock, both written", async () => {
    const w = await campaign(['inflight@lead.example']);
    const r = await answer(w, 'inflight@lead.example', INTERESTED);
    assert.equal((await lead(w, 'inflight@lead.example')).status, 'replied');
    const m = await inFlight(w, r.id, 'inflight@lead.example');
    const stmts = new PreparedStatements(app.databaseUrl, 1);
    const recorder = new SendOutcomeRecorder(app.deps, [60_000], stmts);
    // The campaign's counters held (an outcome of another of its messages), so that the bounce
    // and the change meet there: the bounce waits first, the change after it.
    const other = new pg.Client({ connectionString: app.databaseUrl });
    await other.connect();
    const retriesBefore = transactionRetries(app.deps.orm);
    try {
      const otherPid = (await other.query('select pg_backend_pid() as pid')).rows[0].pid;
      await other.query('begin');
      await other.query(`select 1 from campaign_counters where campaign_id = $1 for no key update`, [w.campaignId]);
      const bounced = recorder.record(() => app.deps.orm.em.fork(), m, { kind: 'rejected', code: 550, response: '550 5.1.1 No such user' }, 'w-inflight');
      await waitFor('the bounce waiting', async () => (await lockWaiters([otherPid])) >= 1);
      const change = reclassify(w, r.id, 'unsubscribe');
      await waitFor('the change waiting too', async () => (await lockWaiters([otherPid])) >= 2);
      await other.query('rollback');
      const [outcome, res] = await Promise.all([bounced, change]);
      assert.equal(outcome, 'hard_bounce');
      assert.equal(res.status, 200, JSON.stringify(res.body));
      // A deadlock is retried (the change runs again and succeeds): only the count shows it.
      assert.equal(transactionRetries(app.deps.orm), retriesBefore, 'no deadlock, no retry');
      assert.deepEqual([res.body.effects.leadStatus, res.body.effects.addressSuppressed], ['unsubscribed', true]);
    } finally {
      await other.end();
      await stmts.close();
    }
    const suppressed = (await db.query(`select reason from suppressions where workspace_id = $1 and email_key = 'inflight@lead.example'`, [w.workspaceId])).rows;
    assert.equal(suppressed.length, 1);
    assert.equal((await db.query(`select state from outbound_messages where id = $1`, [m.id])).rows[0].state, 'bounced');
    const s = await stats(w);
    assert.deepEqual([s.replied, s.unsubscribed, s.bounced, s.queued], [1, 1, 1, 0]);
  });

  it("a worker's bounce aborted in a deadlock is written again, not left sending until its lease runs out", async () => {
    const w = await campaign(['victim@lead.example']);
    const r = await answer(w, 'victim@lead.example', INTERESTED);
    const m = await inFlight(w, r.id, 'victim@lead.example');
    const stmts = new PreparedStatements(app.databaseUrl, 1);
    const recorder = new SendOutcomeRecorder(app.deps, [60_000], stmts);
    // Another transaction holds the lead's enrollment, then asks for the message the bounce
    // holds: a lock cycle. The bounce waited first, so its deadlock check fires first and
    // PostgreSQL aborts the bounce.
    const other = new pg.Client({ connectionString: app.databaseUrl });
    await other.connect();
    const retriesBefore = transactionRetries(app.deps.orm);
    try {
      const otherPid = (await other.query('select pg_backend_pid() as pid')).rows[0].pid;
      await other.query('begin');
      await other.query(`select 1 from enrollments where id = $1 for no key update`, [m.enrollmentId]);
      const bounced = recorder.record(() => app.deps.orm.em.fork(), m, { kind: 'rejected', code: 550, response: '550 5.1.1 No such user' }, 'w-inflight');
      await waitFor('the bounce waiting for the enrollment', async () => (await lockWaiters([otherPid])) >= 1);
      await other.query(`select 1 from outbound_messages where id = $1 for update`, [m.id]);
      await other.query('commit');
      assert.equal(await bounced, 'hard_bounce');
      assert.equal(transactionRetries(app.deps.orm), retriesBefore + 1, 'aborted once, run again once');
    } finally {
      await other.end();
      await stmts.close();
    }
    assert.equal((await db.query(`select state from outbound_messages where id = $1`, [m.id])).rows[0].state, 'bounced');
    assert.equal((await db.query(`select reason from suppressions where workspace_id = $1 and email_key = 'victim@lead.example'`, [w.workspaceId])).rows[0]?.reason, 'hard_bounce');
    const s = await stats(w);
    assert.deepEqual([s.bounced, s.queued], [1, 0]);
  });

  describe('mailgate reply update', () => {
    const cli = (...argv: string[]) => runCliCaptured({ DATABASE_URL: app.databaseUrl, MAILGATE_SECRET_KEY: secret.toString('hex'), LOG_LEVEL: 'warn' }, argv);

    it('changes the class as the API does, prints what the API shows (and what it did), and refuses what the API refuses', async () => {
      const w = await campaign(['cli@lead.example', 'cli-bounce@lead.example']);
      const r = await answer(w, 'cli@lead.example', OOO, { auto: true });
      const json = await cli('reply', 'update', r.id, '--classification', 'interested', '--json');
      assert.equal(json.code, 0, json.err);
      const { effects, ...reply } = json.json;
      assert.deepEqual(reply, await replyOf(w, 'cli@lead.example'));
      assert.deepEqual([reply.classification, reply.classifierClassification, reply.reclassifiedBy], ['interested', 'out_of_office', 'cli']);
      assert.deepEqual(effects, { changed: true, from: 'out_of_office', replied: 1, sequenceStopped: true, leadStatus: 'replied', suppressed: false, addressSuppressed: false, notes: [] });
      assert.equal((await stats(w)).replied, 1);

      const unsub = await cli('reply', 'update', r.id, '--classification', 'unsubscribe');
      assert.equal(unsub.code, 0, unsub.err);
      assert.equal(unsub.out, `reply ${r.id} (cli@lead.example): interested -> unsubscribe; replied unchanged; cli@lead.example was put on the suppression list.\n`);
      const out = await cli('reply', 'update', r.id, '--classification', 'not_interested');
      assert.equal(out.code, 0, out.err);
      assert.match(out.out, /^reply \S+ \(cli@lead\.example\): unsubscribe -> not_interested; replied unchanged\. cli@lead\.example stays on the suppression list: taking it off is a separate step .*mailed again\.\n$/);
      const same = await cli('reply', 'update', r.id, '--classification', 'not_interested');
      assert.deepEqual([same.code, same.out], [0, `reply ${r.id} (cli@lead.example) is not_interested already: nothing changed\n`]);

      assert.equal(
        await ingest(
          w,
          dsn({ to: w.sender, messageId: `<dsn${++uid}@mx.lead.example>`, original: w.sent.get('cli-bounce@lead.example')!, recipient: 'cli-bounce@lead.example', status: '5.1.1', diagnostic: '550 5.1.1 No such user' }),
        ),
        'bounce',
      );
      const bounce = await replyOf(w, 'cli-bounce@lead.example');
      const refused = await cli('reply', 'update', bounce.id, '--classification', 'interested', '--json');
      assert.deepEqual([refused.code, refused.out], [1, '']);
      assert.match(refused.err, /^error: reply \S+ is a bounce .*nothing was changed\n$/);
      const missing = await cli('reply', 'update', 'rpl_nope', '--classification', 'interested', '--json');
      assert.deepEqual([missing.code, missing.err], [1, 'error: reply rpl_nope not found\n']);
      const intoBounce = await cli('reply', 'update', r.id, '--classification', 'bounce', '--json');
      assert.equal(intoBounce.code, 2);
      assert.match(intoBounce.err, /Allowed choices are interested, not_interested, out_of_office, unsubscribe/);
      const noClass = await cli('reply', 'update', r.id, '--json');
      assert.equal(noClass.code, 2);
      assert.match(noClass.err, /--classification/);
      assert.equal((await replyOf(w, 'cli@lead.example')).classification, 'not_interested', 'refused commands changed nothing');
    });
  });
});

