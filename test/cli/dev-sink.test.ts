import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { startDevSink } from '../../src/cli/dev-sink-server.ts';

// `mailgate dev-sink` on a taken SMTP port printed "smtp     connection error: listen
// EADDRINUSE ..." on stdout (its handler for dropped client connections saw the listen error)
// before its one-line error (found by a review, 2026-11-29).
describe('mailgate dev-sink: a taken port', function () {
  this.timeout(60_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-dev-sink-'));
  const taken = net.createServer();
  before(() => new Promise<void>((r) => taken.listen(0, '127.0.0.1', r)));
  after(async () => {
    await new Promise((r) => taken.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('is refused with the one error naming the option, and nothing on the output', async () => {
    const out = new PassThrough();
    let printed = '';
    out.on('data', (c) => (printed += c));
    const port = (taken.address() as net.AddressInfo).port;
    await assert.rejects(startDevSink({ dir, smtpPort: port, httpsPort: 0, out }), new RegExp(`^Error: SMTP port ${port} is taken: pick another with --smtp-port$`));
    await new Promise((r) => setImmediate(r));
    assert.equal(printed, '');
  });
});
