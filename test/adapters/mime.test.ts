import assert from 'node:assert/strict';
import nodemailer from 'nodemailer';
import { rawMessage } from '../../src/adapters/mime.ts';
import type { OutgoingMail } from '../../src/adapters/smtp.ts';

/** What nodemailer's composer writes for the same mail (CRLF line ends, as on the wire). */
async function composed(mail: OutgoingMail, date: Date): Promise<{ message: string; envelope: { from: string; to: string[] } }> {
  const t = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'windows' } as Parameters<typeof nodemailer.createTransport>[0]);
  const info = (await t.sendMail({ ...mail, date })) as unknown as { message: Buffer; envelope: { from: string; to: string[] } };
  return { message: info.message.toString('utf8'), envelope: info.envelope };
}

const base: OutgoingMail = {
  from: { name: 'Bench Sender', address: 'sender@bench.example' },
  to: 'lead1@bench.example',
  subject: 'Quick question, First1',
  html: '<html><body><p>Hi First1,</p><p>I noticed Company 1 is growing its sales team. Would a short call next week make sense?</p><p><a href="http://127.0.0.1:8080/u/token1">Unsubscribe</a></p></body></html>',
  text: 'Hi First1,\n\nI noticed Company 1 is growing its sales team.\n\nUnsubscribe [http://127.0.0.1:8080/u/token1]',
  messageId: '<msg_1.abc@bench.example>',
  headers: {
    'List-Unsubscribe': '<http://127.0.0.1:8080/u/token1>, <mailto:sender@bench.example?subject=unsubscribe>',
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  },
};

const cases: Array<[string, Partial<OutgoingMail>]> = [
  ['the benchmark message', {}],
  ['a follow-up with In-Reply-To and long References', {
    subject: 'Re: Quick question, First1',
    inReplyTo: '<msg_0.aaa@bench.example>',
    references: Array.from({ length: 6 }, (_, i) => `<msg_${i}.0123456789abcdef@a-rather-long-sender-domain.example>`),
  }],
  ['non-ASCII names, subject and bodies (quoted-printable)', {
    from: { name: 'Zoë Ångström', address: 'zoe@acme.example' },
    subject: 'Café für Sie, Jürgen — 10 % de réduction',
    text: 'Grüße aus Köln,\n\nvoilà: déjà vu ☕',
    html: '<p>Grüße aus Köln, voilà: déjà vu ☕</p>',
  }],
  ['mostly non-Latin text (base64) and an emoji subject', {
    from: { name: 'Иван Петров', address: 'ivan@acme.example' },
    subject: 'Привет, как дела? 🚀',
    text: 'Привет! Это короткое письмо о нашем продукте, которое стоит прочитать.',
    html: '<p>Привет! Это короткое письмо о нашем продукте, которое стоит прочитать.</p>',
  }],
  ['quotes, commas and specials in the sender name', { from: { name: 'Smith, John "JJ" (Sales)', address: 'jj@acme.example' } }],
  ['trailing whitespace, long lines, dots and = in the text', {
    text: `line with trailing spaces   \n.starts with a dot\n=equals= ${'x'.repeat(200)}\n\tTab line\t`,
    html: `<p>${'word '.repeat(60)}</p>\n.<p>a=b</p>  `,
  }],
  ['an upper-case domain and a cc', { to: 'Lead.Two@Bench.EXAMPLE', cc: ['sdr@acme.example', 'Boss@Acme.Example'] }],
  ['a subject with double quotes, an encoded-word opener and a long unbroken run', { subject: `The "best" offer =?utf-8?q?x?= ${'y'.repeat(90)}` }],
  ['ids with white space or without angle brackets', { inReplyTo: 'bare@id.example', references: ['<a@b.example> <c@d.example>', 'e@f.example'] }],
  ['an empty subject', { subject: '' }],
  ['a header value needing encoding', { headers: { 'X-Campaign': 'Rentrée — été', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } }],
];

describe('raw campaign messages (src/adapters/mime.ts)', () => {
  for (const [name, patch] of cases) {
    it(`${name}: the same bytes and envelope as nodemailer's composer`, async () => {
      const mail = { ...base, ...patch };
      const date = new Date('2026-11-22T04:36:49.123Z');
      const built = rawMessage(mail, date);
      assert.ok(built, 'built');
      const expected = await composed(mail, date);
      const boundary = /boundary="([^"]+)"/.exec(built.raw.toString('utf8'))![1];
      const theirs = /boundary="([^"]+)"/.exec(expected.message)![1];
      assert.match(boundary, /^--_NmP-[0-9a-f]{16}-Part_1$/);
      const ours = built.raw.toString('utf8').replace(/\r?\n/g, '\r\n').split(boundary).join('BOUNDARY');
      assert.equal(ours, expected.message.split(theirs).join('BOUNDARY'));
      assert.deepEqual(built.envelope, expected.envelope);
    });
  }

  it('leaves attachments, a missing alternative and unusual addresses to the composer', () => {
    assert.equal(rawMessage({ ...base, attachments: [{ filename: 'a.txt', content: 'x', contentType: 'text/plain' }] }), null);
    assert.equal(rawMessage({ ...base, text: '' }), null);
    assert.equal(rawMessage({ ...base, to: 'jürgen@köln.example' }), null);
    assert.equal(rawMessage({ ...base, to: '"odd name"@acme.example' }), null);
    assert.equal(rawMessage({ ...base, to: 'a@xn--kln-sna.example' }), null);
  });

  it('a subject with a word too long to fold keeps every line within 998 characters, and reads back the same', async () => {
    const subject = `Hi ${'L'.repeat(5000)} there`;
    const raw = rawMessage({ ...base, subject })!.raw.toString('utf8');
    assert.ok(Math.max(...raw.split('\r\n').map((l) => l.length)) <= 998);
    const { simpleParser } = await import('mailparser');
    assert.equal((await simpleParser(raw)).subject, subject);
    // An ordinary subject stays plain text.
    assert.match(rawMessage(base)!.raw.toString('utf8'), /\r\nSubject: Quick question, First1\r\n/);
  });

  it('boundaries differ from message to message', () => {
    const a = rawMessage(base)!.raw.toString();
    const b = rawMessage(base)!.raw.toString();
    assert.notEqual(/boundary="([^"]+)"/.exec(a)![1], /boundary="([^"]+)"/.exec(b)![1]);
  });
});
