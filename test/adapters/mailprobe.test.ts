import assert from 'node:assert/strict';
import net from 'node:net';
import { classifyMailError, realMailProbe } from '../../src/adapters/mailprobe.ts';

// The mail probe connects where its caller says, an SDR's dashboard session included: what it
// reports of the server is an SMTP reply or the IMAP client's own words, never the first line
// of whatever listens there (found by a review, 2026-11-29: an internal service's banner came
// back verbatim in the 422).
describe('mail probe: what it says of the server', function () {
  this.timeout(60_000);
  let banner: net.Server;
  let port: number;
  before(async () => {
    banner = net.createServer((s) => {
      s.write('+OK internal-cache secret-banner v7\r\n');
      s.on('data', () => s.write('-ERR secret-banner again\r\n'));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => banner.listen(0, '127.0.0.1', r));
    port = (banner.address() as net.AddressInfo).port;
  });
  after(() => new Promise((r) => banner.close(r)));

  it('a service that is no SMTP server: unreachable, its banner not repeated', async () => {
    const out = await realMailProbe.smtp(`smtp://a:b@127.0.0.1:${port}`);
    assert.equal(out.ok, false);
    assert.ok(!out.ok && out.kind === 'unreachable');
    assert.ok(!out.ok && !out.error.includes('secret-banner'), !out.ok ? out.error : '');
    assert.match(!out.ok ? out.error : '', /did not answer as an SMTP server/);
  });

  it('an SMTP reply is kept; an IMAP answer parsed as an object is no crash', () => {
    assert.deepEqual(classifyMailError({ responseCode: 535, response: '535 5.7.8 Authentication credentials invalid' }), {
      ok: false,
      kind: 'auth_failed',
      error: '535 5.7.8 Authentication credentials invalid',
    });
    assert.deepEqual(classifyMailError({ responseCode: 421, response: '421 4.7.0 Try again later' }).kind, 'rate_limited');
    assert.deepEqual(classifyMailError({ message: 'Command failed', response: { tag: 'A2', command: 'BYE' } }, 'imap'), { ok: false, kind: 'unreachable', error: 'Command failed' });
    assert.equal(classifyMailError({ authenticationFailed: true, response: 'A1 NO [AUTHENTICATIONFAILED] Invalid credentials' }, 'imap').error, 'A1 NO [AUTHENTICATIONFAILED] Invalid credentials');
  });
});
