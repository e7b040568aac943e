import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { analyzeMessage } from '../../src/modules/inbound/analyze.ts';
import type { ReplyClassifier } from '../../src/modules/inbound/classifier.ts';
import { evaluate, formatReport } from '../../scripts/eval-classify.ts';

const fixture = (p: string) => readFile(new URL(`../../fixtures/mail/${p}`, import.meta.url));

function mail(headers: string[], body: string): string {
  return [...headers, '', body].join('\r\n');
}

describe('analyzeMessage', () => {
  it('reports the threading fields, the sender and a decoded RFC 2047 subject', async () => {
    const a = await analyzeMessage(
      mail(
        [
          'From: =?UTF-8?Q?J=C3=BCrgen_M=C3=BCller?= <J.Mueller@Mueller-GmbH.example>',
          'To: alice@northwind.example',
          'Subject: =?UTF-8?Q?AW:_Kurze_Frage_zu_M=C3=BCller_GmbH?=',
          'Date: Tue, 10 Nov 2026 11:30:00 +0100',
          'Message-ID: <reply-1@mueller-gmbh.example>',
          'In-Reply-To: <msg_b.2@northwind.example>',
          'References: <msg_a.1@northwind.example>\r\n <msg_b.2@northwind.example>',
          'MIME-Version: 1.0',
          'Content-Type: text/plain; charset=utf-8',
          'Content-Transfer-Encoding: quoted-printable',
        ],
        'Gerne, lassen Sie uns n=C3=A4chste Woche telefonieren.',
      ),
    );
    assert.equal(a.kind, 'reply');
    assert.equal(a.messageId, '<reply-1@mueller-gmbh.example>');
    assert.equal(a.inReplyTo, '<msg_b.2@northwind.example>');
    assert.deepEqual(a.references, ['<msg_a.1@northwind.example>', '<msg_b.2@northwind.example>']);
    assert.equal(a.from, 'j.mueller@mueller-gmbh.example');
    assert.equal(a.fromName, 'Jürgen Müller');
    assert.equal(a.subject, 'AW: Kurze Frage zu Müller GmbH');
    assert.equal(a.date?.toISOString(), '2026-11-10T10:30:00.000Z');
    assert.equal(a.classification, 'interested');
    assert.equal(a.strippedText, 'Gerne, lassen Sie uns nächste Woche telefonieren.');
    assert.equal(a.bounce, null);
  });

  it('classifies the reply, not the quoted history that says the opposite', async () => {
    const unsubscribeOverInterest = await analyzeMessage(await fixture('replies/en/remove-over-earlier-interest.eml'));
    assert.equal(unsubscribeOverInterest.classification, 'unsubscribe');
    assert.equal(unsubscribeOverInterest.snippet, 'Please take me off your mailing list.');
    const interestOverUnsubscribeLink = await analyzeMessage(await fixture('replies/en/interested-with-unsub-in-quote.eml'));
    assert.equal(interestOverUnsubscribeLink.classification, 'interested');
    assert.equal(interestOverUnsubscribeLink.strippedText, "I'm interested. Thursday 2pm ET?");
  });

  it('reads base64 bodies and HTML-only mail', async () => {
    const html = await analyzeMessage(await fixture('replies/en/stop-html-only.eml'));
    assert.equal(html.strippedText, 'STOP');
    assert.equal(html.classification, 'unsubscribe');
    const android = await analyzeMessage(await fixture('replies/pt/descadastrar.eml'));
    assert.equal(android.strippedText, 'Quero me descadastrar.');
    assert.equal(android.classification, 'unsubscribe');
  });

  it('HTML that is huge or nested thousands deep is read by its start: classified, not lost to a stack overflow', async () => {
    const head = ['From: lead@example.com', 'To: alice@northwind.example', 'Subject: Re: Hi', 'Message-ID: <h1@example.com>', 'MIME-Version: 1.0', 'Content-Type: text/html; charset=utf-8'];
    const deep = await analyzeMessage(mail(head, `<p>Not interested, thanks.</p>${'<div>'.repeat(3000)}x${'</div>'.repeat(3000)}`));
    assert.equal(deep.kind, 'reply');
    assert.equal(deep.classification, 'not_interested');
    const rows = Array.from({ length: 70_000 }, (_, i) => `<tr><td>${i}</td><td>v</td></tr>`).join('');
    const table = await analyzeMessage(mail(head, `<p>Please remove me from your list.</p><table>${rows}</table>`));
    assert.equal(table.classification, 'unsubscribe');
  });

  it('every id of In-Reply-To is a reference; a Message-ID longer than a header line is none', async () => {
    const long = `<${'a'.repeat(6000)}@x.example>`;
    const a = await analyzeMessage(
      mail(['From: lead@example.com', 'To: alice@northwind.example', 'Subject: Re: Hi', `Message-ID: ${long}`, 'In-Reply-To: <theirs@example.com> <msg_ours.1@northwind.example>', `References: ${long}`], 'Yes, call me.'),
    );
    assert.equal(a.messageId, null);
    assert.equal(a.inReplyTo, '<theirs@example.com>');
    assert.deepEqual(a.references, ['<msg_ours.1@northwind.example>']);
  });

  it('threading ids with comments or without angle brackets are read as the ids they name', async () => {
    const a = await analyzeMessage(
      mail(['From: lead@example.com', 'To: alice@northwind.example', 'Subject: Re: Hi', 'Message-ID: <r9@example.com>', 'In-Reply-To: msg_ours.7@northwind.example (sent from a phone)', 'References: <first@example.com> (thread) msg_ours.7@northwind.example'], 'Yes, call me.'),
    );
    assert.equal(a.inReplyTo, '<msg_ours.7@northwind.example>');
    assert.ok(a.references.includes('<first@example.com>'), JSON.stringify(a.references));
  });

  it('an out-of-office reply carries its return date', async () => {
    const a = await analyzeMessage(await fixture('ooo/de/exchange.eml'));
    assert.equal(a.classification, 'out_of_office');
    assert.equal(a.decidedBy, 'header:auto-submitted');
    assert.equal(a.oooReturnDate?.toISOString(), '2026-11-28T00:00:00.000Z');
    const noDate = await analyzeMessage(await fixture('ooo/nl/sieve.eml'));
    assert.equal(noDate.classification, 'out_of_office');
    assert.equal(noDate.oooReturnDate, null);
  });

  it('without a Date header the date is null and options.now anchors a return date without a year', async () => {
    const raw = mail(['From: ann@example.org', 'Subject: Automatic reply: hello', 'Content-Type: text/plain'], 'I am out of the office and back on 3 December.');
    const a = await analyzeMessage(raw, { now: new Date('2026-11-20T00:00:00Z') });
    assert.equal(a.date, null);
    assert.equal(a.oooReturnDate?.toISOString().slice(0, 10), '2026-12-03');
    assert.equal((await analyzeMessage(raw)).oooReturnDate, null);
  });

  it('automatic mail (a null sender, Auto-Submitted) may be an unsubscribe request by its form; unsubscribe words in other automatic mail make no reply', async () => {
    // A mail client sending our List-Unsubscribe mailto with an empty sender and Auto-Submitted.
    const request = await analyzeMessage(await fixture('replies/en/r8-mailto-null-sender.eml'));
    assert.deepEqual([request.kind, request.classification, request.decidedBy], ['reply', 'unsubscribe', 'lexicon:unsubscribe:stop-word']);
    const digest = await analyzeMessage(
      mail(['Return-Path: <>', 'From: alerts@lead.example', 'To: alice@northwind.example', 'Subject: Your weekly digest', 'Message-ID: <d1@lead.example>'], 'Three new posts this week. To unsubscribe from these alerts, click here.'),
    );
    assert.equal(digest.kind, 'unclassified');
    assert.match(digest.decidedBy, /^guard:null-sender;lexicon:unsubscribe:en$/);
  });

  it('uses the classifier it is given (the seam for a model), but never for bounces', async () => {
    const calls: string[] = [];
    const model: ReplyClassifier = {
      async classify(input) {
        calls.push(input.text);
        return { classification: 'not_interested', decidedBy: 'model:test', confidence: 0.61 };
      },
    };
    const reply = await analyzeMessage(await fixture('replies/en/yes-lets-talk.eml'), { classifier: model });
    assert.deepEqual([reply.classification, reply.decidedBy, reply.confidence], ['not_interested', 'model:test', 0.61]);
    assert.deepEqual(calls, ["Yes let's talk. Tuesday or Wednesday afternoon works for me."]);
    const bounce = await analyzeMessage(await fixture('bounces/postfix/5.1.1-user-unknown.eml'), { classifier: model });
    assert.equal(bounce.kind, 'bounce');
    assert.equal(calls.length, 1);
  });
});

describe('the labeled fixture set (npm run eval:classify)', () => {
  it('is large and varied, and the classifier meets every target on it', async function () {
    this.timeout(120_000);
    const report = await evaluate();
    assert.ok(report.total >= 120, `${report.total} labeled messages`);
    for (const c of report.classes) assert.ok(c.total >= 10, `${c.name}: ${c.total}`);
    assert.ok(report.sets.holdout.total >= 30, 'a held-out part');
    const missed = report.targets.filter((t) => !t.met);
    assert.deepEqual(missed, [], formatReport(report));
  });
});
