import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, startTestApp, seedWorkspace, type TestApp } from '../support/harness.ts';
import { HttpsReceiver, testCertificates } from '../support/https.ts';
import { verifySignature } from './helpers.ts';

interface Worker {
  proc: ChildProcess;
  output(): string;
  kill(signal: NodeJS.Signals): Promise<number | null>;
}

/** `mailgate serve --role worker` as a real process, once it is up. */
async function startWorker(env: NodeJS.ProcessEnv): Promise<Worker> {
  const proc = spawn('node', ['bin/mailgate.js', 'serve', '--role', 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (c) => (out += c));
  proc.stderr!.on('data', (c) => (out += c));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start:\n${out}`)), 60_000);
    proc.stdout!.on('data', () => {
      if (out.includes('"msg":"mailgate is up"')) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited with ${code}:\n${out}`));
    });
  });
  return {
    proc,
    output: () => out,
    kill: (signal) =>
      new Promise((resolve) => {
        proc.removeAllListeners('exit');
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve(proc.exitCode);
        proc.once('exit', (code) => resolve(code));
        proc.kill(signal);
      }),
  };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 45_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('webhooks from a real worker process (the production trust path)', function () {
  this.timeout(180_000);
  let app: TestApp;
  const receiver = new HttpsReceiver();
  const workers: Worker[] = [];

  before(async () => {
    await receiver.start();
  });
  after(async () => {
    for (const w of workers) await w.kill('SIGKILL');
    await app?.close();
    await receiver.stop();
  });

  it('trusts a private CA only through NODE_EXTRA_CA_CERTS; a worker killed mid-retry is replaced and the schedule goes on', async () => {
    const secretKey = randomBytes(32);
    const database = await createTestDatabase();
    app = await startTestApp({ database, secretKey, config: { webhookAllowPrivate: true } });
    const { adminKey: key } = await seedWorkspace(app);
    const hook = (await app.request('POST', '/v1/webhooks', { key, body: { url: receiver.url('/prod'), events: ['campaign.started'] } })).body;
    assert.ok(hook.id, JSON.stringify(hook));

    const { NODE_EXTRA_CA_CERTS: _inherited, ...parentEnv } = process.env;
    const env: NodeJS.ProcessEnv = {
      ...parentEnv,
      DATABASE_URL: app.databaseUrl,
      MAILGATE_SECRET_KEY: secretKey.toString('hex'),
      MAILGATE_WEBHOOK_ALLOW_PRIVATE: 'true',
      MAILGATE_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s,1s',
      MAILGATE_WEBHOOK_TIMEOUT: '2s',
      PORT: '0',
      LOG_LEVEL: 'info',
    };
    // A worker without the CA: its attempts fail certificate verification.
    const untrusting = await startWorker(env);
    workers.push(untrusting);

    // The event comes from a real flow: a campaign started through the API.
    const cmp = (await app.request('POST', '/v1/campaigns', { key, body: { name: 'Launch', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] } })).body;
    await app.request('POST', `/v1/campaigns/${cmp.id}/leads/bulk`, { key, body: { leads: [{ email: 'lead@example.com' }] } });
    assert.equal((await app.request('POST', `/v1/campaigns/${cmp.id}/start`, { key })).status, 200);

    const failed = await until('a failed attempt', async () => {
      const d = (await app.request('GET', `/v1/webhooks/${hook.id}/deliveries`, { key })).body.data[0];
      return d?.attempts.length ? d : undefined;
    });
    assert.equal(failed.state, 'pending');
    assert.equal(failed.attempts[0].statusCode, null);
    assert.match(failed.attempts[0].error, /certificate/i);
    assert.equal(receiver.received.length, 0);

    // Killed mid-retry (no clean shutdown), then a worker that trusts the CA the standard way.
    await untrusting.kill('SIGKILL');
    const trusting = await startWorker({ ...env, NODE_EXTRA_CA_CERTS: testCertificates().caPath });
    workers.push(trusting);
    await receiver.waitFor(1, 60_000);
    const [req] = receiver.received;
    assert.equal(req.json.event, 'campaign.started');
    assert.equal(req.json.data.campaignId, cmp.id);
    assert.equal(req.json.id, failed.eventId);
    assert.ok(verifySignature(req, hook.signingSecret));

    const done = await until('the delivery to be recorded', async () => {
      const d = (await app.request('GET', `/v1/webhooks/${hook.id}/deliveries`, { key })).body.data[0];
      return d.state === 'delivered' ? d : undefined;
    });
    const attempts = done.attempts as Array<{ statusCode: number | null; error: string | null }>;
    assert.ok(attempts.length >= 2 && attempts.length <= 6, JSON.stringify(attempts));
    assert.ok(attempts.slice(0, -1).every((a) => a.statusCode === null && /certificate/i.test(a.error ?? '')));
    assert.equal(attempts[attempts.length - 1].statusCode, 200);
    assert.equal(await trusting.kill('SIGTERM'), 0);
    assert.match(trusting.output(), /"msg":"stopped"/);
  });
});
