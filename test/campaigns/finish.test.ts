import assert from 'node:assert/strict';
import { startTestApp, seedWorkspace, ManualClock, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { recurringJobs } from '../../src/jobs/registry.ts';
import type { RecurringJob } from '../../src/jobs/agenda.ts';

// The campaign lifecycle's last log line (issue 16): `campaign finished`, once per finish, from
// the `campaigns.finish` job as the worker runs it.
describe('campaigns.finish: a running campaign whose every enrollment ended is logged finished once', function () {
  this.timeout(60_000);
  let app: TestApp;
  const clock = new ManualClock('2026-05-04T10:00:00.000Z');
  const sink = new SmtpSink();
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;
  let webhooks: WebhookDispatcher;
  let finishJob: RecurringJob;

  before(async () => {
    await sink.start();
    app = await startTestApp({ clock });
    messenger = new SmtpMessenger({ maxConnections: 2 });
    dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000], batchSize: 100 });
    webhooks = new WebhookDispatcher(app.deps);
    finishJob = recurringJobs({ dispatcher, webhooks, deps: app.deps }).find((j) => j.name === 'campaigns.finish')!;
  });
  after(async () => {
    await dispatcher.close();
    await webhooks.close();
    await messenger.close();
    await app.close();
    await sink.stop();
  });

  const finishedLines = (campaignId: string) =>
    app.logs.lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes(campaignId))
      .map((l) => JSON.parse(l) as { level: number; msg: string; enrolled?: number })
      .filter((l) => l.msg === 'campaign finished');
  const runFinish = () => finishJob.run({ touch: async () => {} } as never);

  it('logs at info when the last enrollment ends, not before, not twice; enrolling again reopens it', async () => {
    const { adminKey: key, workspace } = await seedWorkspace(app);
    sink.users.set('alice@acme.example', 'pw');
    const s = app.services();
    const account = await s.senders.add({ workspaceId: workspace.id, email: 'alice@acme.example', name: 'Alice', smtpUrl: sink.url('alice@acme.example', 'pw') });
    const pool = await s.senders.createPool(workspace.id, 'pool', 1000, [account.id]);
    const created = await app.request('POST', '/v1/campaigns', {
      key,
      body: { name: 'Two steps', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }, { subject: '', bodyHtml: '<p>Again</p>', delayHours: 1 }] },
    });
    const id: string = created.body.id;
    await app.request('POST', `/v1/campaigns/${id}/leads/bulk`, { key, body: { leads: [{ email: 'ann@example.com' }] } });

    // A draft campaign is not finished, however empty its work.
    await runFinish();
    assert.equal((await app.request('POST', `/v1/campaigns/${id}/start`, { key })).status, 200);
    await dispatcher.runRound();
    await runFinish();
    assert.deepEqual(finishedLines(id), [], 'step 1 is still to come');

    clock.advance(61 * 60_000);
    await dispatcher.runRound();
    assert.equal(sink.received.filter((r) => r.to.includes('ann@example.com')).length, 2);
    assert.equal(await runFinish(), 1);
    assert.equal(await runFinish(), 0, 'a finish is reported once');
    assert.deepEqual(
      finishedLines(id).map((l) => [l.level, l.enrolled]),
      [[30, 1]],
    );

    // New leads in the running campaign reopen it; their end finishes it again.
    await app.request('POST', `/v1/campaigns/${id}/leads/bulk`, { key, body: { leads: [{ email: 'bob@example.com' }] } });
    await runFinish();
    await dispatcher.runRound();
    clock.advance(61 * 60_000);
    await dispatcher.runRound();
    assert.equal(sink.received.filter((r) => r.to.includes('bob@example.com')).length, 2);
    await runFinish();
    assert.deepEqual(
      finishedLines(id).map((l) => l.enrolled),
      [1, 2],
    );
  });
});
