import assert from 'node:assert/strict';
import net from 'node:net';
import { classifySmtpError, SmtpMessenger, type OutgoingMail } from '../../src/adapters/smtp.ts';

// A mail server's answer is stored in text columns (last_error, smtp_response): PostgreSQL
// refuses NUL in text, so a hostile or broken server must not be able to fail the outcome.
describe('SMTP outcomes are storable text', () => {
  it('drops NUL and replaces lone surrogates in a refusal', () => {
    const outcome = classifySmtpError({ responseCode: 550, response: '550 no\u0000 such \ud800user' });
    assert.equal(outcome.kind, 'rejected');
    assert.equal(outcome.response, '550 no such \ufffduser');
  });

  it('keeps the first 1,000 characters of a long answer', () => {
    const outcome = classifySmtpError({ responseCode: 451, response: '451 ' + 'x'.repeat(5000) });
    assert.equal(outcome.kind, 'temporary');
    assert.equal(outcome.response.length, 1000);
  });

  it("a refusal of the greeting, EHLO or MAIL FROM is the account's; of RCPT or DATA the message's; a connection lost after the data is an attempt", () => {
    const kind = (e: object, dataEnded = false) => classifySmtpError(e, dataEnded).kind;
    assert.equal(kind({ code: 'EPROTOCOL', responseCode: 554, command: 'CONN', response: '554 5.7.1 no SMTP service here' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 550, command: 'MAIL FROM', response: '550 sender rejected' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 451, command: 'MAIL FROM', response: '451 try later' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 552, command: 'MAIL FROM', response: '552 message too big' }), 'rejected');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO', response: '550 no such user' }), 'rejected');
    assert.equal(kind({ code: 'EMESSAGE', responseCode: 554, command: 'DATA', response: '554 spam' }), 'rejected');
    assert.equal(kind({ code: 'ECONNECTION', command: 'CONN', message: 'Connection closed unexpectedly' }), 'unreachable');
    assert.equal(kind({ code: 'ECONNECTION', command: 'CONN', message: 'Connection closed unexpectedly' }, true), 'temporary');
    assert.equal(kind({ code: 'ETIMEDOUT', command: 'CONN', message: 'Timeout' }, true), 'temporary');
    // A refused login stops the account until it is resumed; a temporary one (454) backs off.
    assert.equal(kind({ code: 'EAUTH', responseCode: 535, command: 'AUTH PLAIN', response: '535 5.7.8 bad credentials' }), 'auth_failed');
    assert.equal(kind({ code: 'EAUTH', responseCode: 454, command: 'AUTH PLAIN', response: '454 4.7.0 temporary authentication failure' }), 'unreachable');
  });

  it("a 5xx about the account's sending quota is the account's throttling; a recipient's full mailbox stays the message's", () => {
    const kind = (code: number, response: string, command = 'DATA') => classifySmtpError({ code: 'EMESSAGE', responseCode: code, command, response }).kind;
    assert.equal(kind(550, '550-5.4.5 Daily user sending limit exceeded. For more information on Gmail sending limits go to https://support.google.com/a/answer/166852'), 'rate_limited');
    assert.equal(kind(554, '554 5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException; Failed to process message due to a permanent exception'), 'rate_limited');
    assert.equal(kind(550, "550 5.1.90 Your message can't be sent because you've reached your daily limit for message recipients"), 'rate_limited');
    assert.equal(kind(550, '550 Sending quota exceeded for this account'), 'rate_limited');
    assert.equal(kind(550, '550 5.7.1 Daily sending limit reached, try tomorrow', 'RCPT TO'), 'rate_limited');
    assert.equal(kind(552, '552 5.2.2 The email account that you tried to reach is over quota', 'RCPT TO'), 'rejected');
    assert.equal(kind(552, '552 Mailbox quota exceeded for this recipient', 'RCPT TO'), 'rejected');
    assert.equal(kind(550, '550 5.1.1 The email account that you tried to reach does not exist', 'RCPT TO'), 'rejected');
    assert.equal(kind(554, '554 5.7.1 Message rejected: the daily digest of limits was exceeded by spam score'), 'rejected');
    assert.equal(kind(550, '550 5.7.1 The recipient has exceeded their daily message limit', 'RCPT TO'), 'rejected');
    assert.equal(kind(550, '550 5.7.1 Recipient daily message limit exceeded', 'RCPT TO'), 'rejected');
  });

  it('a server that drops the connection after the whole message (before its answer) costs the message an attempt', async () => {
    // A minimal SMTP server: it reads the message to its final dot, then closes without a word.
    let messages = 0;
    const server = net.createServer((socket) => {
      let data = false;
      let buffer = '';
      socket.write('220 drop.example ESMTP\r\n');
      socket.on('data', (chunk) => {
        buffer += chunk.toString('latin1');
        if (data) {
          if (buffer.includes('\r\n.\r\n')) {
            messages++;
            socket.destroy();
          }
          return;
        }
        let i;
        while ((i = buffer.indexOf('\r\n')) >= 0) {
          const line = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          if (/^EHLO/i.test(line)) socket.write('250-drop.example\r\n250 8BITMIME\r\n');
          else if (/^DATA/i.test(line)) {
            data = true;
            socket.write('354 go ahead\r\n');
            return;
          } else if (/^QUIT/i.test(line)) socket.end('221 bye\r\n');
          else socket.write('250 ok\r\n');
        }
      });
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const messenger = new SmtpMessenger({ maxConnections: 1 });
    try {
      const mail: OutgoingMail = {
        from: { name: 'Alice', address: 'alice@acme.example' },
        to: 'lead@lead.example',
        subject: 'Hi',
        html: '<p>Hi</p>',
        text: 'Hi',
        messageId: '<msg_drop.1@acme.example>',
      };
      const outcome = await messenger.send({ id: 'snd_drop', smtpUrl: `smtp://127.0.0.1:${(server.address() as net.AddressInfo).port}` }, mail);
      assert.equal(messages, 1, 'the server read the whole message');
      assert.equal(outcome.kind, 'temporary');
    } finally {
      await messenger.close();
      server.close();
    }
  });
});
