import assert from 'node:assert/strict';
import { analyzeMessage } from '../../src/modules/inbound/analyze.ts';
import { stripReply } from '../../src/modules/inbound/strip.ts';

// Analysis runs on the worker's event loop: a pattern that backtracks over what a sender wrote
// holds every mailbox, lease renewal and send of that worker, and the mailbox's next holder
// meets the same message. Stripping a reply and reading a bounce take time linear in its length.
describe('inbound mail: analysis does not backtrack over what a sender wrote', function () {
  this.timeout(120_000);
  const reply = (headers: string[], body: string) =>
    Buffer.from(['From: Lead <lead@example.org>', 'To: alice@northwind.example', 'Subject: Re: Quick question', 'Message-ID: <r@example.org>', 'In-Reply-To: <orig@northwind.example>', 'MIME-Version: 1.0', ...headers, '', body, ''].join('\r\n'));
  const timed = async (raw: Buffer) => {
    const t = Date.now();
    const a = await analyzeMessage(raw);
    return { a, ms: Date.now() - t };
  };

  it('an HTML-only reply whose text is one long paragraph of prose (one line of 60,000 characters)', async () => {
    const sentence = 'Thanks for reaching out on this. I think that what you describe is a great fit for the team at our company, and I would like to know more about the data platform and what it costs. ';
    const paragraph = sentence.repeat(Math.ceil(60_000 / sentence.length));
    // email-reply-parser's "NAME on DATE at TIME wrote:" was cubic in the line: 4 s at 40,000
    // characters, about 13 s at 60,000, hours at the 2 MB a message may hold.
    const { a, ms } = await timed(reply(['Content-Type: text/html; charset=utf-8'], `<html><body><p>${paragraph}</p></body></html>`));
    assert.equal(a.kind, 'reply');
    assert.ok(a.snippet.startsWith('Thanks for reaching out on this.'));
    assert.equal(a.strippedText, paragraph.trim(), 'the whole paragraph is the reply');
    assert.ok(ms < 3_000, `analysed in ${ms} ms`);
  });

  it('a run of 60,000 blanks before a word', async () => {
    // normalize()'s trailing-blank pattern was tried at every blank of the run: 15 s.
    const { a, ms } = await timed(reply(['Content-Type: text/plain; charset=utf-8'], `Not interested.\r\n${' \t'.repeat(30_000)}x`));
    assert.equal(a.kind, 'reply');
    assert.ok(a.snippet.startsWith('Not interested.'));
    assert.ok(ms < 3_000, `analysed in ${ms} ms`);
  });

  it('a reply longer than what email-reply-parser reads keeps its text; quoted history the parser finds early still goes', () => {
    const long = Array.from({ length: 400 }, (_, i) => `Line ${i} of a long answer about our rollout plans.`).join('\n');
    const out = stripReply(`${long}\nLAST LINE OF THE ANSWER`);
    assert.ok(out.endsWith('LAST LINE OF THE ANSWER'), 'the end of a long reply is kept');
    assert.ok(out.startsWith('Line 0 of'));
    // A Polish attribution (known to email-reply-parser only) early in a long mail: what follows is history.
    const quoted = stripReply(`Tak, zapraszam.\n\nW dniu 3 marca 2026 Alice <alice@northwind.example> napisał:\n\n${long}`);
    assert.equal(quoted, 'Tak, zapraszam.');
  });

  it('a bounce notice (anyone may write as MAILER-DAEMON) padded with blanks, blank lines and a run of "a@"', async () => {
    const body = [
      'This is the mail system at host mx.example.org.',
      '',
      '<lead@example.org>: host mx.example.org said: 550 5.1.1 User unknown',
      `${' \t'.repeat(30_000)}x`,
      '\n'.repeat(60_000),
      'a@'.repeat(30_000),
    ].join('\n');
    const raw = Buffer.from(['From: Mail Delivery System <MAILER-DAEMON@mx.example.org>', 'To: alice@northwind.example', 'Subject: Undelivered Mail Returned to Sender', 'Message-ID: <b@mx.example.org>', '', body, ''].join('\r\n'));
    // "any line with an SMTP answer", the "<addr>:" and "rcpt to:" lines and the address pattern
    // were tried at every blank, blank line or character of a run: about 10 s here.
    const { a, ms } = await timed(raw);
    assert.equal(a.kind, 'bounce');
    assert.equal(a.bounce?.recipient, 'lead@example.org');
    assert.equal(a.bounce?.type, 'hard');
    assert.ok(ms < 3_000, `analysed in ${ms} ms`);
  });
});
