// The draft endpoints with no LLM configured (the offline composer), end to end through real
// mail: a campaign reply caught over IMAP, assigned, drafted, edited, regenerated, guarded and
// sent through the SDR's own SMTP, and the prospect's answer joining the thread.
import assert from 'node:assert/strict';
import { openDesk, type Desk, SDR_EMAIL, CALENDAR } from './desk-fixture.ts';
import { waitFor } from '../support/wait.ts';
import { holdMailboxHealth } from '../support/mailbox-health.ts';
import pg from 'pg';

describe('AI drafts without an LLM: the offline composer and the draft lifecycle', function () {
  this.timeout(90_000);
  let desk: Desk;
  before(async () => {
    desk = await openDesk();
  });
  after(async () => {
    await desk?.close();
  });

  const req = (method: string, path: string, body?: unknown, key = desk.sdrKey) => desk.app.request(method, path, { key, body });
  const generate = (body: Record<string, unknown>, key?: string) => req('POST', '/v1/sdr/drafts/generate', { threadId: desk.threadId, ...body }, key);
  const draftState = async (id: string) => (await desk.db.query(`select state from drafts where id = $1`, [id])).rows[0]?.state;

  it('generates one offline draft per approach from the planner context, ready to send', async () => {
    const res = await generate({ variantCount: 3 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const { drafts, insights, appliedRules } = res.body.data;
    assert.equal(drafts.length, 3);
    assert.equal(insights.length, 3);
    assert.equal(new Set(drafts.map((d: { bodyText: string }) => d.bodyText)).size, 3, 'the variants differ');
    for (const [i, d] of drafts.entries()) {
      assert.match(d.id, /^drf_/);
      assert.equal(d.state, 'generated');
      assert.equal(d.threadId, desk.threadId);
      assert.equal(d.subject, 'Re: Coaching for Northwind reps');
      assert.equal(d.model, null);
      assert.match(d.bodyText, /^Hi Dana,/);
      assert.match(d.bodyText, /Northwind/);
      assert.ok(d.bodyText.includes(CALENDAR), 'the calendar link of the SDR profile');
      assert.match(d.bodyText, /\$49 per rep per month/, 'the pricing ask answered from the knowledge base');
      assert.match(d.bodyText, /Sam Rivera\nAcme Sales/, 'the signature of the profile');
      assert.doesNotMatch(d.bodyText, /evil|attacker|IGNORE/i, 'nothing of the hidden text');
      assert.ok(d.bodyHtml.includes(`<a href="${CALENDAR}">${CALENDAR}</a>`), d.bodyHtml);
      assert.doesNotMatch(d.bodyHtml, /<script|onerror/);
      const ins = insights[i];
      assert.equal(ins.draftId, d.id);
      assert.equal(ins.approach, 'offline_template');
      assert.ok(ins.confidence > 0 && ins.confidence <= 1);
      assert.match(ins.rationale, /Offline template/);
      assert.ok(ins.scores.overall >= 0.6, JSON.stringify(ins.scores));
    }
    assert.match(insights[1].rationale, /question-led/);
    assert.match(insights[2].rationale, /proof-led/);
    assert.match(drafts[2].bodyText, /Contoso cut new-rep ramp time/, 'proof-led leads with the case study');
    assert.deepEqual(appliedRules, [
      { ruleId: desk.ruleId, name: 'Nudge after 3 days', effect: 'if the prospect does not answer within 3d of this reply, a follow-up task is created (attempt 1 of 2)' },
    ]);
    // The thread view lists them.
    const t = await req('GET', `/v1/sdr/threads/${desk.threadId}`);
    assert.equal(t.body.data.drafts.length, 3);
  });

  it('validates the request: variantCount 1-3, threadId required, unknown fields, another SDR’s thread 404, the admin key 403', async () => {
    for (const body of [{ variantCount: 0 }, { variantCount: 4 }, { variantCount: 1.5 }, { variantCount: '2' }, { threadId: 7 }, { tone: 'x' }, { instructions: '' }]) {
      const res = await generate(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.error.code, 'invalid_request');
    }
    const missing = await req('POST', '/v1/sdr/drafts/generate', { variantCount: 1 });
    assert.equal(missing.status, 400);
    const other = await generate({}, desk.otherSdrKey);
    assert.equal(other.status, 404);
    assert.equal(other.body.error.code, 'thread_not_found');
    const unknown = await req('POST', '/v1/sdr/drafts/generate', { threadId: 'thr_nope' });
    assert.equal(unknown.status, 404);
    const admin = await generate({}, desk.adminKey);
    assert.equal(admin.status, 403);
    const before = (await desk.db.query('select count(*)::int as n from drafts')).rows[0].n;
    assert.equal(before, 3, 'failed requests wrote nothing');
  });

  it('edits, regenerates (superseding) and discards, with the states and codes of contract §9', async () => {
    const [d] = (await generate({})).body.data.drafts;
    const patched = await req('PATCH', `/v1/sdr/drafts/${d.id}`, { bodyText: 'Hi Dana,\n\n<b>Pricing</b> is $49 per rep: https://acme-sales.example/pricing\n\nBest,\nSam' });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(patched.body.data.draft.state, 'edited');
    assert.match(patched.body.data.draft.bodyHtml, /&lt;b&gt;Pricing&lt;\/b&gt;/, 'text is escaped when rendered');
    assert.match(patched.body.data.draft.bodyHtml, /<a href="https:\/\/acme-sales\.example\/pricing">/);
    const subject = await req('PATCH', `/v1/sdr/drafts/${d.id}`, { subject: 'Pricing for Northwind\r\nBcc: x@y.example' });
    assert.equal(subject.body.data.draft.subject, 'Pricing for Northwind Bcc: x@y.example', 'no header injection');
    for (const body of [{}, { bodyText: 5 }, { state: 'sent' }, { subject: '  ' }]) {
      assert.equal((await req('PATCH', `/v1/sdr/drafts/${d.id}`, body)).status, 400, JSON.stringify(body));
    }
    assert.equal((await req('PATCH', `/v1/sdr/drafts/${d.id}`, { bodyText: 'x' }, desk.otherSdrKey)).body.error.code, 'draft_not_found');

    const regen = await req('POST', `/v1/sdr/drafts/${d.id}/regenerate`, { instructions: 'shorter, no calendar link' });
    assert.equal(regen.status, 200, JSON.stringify(regen.body));
    const fresh = regen.body.data.draft;
    assert.notEqual(fresh.id, d.id);
    assert.equal(fresh.state, 'generated');
    assert.equal(fresh.instructions, 'shorter, no calendar link');
    assert.ok(!fresh.bodyText.includes(CALENDAR), 'the instruction was honoured');
    assert.equal(regen.body.data.insight.draftId, fresh.id);
    assert.match(regen.body.data.insight.rationale, /instructions applied as: short, noLink/);
    const old = (await req('GET', `/v1/sdr/drafts/${d.id}`)).body.data.draft;
    assert.equal(old.state, 'superseded');
    assert.equal(old.supersededBy, fresh.id);
    for (const [method, path, body] of [
      ['POST', `/v1/sdr/drafts/${d.id}/regenerate`, {}],
      ['PATCH', `/v1/sdr/drafts/${d.id}`, { bodyText: 'x' }],
      ['DELETE', `/v1/sdr/drafts/${d.id}`, undefined],
    ] as const) {
      const res = await req(method, path, body);
      assert.equal(res.status, 409, `${method} ${path}`);
      assert.equal(res.body.error.code, 'draft_not_editable');
    }
    const sendOld = await req('POST', `/v1/sdr/drafts/${d.id}/send`, {});
    assert.equal(sendOld.status, 409);
    assert.equal(sendOld.body.error.code, 'draft_not_sendable');

    const del = await req('DELETE', `/v1/sdr/drafts/${fresh.id}`);
    assert.equal(del.status, 204);
    assert.equal(await draftState(fresh.id), 'discarded');
    assert.equal((await req('DELETE', `/v1/sdr/drafts/${fresh.id}`)).status, 204, 'discarding twice is a no-op');
    const sendDiscarded = await req('POST', `/v1/sdr/drafts/${fresh.id}/send`, {});
    assert.equal(sendDiscarded.body.error.code, 'draft_not_sendable');
    assert.equal((await req('DELETE', `/v1/sdr/drafts/drf_nope`)).status, 404);
    assert.equal(desk.sink.received.length, 0);
  });

  it('regenerates without a request body (its only field is optional): the old instructions are kept', async () => {
    const [d] = (await generate({ instructions: 'shorter, no calendar link' })).body.data.drafts;
    const res = await req('POST', `/v1/sdr/drafts/${d.id}/regenerate`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.notEqual(res.body.data.draft.id, d.id);
    assert.equal(res.body.data.draft.instructions, 'shorter, no calendar link');
    assert.equal(await draftState(d.id), 'superseded');
    // Malformed or unknown input is still refused, and writes nothing.
    for (const raw of ['[]', '{"tone":"x"}', '{"instructions":5}']) {
      const bad = await desk.app.request('POST', `/v1/sdr/drafts/${res.body.data.draft.id}/regenerate`, { key: desk.sdrKey, raw, headers: { 'content-type': 'application/json' } });
      assert.equal(bad.status, 400, raw);
      assert.equal(bad.body.error.code, 'invalid_request');
    }
    assert.equal(await draftState(res.body.data.draft.id), 'generated');
  });

  describe('guardrails block a send with 422 guardrails_blocked and send nothing', () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['an unresolved token', { finalBodyText: 'Hi {{firstName}},\n\nPricing is $49 per rep.\n\nBest,\nSam' }, 'unresolved_placeholder'],
      ['a [Placeholder]', { finalBodyText: 'Hi Dana,\n\nHappy to help [Company Name] get started.\n\nBest,\nSam' }, 'unresolved_placeholder'],
      ['an empty body', { finalBodyText: '' }, 'empty_body'],
      ['an http: link', { finalBodyText: 'Hi Dana,\n\nSee http://acme-sales.example/pricing for Northwind.\n\nBest,\nSam' }, 'insecure_link'],
      ['a shortened link', { finalBodyText: 'Hi Dana,\n\nSee https://bit.ly/3xYz for Northwind.\n\nBest,\nSam' }, 'shortened_link'],
      ['a link from nowhere', { finalBodyText: 'Hi Dana,\n\nSee https://random-site.example/x for Northwind.\n\nBest,\nSam' }, 'unknown_link'],
      ['the hidden text’s link', { finalBodyText: 'Hi Dana,\n\nPay here: https://evil.example/pay for Northwind.\n\nBest,\nSam' }, 'unknown_link'],
      ['an address from nowhere', { finalBodyText: 'Hi Dana,\n\nWrite to billing@elsewhere.example about Northwind.\n\nBest,\nSam' }, 'unknown_address'],
      ['a cc outside the thread', { additionalCc: ['attacker@evil.example'] }, 'recipient_not_in_thread'],
      ['a link hidden behind HTML text', { finalBodyHtml: '<p>Hi Dana, see <a href="https://evil.example/pay">our pricing</a></p>' }, 'unknown_link'],
    ];
    let draftId: string;
    before(async () => {
      draftId = (await generate({})).body.data.drafts[0].id;
      desk.sink.received.length = 0;
    });
    for (const [name, body, code] of cases) {
      it(name, async () => {
        const res = await req('POST', `/v1/sdr/drafts/${draftId}/send`, body);
        assert.equal(res.status, 422, JSON.stringify(res.body));
        assert.equal(res.body.error.code, 'guardrails_blocked');
        const g = res.body.guardrails;
        assert.equal(g.blocked, true);
        const issue = g.issues.find((i: { code: string }) => i.code === code);
        assert.ok(issue, `${code} in ${JSON.stringify(g.issues)}`);
        assert.equal(issue.severity, 'block');
        assert.ok(issue.field && issue.message);
        for (const k of ['overall', 'readability', 'personalization', 'linkQuality']) assert.ok(g.scores[k] >= 0 && g.scores[k] <= 1);
        assert.equal(desk.sink.received.length, 0);
        assert.equal(await draftState(draftId), 'generated');
      });
    }
    it('a low overall score blocks on its own; a warning does not', async () => {
      const low = await req('POST', `/v1/sdr/drafts/${draftId}/send`, {
        finalBodyText:
          'Notwithstanding multifaceted organizational considerations, comprehensive implementation methodologies necessitate institutionalized interdepartmental collaboration frameworks characterized by unprecedented operationalization.',
      });
      assert.equal(low.status, 422);
      assert.ok(low.body.guardrails.issues.some((i: { code: string }) => i.code === 'low_score'));
    });
  });

  it('sends a draft through the SDR mailbox in the thread: awaiting_reply, follow-up done, warnings reported; never twice', async () => {
    const [d] = (await generate({})).body.data.drafts;
    const followup = 'fup_drafttest';
    await desk.db.query(
      `insert into followup_tasks (id, workspace_id, thread_id, sdr_id, rule_id, attempt, status, due_at, created_at) values ($1, $2, $3, $4, $5, 1, 'pending', now(), now())`,
      [followup, desk.workspaceId, desk.threadId, desk.sdrId, desk.ruleId],
    );
    const finalBodyText = d.bodyText.replace('\nBest,', '\nTalk soon!!\n\nBest,');
    const [a, b] = await Promise.all([
      req('POST', `/v1/sdr/drafts/${d.id}/send`, { finalBodyText, additionalCc: ['olga@acme-sales.example'] }),
      req('POST', `/v1/sdr/drafts/${d.id}/send`, { finalBodyText }),
    ]);
    const ok = [a, b].find((r) => r.status === 200)!;
    const conflict = [a, b].find((r) => r.status !== 200)!;
    assert.ok(ok, JSON.stringify([a.body, b.body]));
    assert.equal(conflict.status, 409, JSON.stringify(conflict.body));
    assert.equal(conflict.body.error.code, 'draft_not_sendable');
    assert.match(ok.body.data.messageId, /^msg_/);
    assert.equal(ok.body.data.guardrails.blocked, false);
    assert.ok(ok.body.data.guardrails.issues.some((i: { code: string; severity: string }) => i.code === 'excessive_exclamation' && i.severity === 'warn'));

    assert.equal(desk.sink.received.length, 1, 'exactly one mail');
    const m = desk.sink.received[0];
    assert.equal(m.user, SDR_EMAIL);
    assert.ok(m.to.includes('dana@northwind.example'));
    assert.equal(m.parsed.inReplyTo, '<r1@northwind.example>');
    // The draft's id makes its Message-ID: a send repeated after a crash carries the same one.
    assert.equal(m.parsed.messageId, `<${d.id}@${SDR_EMAIL.split('@')[1]}>`);
    assert.match(m.parsed.text!, /Talk soon!!/);
    assert.ok(m.parsed.html && m.parsed.html.includes(CALENDAR));

    const sent = (await req('GET', `/v1/sdr/drafts/${d.id}`)).body.data.draft;
    assert.equal(sent.state, 'sent');
    assert.equal(sent.sentMessageId, ok.body.data.messageId);
    assert.equal(sent.bodyText, finalBodyText, 'the draft keeps what was sent');
    const t = (await req('GET', `/v1/sdr/threads/${desk.threadId}`)).body.data;
    assert.equal(t.status, 'awaiting_reply');
    assert.equal(t.messages.at(-1).direction, 'outbound');
    const task = (await desk.db.query(`select status from followup_tasks where id = $1`, [followup])).rows[0];
    assert.equal(task.status, 'done');

    // The prospect's answer in the SDR's mailbox joins the thread.
    await desk.imap.append(
      SDR_EMAIL,
      'pw',
      [
        'From: Dana Reyes <dana@northwind.example>',
        `To: ${SDR_EMAIL}`,
        `Subject: ${m.parsed.subject}`,
        `Date: ${new Date().toUTCString()}`,
        'Message-ID: <r2@northwind.example>',
        `In-Reply-To: ${m.parsed.messageId}`,
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Tuesday at 10 works. Send the invite.',
        '',
      ].join('\r\n'),
    );
    const after = await waitFor('the answer in the thread', async () => {
      const x = (await req('GET', `/v1/sdr/threads/${desk.threadId}`)).body.data;
      return x.status === 'replied' && x;
    });
    // (INTERNALDATE has whole seconds: the answer may sort next to our message of the same second.)
    assert.ok(after.messages.some((x: { direction: string; bodyText: string }) => x.direction === 'inbound' && /Tuesday at 10/.test(x.bodyText)));
  });

  it('sending one variant supersedes its siblings: two variants sent at once (two tabs) make one mail', async () => {
    const before = desk.sink.received.length;
    const { drafts } = (await generate({ variantCount: 2 })).body.data;
    const [a, b] = await Promise.all(drafts.map((d: { id: string }) => req('POST', `/v1/sdr/drafts/${d.id}/send`, {})));
    const ok = [a, b].filter((r) => r.status === 200);
    assert.equal(ok.length, 1, JSON.stringify([a.body, b.body]));
    const conflict = [a, b].find((r) => r.status !== 200)!;
    assert.equal(conflict.status, 409, JSON.stringify(conflict.body));
    assert.equal(conflict.body.error.code, 'draft_not_sendable');
    assert.equal(conflict.body.state, 'superseded', JSON.stringify(conflict.body));
    assert.equal(desk.sink.received.length, before + 1, 'one mail');
    const sentId = drafts[[a, b].indexOf(ok[0])].id;
    const other = drafts.find((d: { id: string }) => d.id !== sentId);
    const sibling = (await req('GET', `/v1/sdr/drafts/${other.id}`)).body.data.draft;
    assert.equal(sibling.state, 'superseded');
    assert.equal(sibling.supersededBy, sentId);
    // Later, too: the sibling of a sent draft cannot go out as a second answer.
    const again = await req('POST', `/v1/sdr/drafts/${other.id}/send`, {});
    assert.equal(again.status, 409);
    assert.equal(desk.sink.received.length, before + 1);
  });

  it("a manual reply supersedes the thread's open drafts (they answer a message answered now): none can go out as a second answer", async () => {
    const [sent] = (await generate({})).body.data.drafts;
    assert.equal((await req('POST', `/v1/sdr/drafts/${sent.id}/send`, {})).status, 200);
    const [discarded] = (await generate({})).body.data.drafts;
    assert.equal((await req('DELETE', `/v1/sdr/drafts/${discarded.id}`)).status, 204);
    const { drafts } = (await generate({ variantCount: 2 })).body.data;
    const [a, b] = drafts as { id: string; bodyText: string }[];
    assert.equal((await req('PATCH', `/v1/sdr/drafts/${b.id}`, { bodyText: `${b.bodyText}\n\nP.S. edited by hand` })).status, 200);
    const before = desk.sink.received.length;

    const manual = await req('POST', `/v1/sdr/threads/${desk.threadId}/send-manual`, { bodyText: 'Answering myself: the Team plan is $49 per rep per month.' });
    assert.equal(manual.status, 200, JSON.stringify(manual.body));
    assert.equal(desk.sink.received.length, before + 1);
    for (const d of [a, b]) {
      const now = (await req('GET', `/v1/sdr/drafts/${d.id}`)).body.data.draft;
      assert.deepEqual([now.state, now.supersededBy], ['superseded', null], d.id);
      const again = await req('POST', `/v1/sdr/drafts/${d.id}/send`, {});
      assert.equal(again.status, 409, JSON.stringify(again.body));
      assert.equal(again.body.error.code, 'draft_not_sendable');
      assert.equal(again.body.state, 'superseded');
      assert.equal((await req('PATCH', `/v1/sdr/drafts/${d.id}`, { bodyText: 'late edit' })).body.error.code, 'draft_not_editable');
    }
    assert.equal(desk.sink.received.length, before + 1, 'no second answer');
    // Drafts already closed keep their state; the thread lists them all, saying what replaced each.
    assert.equal(await draftState(sent.id), 'sent');
    assert.equal(await draftState(discarded.id), 'discarded');
    const listed = (await req('GET', `/v1/sdr/threads/${desk.threadId}`)).body.data.drafts as { id: string; state: string; supersededBy: string | null }[];
    assert.deepEqual(
      listed.filter((d) => [a.id, b.id].includes(d.id)).map((d) => [d.state, d.supersededBy]),
      [
        ['superseded', null],
        ['superseded', null],
      ],
    );
    // A draft written after the manual reply answers it as the thread is now: it is open.
    const [fresh] = (await generate({})).body.data.drafts;
    assert.equal(await draftState(fresh.id), 'generated');
    await req('DELETE', `/v1/sdr/drafts/${fresh.id}`);
  });

  it('a draft to an address on the suppression list is not sent: 409 recipient_suppressed, the draft still open', async () => {
    const before = desk.sink.received.length;
    const [d] = (await generate({})).body.data.drafts;
    assert.equal((await desk.app.request('POST', '/v1/suppression-list', { key: desk.adminKey, body: { emails: ['dana@northwind.example'] } })).status, 200);
    try {
      const res = await req('POST', `/v1/sdr/drafts/${d.id}/send`, {});
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'recipient_suppressed');
      assert.deepEqual(res.body.suppressed, ['dana@northwind.example']);
      assert.equal(await draftState(d.id), 'generated');
      assert.equal(desk.sink.received.length, before, 'nothing sent');
    } finally {
      await desk.app.services().suppression.remove(desk.workspaceId, ['dana@northwind.example']);
    }
    await req('DELETE', `/v1/sdr/drafts/${d.id}`);
  });

  it('a subject edited to carry a link from nowhere in the thread blocks the send, naming the subject', async () => {
    const [d] = (await generate({})).body.data.drafts;
    desk.sink.received.length = 0;
    const edited = await req('PATCH', `/v1/sdr/drafts/${d.id}`, { subject: 'Re: Coaching — pricing at https://evil.example/pay' });
    assert.equal(edited.status, 200, JSON.stringify(edited.body));
    const res = await req('POST', `/v1/sdr/drafts/${d.id}/send`, {});
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.ok(res.body.guardrails.issues.some((i: { code: string; field: string }) => i.code === 'unknown_link' && i.field === 'subject'), JSON.stringify(res.body.guardrails.issues));
    assert.equal(desk.sink.received.length, 0);
  });

  it("the default subject repeats the thread's subject, so a domain named there never blocks the send, written with an invisible character or a lookalike either", async () => {
    const [{ subject: before }] = (await desk.db.query(`select subject from prospect_threads where id = $1`, [desk.threadId])).rows;
    try {
      for (const subject of ['Coaching at northwind-traders.io', 'Coaching at northwind-traders\u200b.io', 'Coaching at ｎｏｒｔｈｗｉｎｄ-traders.io']) {
        await desk.db.query(`update prospect_threads set subject = $1 where id = $2`, [subject, desk.threadId]);
        const [d] = (await generate({})).body.data.drafts;
        const g = await desk.app.services().drafts.guardrails({ workspaceId: desk.workspaceId, sdrId: desk.sdrId }, desk.threadId, { subject: d.subject, bodyText: d.bodyText, bodyHtml: d.bodyHtml, cc: [] }, ['dana@northwind.example']);
        assert.deepEqual(g.issues.filter((i) => i.field === 'subject'), [], `${JSON.stringify(subject)} -> ${JSON.stringify(d.subject)}`);
      }
    } finally {
      await desk.db.query(`update prospect_threads set subject = $1 where id = $2`, [before, desk.threadId]);
    }
  });

  it('a mailbox that is not usable: 409 mail_not_connected, nothing written', async () => {
    const [d] = (await generate({})).body.data.drafts;
    // Held while the request runs: a watcher session logging in could set it active again.
    const held = await holdMailboxHealth(desk.app.databaseUrl, desk.sdrId, 'needs_reauth');
    try {
      // Without a body (every field of it is optional): the send goes on to the mailbox check.
      const res = await req('POST', `/v1/sdr/drafts/${d.id}/send`);
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'mail_not_connected');
      assert.equal(await draftState(d.id), 'generated');
    } finally {
      await held.release();
    }
  });

  it('a draft edited while its send ran: 409 draft_changed, nothing sent, the edit kept', async () => {
    const [d] = (await generate({})).body.data.drafts;
    const mailsBefore = desk.sink.received.length;
    // The edit commits between the send's read of the draft and its lock on it.
    const editor = new pg.Client({ connectionString: desk.app.databaseUrl });
    await editor.connect();
    try {
      await editor.query('begin');
      await editor.query(`select id from drafts where id = $1 for update`, [d.id]);
      const sending = req('POST', `/v1/sdr/drafts/${d.id}/send`, {});
      await waitFor('the send waiting for the draft', async () =>
        (await desk.db.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%from drafts%' and pid <> pg_backend_pid()`)).rows.length > 0,
      );
      await editor.query(`update drafts set body_text = body_text || E'\\n\\nP.S. Edited meanwhile.', state = 'edited', updated_at = clock_timestamp() where id = $1`, [d.id]);
      await editor.query('commit');
      const res = await sending;
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'draft_changed');
      assert.equal(res.body.state, 'edited');
    } finally {
      await editor.end();
    }
    assert.equal(desk.sink.received.length, mailsBefore, 'nothing sent');
    const now = (await req('GET', `/v1/sdr/drafts/${d.id}`)).body.data.draft;
    assert.equal(now.state, 'edited');
    assert.match(now.bodyText, /P\.S\. Edited meanwhile\.$/);
    // Sent again, it goes out with the edit.
    const again = await req('POST', `/v1/sdr/drafts/${d.id}/send`, {});
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.match(desk.sink.received.at(-1)!.parsed.text!, /Edited meanwhile\./);
  });

  it('an additional Cc with spaces or a line break around the address is recorded as the address the mail went to', async () => {
    const [d] = (await generate({})).body.data.drafts;
    const res = await req('POST', `/v1/sdr/drafts/${d.id}/send`, { additionalCc: [' olga@acme-sales.example\n'] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(desk.sink.received.at(-1)!.to.includes('olga@acme-sales.example'));
    const sent = (await req('GET', `/v1/sdr/threads/${desk.threadId}`)).body.data.messages.filter((m: { direction: string }) => m.direction === 'outbound').at(-1);
    assert.deepEqual(sent.ccEmails, ['olga@acme-sales.example']);
  });
});
