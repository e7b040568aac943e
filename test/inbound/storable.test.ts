import assert from 'node:assert/strict';
import pg from 'pg';
import { analyzeMessage } from '../../src/modules/inbound/analyze.ts';
import { dsn } from '../support/mail.ts';

// Inbound mail is never refused for its text: NUL characters are dropped and lone surrogates
// replaced, so every field the ingest stores is accepted by PostgreSQL's text and jsonb.
describe('inbound mail: every analysed field is storable text', () => {
  it('a NUL in the subject and body and a lone surrogate in a UTF-16 part reach PostgreSQL intact otherwise', async () => {
    // A UTF-16LE part holding "Hi " and then an unpaired high surrogate (0xD800).
    const utf16 = Buffer.from([0x48, 0x00, 0x69, 0x00, 0x20, 0x00, 0x00, 0xd8, 0x21, 0x00]).toString('base64');
    const raw = [
      'From: Prospect <p@example.org>',
      'To: alice@northwind.example',
      'Subject: =?UTF-8?Q?Interested=00_in_a_demo?=',
      'Message-ID: <m1@example.org>',
      'In-Reply-To: <orig@northwind.example>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/alternative; boundary="b"',
      '',
      '--b',
      'Content-Type: text/plain; charset=utf-8',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      'Yes, I am interested=00 in a demo next week.',
      '--b',
      'Content-Type: text/html; charset=utf-16le',
      'Content-Transfer-Encoding: base64',
      '',
      utf16,
      '--b--',
      '',
    ].join('\r\n');
    const a = await analyzeMessage(raw);
    assert.equal(a.kind, 'reply');
    assert.equal(a.subject, 'Interested in a demo');
    assert.match(a.strippedText, /^Yes, I am interested in a demo next week\.$/);
    const utf16Only = await analyzeMessage(raw.replace(/--b\r\nContent-Type: text\/plain[\s\S]*?(?=--b\r\nContent-Type: text\/html)/, ''));
    assert.match(utf16Only.strippedText, /^Hi \ufffd!$/);

    const db = new pg.Client({ connectionString: process.env.MAILGATE_TEST_ADMIN_URL });
    await db.connect();
    try {
      for (const v of [a, utf16Only]) {
        const { rows } = await db.query('select $1::text as subject, $2::text as body, $3::jsonb as doc', [v.subject, v.strippedText, JSON.stringify(v)]);
        assert.equal(rows[0].subject, v.subject);
        assert.equal(rows[0].body, v.strippedText);
      }
    } finally {
      await db.end();
    }
  });

  it('a NUL in the Message-IDs a bounce or a complaint names (text[] to find the original) is dropped: the report is not refused', async () => {
    const headers = ['From: Alice <alice@northwind.example>', 'To: gone@example.org', 'Subject: Hello', 'Message-ID: <orig\u0000id@northwind.example>', ''];
    const report = dsn({ to: 'alice@northwind.example', messageId: '<dsn-nul@mx.example.org>', original: '<orig\u0000id@northwind.example>', recipient: 'gone@example.org', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' });
    const arf = [
      'From: Feedback Loop <fbl@isp.example>',
      'To: alice@northwind.example',
      'Subject: Complaint',
      'Message-ID: <arf-nul@isp.example>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=feedback-report; boundary="b2"',
      '',
      '--b2',
      'Content-Type: text/plain',
      '',
      'This is a spam complaint.',
      '--b2',
      'Content-Type: message/feedback-report',
      '',
      'Feedback-Type: abuse',
      'User-Agent: ISP-FBL/1.0',
      'Version: 1',
      'Original-Rcpt-To: gone@example.org',
      '',
      '--b2',
      'Content-Type: text/rfc822-headers',
      '',
      ...headers,
      '--b2--',
      '',
    ].join('\r\n');
    const bounce = await analyzeMessage(report);
    const complaint = await analyzeMessage(arf);
    assert.equal(bounce.kind, 'bounce');
    assert.equal(complaint.kind, 'complaint');
    const idLists = [bounce.bounce!.originalMessageIds, complaint.complaint!.originalMessageIds];
    for (const ids of idLists) assert.ok(ids.includes('<origid@northwind.example>'), JSON.stringify(ids));
    const db = new pg.Client({ connectionString: process.env.MAILGATE_TEST_ADMIN_URL });
    await db.connect();
    try {
      // What matchByMessageIds sends, and the jsonb the ingest stores.
      for (const [i, ids] of idLists.entries()) {
        const { rows } = await db.query('select $1::text[] as ids, $2::jsonb as doc', [ids, JSON.stringify([bounce, complaint][i])]);
        assert.deepEqual(rows[0].ids, ids);
      }
    } finally {
      await db.end();
    }
  });
});
