import assert from 'node:assert/strict';
import net from 'node:net';
import { SmtpSink } from '../support/smtp.ts';
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
    // A refusal to relay, or to take mail before a login, answered to a recipient: the account's server refusing the account.
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 554, command: 'RCPT TO', response: '554 5.7.1 <lead@lead.example>: Relay access denied' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO', response: '550 5.7.54 SMTP; Unable to relay recipient in non-accepted domain' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO', response: '550 5.7.64 TenantAttribution; Relay Access Denied' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 530, command: 'RCPT TO', response: '530 5.7.0 Authentication required' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO', response: "550-5.7.1 Invalid credentials for relay [192.0.2.7]. The IP address you've registered in your Workspace SMTP Relay service doesn't match" }), 'unreachable');
    // Postfix answers its client, HELO and sender restrictions at RCPT TO (smtpd_delay_reject).
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 553, command: 'RCPT TO', response: '553 5.7.1 <alice@acme.example>: Sender address rejected: not owned by user alice' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 450, command: 'RCPT TO', response: '450 4.7.1 Client host rejected: cannot find your hostname, [192.0.2.7]' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 504, command: 'RCPT TO', response: '504 5.5.2 <localhost>: Helo command rejected: need fully-qualified hostname' }), 'unreachable');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO', response: '550 5.1.1 <lead@lead.example>: Recipient address rejected: User unknown in local recipient table' }), 'rejected');
    // Microsoft 365 refusing the From after the data: the account's, not the lead's.
    assert.equal(kind({ code: 'EMESSAGE', responseCode: 554, command: 'DATA', response: '554 5.2.0 STOREDRV.Submission.Exception:SendAsDeniedException.MapiExceptionSendAsDenied; Failed to process message due to a permanent exception with message Cannot submit message.' }), 'unreachable');
    assert.equal(kind({ code: 'EMESSAGE', responseCode: 550, command: 'DATA', response: '550 5.7.60 SMTP; Client does not have permissions to send as this sender' }), 'unreachable');
    assert.equal(kind({ code: 'EMESSAGE', responseCode: 554, command: 'DATA', response: '554 5.7.1 Message rejected as spam by content filter' }), 'rejected');
    assert.equal(kind({ code: 'EENVELOPE', responseCode: 550, command: 'RCPT TO', response: '550 5.1.1 <relay.desk@lead.example>: Recipient address rejected: User unknown' }), 'rejected');
    // A peer that speaks no SMTP, or a failed TLS upgrade, before the end of the data: the account's.
    assert.equal(kind({ code: 'EPROTOCOL', command: 'CONN', response: '+OK POP3 server ready' }), 'unreachable');
    assert.equal(kind({ code: 'ETLS', command: 'STARTTLS', message: 'Error initiating TLS' }), 'unreachable');
    assert.equal(kind({ code: 'EPROTOCOL', command: 'CONN', message: 'Server response exceeds maximum allowed size' }, true), 'temporary');
    assert.equal(kind({ code: 'EMESSAGE', responseCode: 554, command: 'DATA', response: '554 spam' }), 'rejected');
    assert.equal(kind({ code: 'ECONNECTION', command: 'CONN', message: 'Connection closed unexpectedly' }), 'unreachable');
    assert.equal(kind({ code: 'ECONNECTION', command: 'CONN', message: 'Connection closed unexpectedly' }, true), 'temporary');
    assert.equal(kind({ code: 'ETIMEDOUT', command: 'CONN', message: 'Timeout' }, true), 'temporary');
    // A refused login stops the account until it is resumed; a temporary one (454) backs off.
    assert.equal(kind({ code: 'EAUTH', responseCode: 535, command: 'AUTH PLAIN', response: '535 5.7.8 bad credentials' }), 'auth_failed');
    assert.equal(kind({ code: 'EAUTH', responseCode: 454, command: 'AUTH PLAIN', response: '454 4.7.0 temporary authentication failure' }), 'unreachable');
    // An answer to AUTH that is no SMTP reply (what nodemailer gives a peer answering garbage:
    // EAUTH without a code) refused no credentials: backed off, not stopped until resumed.
    assert.equal(kind({ code: 'EAUTH', command: 'AUTH PLAIN', response: 'HTTP/1.1 400 Bad Request' }), 'unreachable');
    assert.equal(kind({ code: 'EAUTH', command: 'AUTH LOGIN', response: 'garbage' }), 'unreachable');
    // A server offering no AUTH to an account with credentials: the account's configuration, stopped.
    assert.equal(kind({ code: 'ENOAUTH', command: 'AUTH' }), 'auth_failed');
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

  it('a refusal saying the server has too many connections from us, to a connection being set up, is told apart from a throttle', () => {
    const outcome = (command: string, code: number, response: string, e: object = {}) => {
      const o = classifySmtpError({ code: command === 'CONN' ? 'EPROTOCOL' : 'EENVELOPE', command, responseCode: code, response, ...e });
      return [o.kind, 'tooManyConnections' in o ? o.tooManyConnections : false];
    };
    const tooMany = ['rate_limited', true];
    const throttle = ['rate_limited', false];
    // Microsoft 365, smtp-server's maxClients, Postfix's per-client limit, other wordings.
    assert.deepEqual(outcome('CONN', 421, '421 4.3.2 The maximum number of concurrent server connections has exceeded a limit, closing transmission channel'), tooMany);
    assert.deepEqual(outcome('CONN', 421, '421 mx.example Too many connected clients, try again in a moment'), tooMany);
    assert.deepEqual(outcome('CONN', 421, '421 4.7.0 mail.example.com Error: too many connections from 192.0.2.7'), tooMany);
    assert.deepEqual(outcome('CONN', 421, '421 4.7.0 Connection limit exceeded for this account'), tooMany);
    assert.deepEqual(outcome('EHLO', 421, '421 4.7.0 Too many concurrent SMTP connections; please try again later'), tooMany, 'at EHLO');
    assert.deepEqual(outcome('CONN', 450, '450 4.3.2 Too many open connections, try later'), tooMany, 'a 4xx other than 421');
    assert.deepEqual(outcome('CONN', 421, '421 4.3.2 Connections from your account are over the allowed number'), tooMany);
    // Refused to the login or to the first MAIL FROM (a limit per account is known once the login names it).
    assert.deepEqual(outcome('AUTH PLAIN', 421, '421 4.3.2 The maximum number of concurrent server connections has exceeded a limit', { code: 'EAUTH' }), tooMany);
    assert.deepEqual(outcome('MAIL FROM', 421, '421 4.3.2 The maximum number of concurrent server connections has exceeded a limit'), tooMany);
    // Gmail's generic throttle, a shutdown, Exim's limit of messages per connection: throttles as before.
    assert.deepEqual(outcome('CONN', 421, '421 4.7.0 Try again later, closing connection.'), throttle);
    assert.deepEqual(outcome('CONN', 421, '421 4.3.2 Service shutting down, closing connection'), throttle);
    assert.deepEqual(outcome('CONN', 421, '421 4.3.2 Service not available, closing transmission channel'), throttle);
    assert.deepEqual(outcome('MAIL FROM', 421, '421 too many messages in this connection'), throttle);
    // The same words inside a transaction come from a connection the server took: a throttle.
    assert.deepEqual(outcome('RCPT TO', 421, '421 4.7.0 too many connections, try later'), throttle);
    // As nodemailer reports a 421 to RCPT TO or DATA: the server closing a transaction's connection.
    assert.deepEqual(outcome('CONN', 421, '421 4.7.0 too many connections, try later', { code: 'ECONNECTION' }), throttle);
    // Not temporary: not this (a permanent refusal of the greeting is the account's, as before).
    assert.deepEqual(outcome('CONN', 554, '554 5.7.1 too many connections from your network, go away'), ['unreachable', false]);
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
      // The same through nodemailer's composer (a lead at an IDN domain, or a body without
      // text, is no raw message): it was taken for the account's failure, not an attempt, and
      // the message went to the server again at every claim.
      const composed = await messenger.send(
        { id: 'snd_drop', smtpUrl: `smtp://127.0.0.1:${(server.address() as net.AddressInfo).port}` },
        { ...mail, to: 'lead@xn--mller-kva.example', messageId: '<msg_drop.2@acme.example>' },
      );
      assert.equal(messages, 2, 'the server read the whole composed message');
      assert.equal(composed.kind, 'temporary', JSON.stringify(composed));
    } finally {
      await messenger.close();
      server.close();
    }
  });
});

describe('SMTP outcomes of a misbehaving server', function () {
  this.timeout(30_000);
  const mail = (n: number): OutgoingMail => ({
    from: { name: 'Alice', address: 'alice@acme.example' },
    to: `lead${n}@lead.example`,
    subject: 'Hi',
    html: '<p>Hi</p>',
    text: 'Hi',
    messageId: `<msg_limit.${n}@acme.example>`,
  });

  it('a server that limits messages per connection (421 at MAIL FROM of a reused connection) costs a new connection, not the account', async () => {
    // Exim's smtp_accept_max_per_connection: "421 too many messages in this connection".
    const sink = new SmtpSink();
    await sink.start({
      onMailFrom: (_address, session, cb) => {
        if (session.transaction > 2) {
          const err = new Error('too many messages in this connection') as Error & { responseCode: number };
          err.responseCode = 421;
          return cb(err);
        }
        cb();
      },
    });
    const messenger = new SmtpMessenger({ maxConnections: 1 });
    try {
      const outcomes: string[] = [];
      for (let n = 1; n <= 5; n++) outcomes.push((await messenger.send({ id: 'snd_limit', smtpUrl: sink.url() }, mail(n))).kind);
      assert.deepEqual(outcomes, ['accepted', 'accepted', 'accepted', 'accepted', 'accepted']);
      assert.equal(sink.received.length, 5, 'each message delivered once');
    } finally {
      await messenger.close();
      await sink.stop();
    }
  });

  it("a server that does not speak SMTP (the account's URL names a POP3 port) is the account's failure, not an attempt of the message", async () => {
    const server = net.createServer((socket) => {
      socket.write('+OK POP3 server ready <1896.697170952@pop.example>\r\n');
      socket.on('data', () => socket.write('-ERR unknown command\r\n'));
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const messenger = new SmtpMessenger({ maxConnections: 1 });
    try {
      const outcome = await messenger.send({ id: 'snd_pop', smtpUrl: `smtp://127.0.0.1:${(server.address() as net.AddressInfo).port}` }, mail(1));
      assert.equal(outcome.kind, 'unreachable', JSON.stringify(outcome));
      assert.match(outcome.response, /POP3/);
    } finally {
      await messenger.close();
      server.close();
    }
  });
});
