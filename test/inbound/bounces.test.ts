import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { analyzeMessage } from '../../src/modules/inbound/analyze.ts';
import { detectBounce, parseDeliveryStatus, type BounceCandidate } from '../../src/modules/inbound/bounces.ts';

const fixture = (p: string) => readFile(new URL(`../../fixtures/mail/${p}`, import.meta.url));

function candidate(over: Partial<BounceCandidate> & { headers?: Record<string, string> }): BounceCandidate {
  const headers = over.headers ?? {};
  return {
    fromAddress: 'mailer-daemon@mx.example.net',
    fromName: 'Mail Delivery System',
    subject: 'Undelivered Mail Returned to Sender',
    reportType: null,
    nullSender: true,
    header: (name) => headers[name] ?? null,
    text: '',
    parts: [],
    inReplyTo: null,
    ...over,
  };
}

const dsn = (recipientFields: string[]) => `Reporting-MTA: dns; mx.example.net\n\n${recipientFields.join('\n')}\n`;
const original = 'From: Alice <alice@northwind.example>\nTo: Bob <bob@example.org>\nSubject: Hello\nMessage-ID:\n <msg_1.abc@northwind.example>\n\nHi Bob';

describe('bounce detection: RFC 3464 delivery-status reports', () => {
  it('a failed 5.x.x recipient is a hard bounce with the diagnostic text, the original Message-ID and the recipient', () => {
    const v = detectBounce(
      candidate({
        reportType: 'delivery-status',
        parts: [
          { contentType: 'message/delivery-status', content: dsn(['Final-Recipient: rfc822; Bob@Example.org', 'Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550-5.1.1 No such user', '   550 5.1.1 here']) },
          { contentType: 'message/rfc822', content: original },
        ],
      }),
    );
    assert.equal(v?.kind, 'bounce');
    if (v?.kind !== 'bounce') return;
    assert.equal(v.decidedBy, 'dsn:rfc3464;type:status-class');
    assert.deepEqual(v.bounce, { type: 'hard', status: '5.1.1', reason: '550 5.1.1 No such user here', originalMessageId: '<msg_1.abc@northwind.example>', originalMessageIds: ['<msg_1.abc@northwind.example>'], recipient: 'bob@example.org' });
  });

  it('a failed 4.x.x recipient is a soft bounce; Action: delayed, delivered and relayed are ignored', () => {
    const soft = detectBounce(candidate({ parts: [{ contentType: 'message/delivery-status', content: dsn(['Final-Recipient: rfc822; bob@example.org', 'Action: failed', 'Status: 4.4.7']) }] }));
    assert.equal(soft?.kind === 'bounce' && soft.bounce.type, 'soft');
    assert.equal(soft?.kind === 'bounce' && soft.bounce.status, '4.4.7');
    for (const action of ['delayed', 'delivered', 'relayed']) {
      const v = detectBounce(candidate({ parts: [{ contentType: 'message/delivery-status', content: dsn(['Final-Recipient: rfc822; bob@example.org', `Action: ${action}`, 'Status: 4.4.1']) }] }));
      assert.equal(v?.kind, 'ignored', action);
      assert.equal(v?.decidedBy, `dsn:action-${action}`);
    }
  });

  it('takes the failed recipient of a report that also lists a delayed one', () => {
    const groups = parseDeliveryStatus(
      dsn(['Final-Recipient: rfc822; a@example.org', 'Action: delayed', 'Status: 4.2.0', '', 'Final-Recipient: rfc822; b@example.org', 'Action: failed', 'Status: 5.1.01']),
    );
    assert.deepEqual(
      groups.map((g) => [g.finalRecipient, g.action, g.status]),
      [
        ['a@example.org', 'delayed', '4.2.0'],
        ['b@example.org', 'failed', '5.1.1'],
      ],
    );
    const v = detectBounce(candidate({ parts: [{ contentType: 'message/delivery-status', content: dsn(['Final-Recipient: rfc822; a@example.org', 'Action: delayed', 'Status: 4.2.0', '', 'Final-Recipient: rfc822; b@example.org', 'Action: failed', 'Status: 5.1.1']) }] }));
    assert.equal(v?.kind === 'bounce' && v.bounce.recipient, 'b@example.org');
  });

  it('read receipts and feedback reports are ignored', () => {
    assert.equal(detectBounce(candidate({ reportType: 'disposition-notification' }))?.decidedBy, 'report:disposition-notification');
    assert.equal(detectBounce(candidate({ reportType: 'feedback-report' }))?.kind, 'ignored');
  });

  it('without a copy of the original it falls back to the report In-Reply-To', () => {
    const v = detectBounce(candidate({ inReplyTo: '<msg_2.def@northwind.example>', parts: [{ contentType: 'message/delivery-status', content: dsn(['Final-Recipient: rfc822; bob@example.org', 'Action: failed', 'Status: 5.7.1']) }] }));
    assert.equal(v?.kind === 'bounce' && v.bounce.originalMessageId, '<msg_2.def@northwind.example>');
    assert.equal(v?.kind === 'bounce' && v.bounce.reason, 'permanent failure: security or policy problem (5.7.1)');
  });
});

describe('bounce detection: non-standard notices', () => {
  it('qmail: status from "(#5.1.1)", Message-ID from the copy below the line', () => {
    const v = detectBounce(
      candidate({
        subject: 'failure notice',
        text: "Hi. This is the qmail-send program at mail.example.net.\nI'm afraid I wasn't able to deliver your message to the following addresses.\nThis is a permanent error; I've given up. Sorry it didn't work out.\n\n<bob@example.org>:\nSorry, no mailbox here by that name. (#5.1.1)\n\n--- Below this line is a copy of the message.\n\nReturn-Path: <alice@northwind.example>\nMessage-ID: <msg_3@northwind.example>\n",
      }),
    );
    assert.equal(v?.kind, 'bounce');
    if (v?.kind !== 'bounce') return;
    assert.deepEqual(v.bounce, { type: 'hard', status: '5.1.1', reason: 'Sorry, no mailbox here by that name. (#5.1.1)', originalMessageId: '<msg_3@northwind.example>', originalMessageIds: ['<msg_3@northwind.example>'], recipient: 'bob@example.org' });
  });

  it('Exim: X-Failed-Recipients, the SMTP error line as reason; a retry timeout without a code is soft', () => {
    const exim = (block: string) =>
      detectBounce(
        candidate({
          subject: 'Mail delivery failed: returning message to sender',
          headers: { 'x-failed-recipients': 'bob@example.org' },
          text: `This message was created automatically by mail delivery software.\n\nA message that you sent could not be delivered to one or more of its\nrecipients. This is a permanent error. The following address(es) failed:\n\n  bob@example.org\n${block}\n------ This is a copy of the message, including all the headers. ------\nMessage-Id: <msg_4@northwind.example>\n`,
        }),
      );
    const hard = exim('    host mx.example.org [203.0.113.7]\n    SMTP error from remote mail server after RCPT TO:<bob@example.org>:\n    550 Unrouteable address\n');
    assert.equal(hard?.decidedBy, 'bounce-text:x-failed-recipients;type:smtp-code');
    assert.deepEqual(hard?.kind === 'bounce' && hard.bounce, { type: 'hard', status: null, reason: '550 Unrouteable address', originalMessageId: '<msg_4@northwind.example>', originalMessageIds: ['<msg_4@northwind.example>'], recipient: 'bob@example.org' });
    const soft = exim('    retry timeout exceeded\n');
    assert.equal(soft?.kind === 'bounce' && soft.bounce.type, 'soft');
    assert.equal(soft?.kind === 'bounce' && soft.bounce.reason, 'retry timeout exceeded');
  });

  it('a delay warning without a DSN part is ignored', () => {
    const v = detectBounce(candidate({ subject: 'Warning: message 1vAbC-000Def-Gh delayed 24 hours', text: 'A message that you sent has not yet been delivered to one or more of its\nrecipients after more than 24 hours on the queue.\n\nNo action is required on your part.' }));
    assert.equal(v?.kind, 'ignored');
  });

  it('a person writing about a failed delivery is not a bounce', () => {
    const v = detectBounce(
      candidate({ fromAddress: 'tom@example.org', fromName: 'Tom', nullSender: false, subject: 'Re: Quick question', text: 'Your email could not be delivered to my colleague, user unknown apparently. Can you resend?' }),
    );
    assert.equal(v, null);
  });
});

describe('bounce detection: what is not a bounce', () => {
  it('an RFC 3834 auto-reply (null sender, Auto-Submitted) saying the person cannot be reached is out of office', async () => {
    const raw = [
      'Return-Path: <>',
      'From: Ann Lee <ann@example.org>',
      'To: alice@northwind.example',
      'Subject: Re: Quick question',
      'Auto-Submitted: auto-replied',
      'Date: Mon, 16 Nov 2026 08:00:00 +0000',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'I cannot be reached until 30 November. Your message was not delivered to my team either.',
    ].join('\r\n');
    const a = await analyzeMessage(raw);
    assert.equal(a.kind, 'reply');
    assert.equal(a.classification, 'out_of_office');
    assert.equal(a.oooReturnDate?.toISOString().slice(0, 10), '2026-11-30');
  });
});

describe('bounce fixtures from each MTA family', () => {
  const cases: Array<[string, 'hard' | 'soft', string | null, string]> = [
    ['gmail/dsn-5.1.1-address-not-found.eml', 'hard', '5.1.1', 'dsn:rfc3464'],
    ['gmail/legacy-failed-permanently.eml', 'hard', '5.1.1', 'bounce-text:x-failed-recipients'],
    ['microsoft/o365-5.1.10-recipient-not-found.eml', 'hard', '5.1.10', 'dsn:rfc3464'],
    ['microsoft/exchange2003-not-reached.eml', 'hard', '5.1.1', 'bounce-text:mailer-daemon'],
    ['postfix/4.4.1-expired.eml', 'soft', '4.4.1', 'dsn:rfc3464'],
    ['postfix/legacy-multipart-mixed.eml', 'hard', '5.1.1', 'bounce-text:mailer-daemon'],
    ['exim/550-user-unknown.eml', 'hard', '5.1.1', 'bounce-text:x-failed-recipients'],
    ['sendmail/4.4.7-five-days.eml', 'soft', '4.4.7', 'dsn:rfc3464'],
    ['sendmail/plain-user-unknown.eml', 'hard', '5.1.1', 'bounce-text:mailer-daemon'],
    ['qmail/connection-4.4.1.eml', 'soft', '4.4.1', 'bounce-text:mailer-daemon'],
    ['yahoo/yahoo-554.eml', 'hard', null, 'bounce-text:mailer-daemon'],
    ['ses/4.2.2-mailbox-full.eml', 'soft', '4.2.2', 'dsn:rfc3464'],
    ['microsoft/r4-global-delivery-status.eml', 'hard', '5.1.1', 'dsn:rfc3464'],
  ];
  for (const [file, type, status, decidedBy] of cases) {
    it(`${file}: ${type} ${status ?? '(no status)'} via ${decidedBy}`, async () => {
      const a = await analyzeMessage(await fixture(`bounces/${file}`));
      assert.equal(a.kind, 'bounce');
      assert.equal(a.classification, 'bounce');
      assert.equal(a.decidedBy.split(';')[0], decidedBy, 'the detector');
      assert.match(a.decidedBy, /;type:(status-class|smtp-code|text:[a-z-]+|default-hard)$/, 'and the rule that decided hard or soft');
      assert.equal(a.bounce?.type, type);
      assert.equal(a.bounce?.status, status);
      assert.match(a.bounce?.originalMessageId ?? '', /^<msg_[a-z2-7]{26}\.[0-9a-f]{12}@northwind\.example>$/);
      assert.match(a.bounce?.recipient ?? '', /^[^@\s]+@[^@\s]+\.example$/);
      assert.ok(a.bounce!.reason.length > 5);
      assert.equal(a.snippet, a.bounce!.reason.slice(0, 200).trimEnd());
    });
  }

  it('delay DSNs, success DSNs and read receipts are kind "ignored"', async () => {
    for (const file of ['gmail/dsn-delay.eml', 'microsoft/o365-delivery-delayed.eml', 'postfix/delayed-warning.eml', 'sendmail/warning-4-hours.eml', 'postfix/success-notify.eml', 'microsoft/read-receipt.eml', 'exim/delay-warning.eml']) {
      const a = await analyzeMessage(await fixture(`bounces/${file}`));
      assert.equal(a.kind, 'ignored', file);
      assert.equal(a.bounce, null);
    }
  });
});
