import assert from 'node:assert/strict';
import type { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { sendingWorld, HOUR, rawHeader } from './world.ts';
import type { TestApp } from '../support/harness.ts';
import pg from 'pg';
import { isPlainTextBody } from '../../src/modules/sending/render.ts';

describe('sending engine: rendering and threading', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  const { clock, sink, setup, stats, to } = w;
  let app: TestApp, db: pg.Client, dispatcher: SendDispatcher;
  before(() => ({ app, db, dispatcher } = w));

  it('renders and sends step 0: tokens, escaping, text part, headers, pixel; records and counts it', async () => {
    const t = await setup({
      leads: [
        { email: 'ann@lead.example', firstName: 'Ann <b>&</b> "Co"', company: 'Acme', plan: 'pro' },
        { email: 'bob@lead.example', company: 'Bobco' },
      ],
      steps: [
        {
          subject: 'Hi {{firstName|there}}\r\nBcc: evil@x.example {{plan}}',
          bodyHtml: '<html><body><p>Hello {{firstName|there}} from {{company}} ({{plan|basic}}) {{missing}}</p><a href="{{unsubscribeUrl}}">unsubscribe</a></body></html>',
        },
      ],
    });
    const r = await dispatcher.runRound();
    assert.equal(r.sent, 2);
    assert.equal(sink.received.length, 2);
    const ann = to('ann@lead.example')[0].parsed;
    assert.equal(ann.subject, 'Hi Ann <b>&</b> "Co" Bcc: evil@x.example pro');
    assert.equal(ann.headers.get('bcc'), undefined);
    assert.match(ann.html as string, /Hello Ann &lt;b&gt;&amp;&lt;\/b&gt; &quot;Co&quot; from Acme \(pro\) <\/p>/);
    assert.match(ann.text as string, /Hello Ann <b>&<\/b> "Co" from Acme \(pro\)/);
    assert.match(ann.html as string, /<img src="https:\/\/mg\.example\.com\/t\/o\/[^"]+" width="1" height="1"/);
    assert.doesNotMatch(ann.text as string, /t\/o\//);
    assert.equal(ann.from?.value[0].name, 'Alice Sender');
    const listUnsub = rawHeader(ann, 'list-unsubscribe');
    assert.match(listUnsub, /^<https:\/\/mg\.example\.com\/u\/[^>]+>, <mailto:sender\.[a-z0-9]+@acme\.example\?subject=unsubscribe>$/);
    assert.equal(rawHeader(ann, 'list-unsubscribe-post'), 'List-Unsubscribe=One-Click');
    assert.ok((ann.html as string).includes(listUnsub.slice(1, listUnsub.indexOf('>'))), 'the {{unsubscribeUrl}} token is the same link');
    const bob = to('bob@lead.example')[0].parsed;
    assert.equal(bob.subject, 'Hi there Bcc: evil@x.example');
    assert.match(bob.html as string, /Hello there from Bobco \(basic\)/);
    assert.ok(ann.messageId && bob.messageId && ann.messageId !== bob.messageId);

    const s = await stats(t);
    assert.equal(s.sent, 2);
    assert.equal(s.delivered, 2);
    assert.equal(s.queued, 0);
    const { rows } = await db.query(`select id, state, smtp_response, message_id_header, sent_at from outbound_messages where campaign_id = $1 order by to_email`, [t.campaignId]);
    assert.ok(rows.every((m) => m.state === 'sent' && /^250/.test(m.smtp_response)));
    assert.equal(rows[0].message_id_header, ann.messageId);
    const { rows: events } = await db.query(`select data from events where type = 'message.sent' and data->>'campaignId' = $1 order by data->>'email'`, [t.campaignId]);
    assert.equal(events.length, 2);
    assert.deepEqual(Object.keys(events[0].data).sort(), ['campaignId', 'email', 'leadId', 'messageId', 'messageIdHeader', 'sentAt', 'sequenceStep']);
    assert.equal(events[0].data.messageId, rows[0].id);
    assert.equal(events[0].data.sequenceStep, 0);
    // Completed: a one-step sequence ends after its step.
    const leads = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data;
    assert.ok(leads.every((l: { status: string }) => l.status === 'completed'));
  });

  it('a table-laid-out body: the text part has each row and cell on a line of its own, not run together', async () => {
    await setup({
      leads: [{ email: 'tbl@lead.example', firstName: 'Tia', company: 'T&T' }],
      steps: [
        {
          subject: 'Hello',
          bodyHtml:
            '<table width="100%"><tr><td>Hi {{firstName|there}},</td></tr><tr><td>We help {{company}} book meetings.</td></tr>' +
            '<tr><td><a href="https://cal.example/tia">Book a call</a></td><td>Cheers, Alice</td></tr></table><p>PS</p>',
        },
      ],
    });
    await dispatcher.runRound();
    const [mail] = to('tbl@lead.example');
    assert.equal(mail.parsed.text?.trim(), 'Hi Tia,\nWe help T&T book meetings.\nBook a call [https://cal.example/tia]\nCheers, Alice\n\nPS');
    assert.match(mail.parsed.html as string, /We help T&amp;T book meetings\./);
  });

  it('a plain-text step (no HTML markup): its line breaks stay in both parts, its text escaped in the HTML one', async () => {
    await setup({
      leads: [{ email: 'plain@lead.example', firstName: 'Jö & <Co>' }],
      steps: [{ subject: 'Kurze Frage', bodyHtml: 'Hi {{firstName|there}},\r\n\r\nshort question: <https://acme.example/a?b=1&c=2>\nreply "yes"?\n\n\nAlice' }],
      campaign: { trackOpens: false },
    });
    await dispatcher.runRound();
    const [mail] = to('plain@lead.example');
    // Read as HTML, both parts were one run-on line: "Hi Jö & <Co>, short question: ... Alice".
    assert.equal(mail.parsed.text?.replace(/\r\n/g, '\n').trim(), 'Hi Jö & <Co>,\n\nshort question: <https://acme.example/a?b=1&c=2>\nreply "yes"?\n\n\nAlice');
    assert.equal(
      (mail.parsed.html as string).replace(/\r\n/g, '\n').trim(),
      '<p>Hi Jö &amp; &lt;Co&gt;,</p>\n<p>short question: &lt;https://acme.example/a?b=1&amp;c=2&gt;<br>\nreply &quot;yes&quot;?</p>\n<p>Alice</p>',
    );
  });

  it('a body is plain text only without any markup: a tag, end tag, comment, doctype or character reference makes it HTML', () => {
    for (const text of ['Hi,\n\nsee <https://x.example>', 'a < b and b > c', 'Q&A at 5', 'AT&T, ok?', '<3 Alice', '{{firstName}} & co']) assert.ok(isPlainTextBody(text), text);
    for (const html of ['<p>Hi</p>', 'Hi<br>there', 'Hi<br/>', 'Hi</b>', '<!-- c -->Hi', '<!DOCTYPE html>Hi', 'Caf&eacute;', 'Caf&#233;', 'Caf&#xE9;', '<img src="x">'])
      assert.ok(!isPlainTextBody(html), html);
  });

  it('no pixel when trackOpens is false', async () => {
    await setup({ leads: [{ email: 'np@lead.example' }], campaign: { trackOpens: false } });
    await dispatcher.runRound();
    assert.doesNotMatch(to('np@lead.example')[0].parsed.html as string, /\/t\/o\//);
  });

  it('follow-ups: scheduled delayHours after the previous send, threaded, Re: subject, then completed', async () => {
    const t = await setup({
      leads: [{ email: 'seq@lead.example', firstName: 'Sue' }],
      steps: [
        { subject: 'Intro for {{firstName}}', bodyHtml: '<p>one</p>' },
        { subject: '', bodyHtml: '<p>two</p>', delayHours: 48 },
        { subject: 'A new angle', bodyHtml: '<p>three</p>', delayHours: 24 },
      ],
    });
    await dispatcher.runRound();
    assert.equal(to('seq@lead.example').length, 1);
    let s = await stats(t);
    assert.equal(s.scheduled, 1);
    assert.equal(s.queued, 0);
    clock.advance(47 * HOUR);
    await dispatcher.runRound();
    assert.equal(to('seq@lead.example').length, 1, 'not before its time');
    clock.advance(HOUR);
    await dispatcher.runRound();
    const mails = to('seq@lead.example').map((r) => r.parsed);
    assert.equal(mails.length, 2);
    assert.equal(mails[1].subject, 'Re: Intro for Sue');
    assert.equal(mails[1].inReplyTo, mails[0].messageId);
    assert.deepEqual([mails[1].references].flat(), [mails[0].messageId]);
    clock.advance(24 * HOUR);
    await dispatcher.runRound();
    const third = to('seq@lead.example').map((r) => r.parsed)[2];
    assert.equal(third.subject, 'A new angle');
    assert.equal(third.inReplyTo, mails[1].messageId);
    assert.deepEqual([third.references].flat(), [mails[0].messageId, mails[1].messageId]);
    s = await stats(t);
    assert.equal(s.sent, 3);
    assert.equal(s.scheduled, 0);
    const lead = (await app.request('GET', `/v1/campaigns/${t.campaignId}/leads`, { key: t.key })).body.data[0];
    assert.equal(lead.status, 'completed');
    assert.equal(lead.currentStep, 2);
    // Follow-ups stayed on the account that sent the first step.
    const { rows } = await db.query(`select distinct sender_account_id from outbound_messages where campaign_id = $1`, [t.campaignId]);
    assert.equal(rows.length, 1);
  });
});
