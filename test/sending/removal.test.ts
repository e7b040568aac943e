// Removing a lead from a campaign (DELETE /v1/campaigns/:campaignId/leads/:leadId): the lead
// gets nothing more from that campaign, through the real dispatcher and an smtp-server sink,
// while the other leads and the lead's other campaigns go on.
import assert from 'node:assert/strict';
import pg from 'pg';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { afterFirstGuard, rawHeader, sendingWorld, HOUR, type Setup } from './world.ts';
import type { TestApp } from '../support/harness.ts';
import type { SmtpMessenger } from '../../src/adapters/smtp.ts';

describe('sending engine: a lead removed from a campaign', function () {
  this.timeout(60_000);
  const w = sendingWorld();
  const { clock, setup, stats, to } = w;
  let app: TestApp, db: pg.Client, messenger: SmtpMessenger, dispatcher: SendDispatcher;
  before(() => ({ app, db, messenger, dispatcher } = w));

  const TWO_STEPS = [{ subject: 'one', bodyHtml: 'one' }, { subject: '', bodyHtml: 'two', delayHours: 1 }];

  const leads = async (t: Setup, campaignId = t.campaignId) => (await app.request('GET', `/v1/campaigns/${campaignId}/leads`, { key: t.key })).body.data;
  const leadOf = async (t: Setup, email: string, campaignId = t.campaignId) => (await leads(t, campaignId)).find((l: { email: string }) => l.email === email);
  const remove = (t: Setup, leadId: string, campaignId = t.campaignId) => app.request('DELETE', `/v1/campaigns/${campaignId}/leads/${leadId}`, { key: t.key });
  const messagesOf = async (leadId: string, campaignId: string) =>
    (await db.query(`select step_index, state, cancel_reason from outbound_messages where lead_id = $1 and campaign_id = $2 order by step_index`, [leadId, campaignId])).rows;

  it('the removed lead gets nothing more while the others go on; its waiting step is cancelled and the stats stay true; her other campaign goes on', async () => {
    const t = await setup({ leads: [{ email: 'jane@lead.example' }, { email: 'ann@lead.example' }, { email: 'bob@lead.example' }], steps: TWO_STEPS });
    // Jane is also in a second campaign of the workspace: the removal is not an unsubscribe.
    const other = await app.request('POST', '/v1/campaigns', { key: t.key, body: { name: 'Other', senderPoolId: t.poolId, sequenceSteps: [{ subject: 'other', bodyHtml: 'other' }] } });
    await app.request('POST', `/v1/campaigns/${other.body.id}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'jane@lead.example' }] } });
    await dispatcher.runRound();
    assert.equal(to('jane@lead.example').length, 1, 'step 0 went out before the removal');
    let s = await stats(t);
    assert.deepEqual([s.sent, s.queued, s.scheduled], [3, 0, 3]);
    const jane = await leadOf(t, 'jane@lead.example');
    assert.equal(jane.status, 'active');

    const res = await remove(t, jane.id);
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    s = await stats(t);
    assert.deepEqual([s.totalEnrolled, s.sent, s.queued, s.scheduled], [3, 3, 0, 2], 'her waiting step left scheduled; she stays counted as enrolled');
    const after = await leadOf(t, 'jane@lead.example');
    assert.deepEqual([after.status, after.lastEvent, after.lastEventAt, after.nextSendAt, after.currentStep], ['removed', 'removed', clock.now().toISOString(), null, 0]);
    assert.deepEqual(await messagesOf(jane.id, t.campaignId), [
      { step_index: 0, state: 'sent', cancel_reason: null },
      { step_index: 1, state: 'cancelled', cancel_reason: 'removed' },
    ]);
    // Listed under its own state.
    const removed = await app.request('GET', `/v1/campaigns/${t.campaignId}/leads?status=removed`, { key: t.key });
    assert.deepEqual(removed.body.data.map((l: { email: string }) => l.email), ['jane@lead.example']);
    // A second removal changes nothing and answers the same.
    assert.equal((await remove(t, jane.id)).status, 204);
    assert.equal((await stats(t)).scheduled, 2);

    // Not suppressed: her other campaign sends to her when it starts.
    assert.deepEqual((await app.request('GET', '/v1/suppression-list', { key: t.key })).body.data, []);
    assert.equal((await app.request('POST', `/v1/campaigns/${other.body.id}/start`, { key: t.key })).status, 200);
    clock.advance(2 * HOUR);
    await dispatcher.runRound();
    assert.deepEqual(to('ann@lead.example').map((r) => r.parsed.text?.trim()), ['one', 'two']);
    assert.deepEqual(to('bob@lead.example').map((r) => r.parsed.text?.trim()), ['one', 'two']);
    assert.deepEqual(to('jane@lead.example').map((r) => r.parsed.subject), ['one', 'other'], "this campaign's step 1 never goes; the other campaign's step 0 does");
    s = await stats(t);
    assert.deepEqual([s.sent, s.queued, s.scheduled], [5, 0, 0]);
  });

  it('404: campaign_not_found for another workspace\'s campaign, lead_not_found for a lead not enrolled in it or unknown; nothing changes', async () => {
    const t = await setup({ leads: [{ email: 'nf1@lead.example' }], steps: TWO_STEPS, start: false });
    const elsewhere = await setup({ leads: [{ email: 'nf2@lead.example' }], steps: TWO_STEPS, start: false });
    const [mine] = await leads(t);
    const [theirs] = await leads(elsewhere);
    const noCampaign = await remove(t, mine.id, elsewhere.campaignId);
    assert.deepEqual([noCampaign.status, noCampaign.body.error.code], [404, 'campaign_not_found']);
    const notHere = await remove(t, theirs.id);
    assert.deepEqual([notHere.status, notHere.body.error.code], [404, 'lead_not_found']);
    const unknown = await remove(t, 'lead_nope');
    assert.deepEqual([unknown.status, unknown.body.error.code], [404, 'lead_not_found']);
    assert.equal((await leadOf(elsewhere, 'nf2@lead.example')).status, 'active');
    assert.equal((await leadOf(t, 'nf1@lead.example')).status, 'active');
  });

  it('a message already being sent when she is removed finishes, and schedules nothing further', async () => {
    const t = await setup({ leads: [{ email: 'inflight@lead.example' }], steps: TWO_STEPS });
    const [lead] = await leads(t);
    // The removal commits after the message's guard passed, before the end of its data.
    const removing = afterFirstGuard(messenger, async () => {
      assert.equal((await remove(t, lead.id)).status, 204);
    });
    const d = new SendDispatcher(app.deps, removing, { maxConnections: 1, retryDelaysMs: [60_000] });
    await d.runRound();
    await d.close();
    assert.equal(to('inflight@lead.example').length, 1, 'the message in flight went out');
    const s = await stats(t);
    assert.deepEqual([s.sent, s.delivered, s.queued, s.scheduled], [1, 1, 0, 0]);
    assert.deepEqual(await messagesOf(lead.id, t.campaignId), [{ step_index: 0, state: 'sent', cancel_reason: null }], 'no step 1 was scheduled');
    const after = await leadOf(t, 'inflight@lead.example');
    assert.deepEqual([after.status, after.nextSendAt], ['removed', null]);
    clock.advance(2 * HOUR);
    await dispatcher.runRound();
    assert.equal(to('inflight@lead.example').length, 1, 'nothing more');
  });

  it('the same lead in a later bulk upload is updated but stays off the campaign: nothing queued, nothing sent', async () => {
    const t = await setup({ leads: [{ email: 'again@lead.example', firstName: 'Jane' }, { email: 'stay@lead.example' }], steps: TWO_STEPS, start: false });
    const jane = await leadOf(t, 'again@lead.example');
    assert.equal((await remove(t, jane.id)).status, 204);
    assert.equal((await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key })).status, 200);
    let s = await stats(t);
    assert.deepEqual([s.totalEnrolled, s.queued], [2, 1], 'the start queued step 0 for the other lead only');
    // The same list uploaded again into the running campaign, with a changed name.
    const again = await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: ' again@lead.example ', firstName: 'Janet' }, { email: 'new@lead.example' }] } });
    assert.deepEqual(again.body, { enrolled: 1, updated: 1, total: 2 });
    const after = await leadOf(t, 'again@lead.example');
    assert.deepEqual([after.status, after.firstName, after.nextSendAt], ['removed', 'Janet', null]);
    s = await stats(t);
    assert.deepEqual([s.totalEnrolled, s.queued], [3, 2]);
    await dispatcher.runRound();
    assert.equal(to('again@lead.example').length, 0);
    assert.equal(to('stay@lead.example').length, 1);
    assert.equal(to('new@lead.example').length, 1);
  });

  it('a lead enrolled while suppressed and removed stays off when the address leaves the suppression list', async () => {
    const t = await setup({ leads: [{ email: 'sup-first@lead.example' }], steps: TWO_STEPS });
    await app.request('POST', '/v1/suppression-list', { key: t.key, body: { emails: ['held@lead.example'] } });
    await app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'held@lead.example' }] } });
    const held = await leadOf(t, 'held@lead.example');
    assert.equal(held.status, 'suppressed');
    assert.equal((await remove(t, held.id)).status, 204);
    assert.equal((await leadOf(t, 'held@lead.example')).status, 'removed');
    // Taken off the list: a suppressed enrollment would be enrolled again now (and get step 0).
    assert.equal(await app.services().suppression.remove(t.workspaceId, ['held@lead.example']), 1);
    assert.equal((await leadOf(t, 'held@lead.example')).status, 'removed');
    await dispatcher.runRound();
    assert.equal(to('held@lead.example').length, 0);
  });

  it('removed is an end like completed: her unsubscribe from an earlier message still counts (unsubscribed)', async () => {
    const t = await setup({ leads: [{ email: 'later@lead.example' }], steps: TWO_STEPS });
    await dispatcher.runRound();
    const [lead] = await leads(t);
    assert.equal((await remove(t, lead.id)).status, 204);
    const header = rawHeader(to('later@lead.example')[0].parsed, 'list-unsubscribe');
    const path = /https:\/\/mg\.example\.com(\/u\/[^>]+)>/.exec(header)![1];
    assert.equal((await app.request('POST', path, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, raw: 'List-Unsubscribe=One-Click' })).status, 200);
    assert.equal((await leadOf(t, 'later@lead.example')).status, 'unsubscribed');
    assert.equal((await stats(t)).unsubscribed, 1);
  });

  it('a draft whose every lead was removed has no lead to start with (400 no_leads_enrolled)', async () => {
    const t = await setup({ leads: [{ email: 'only@lead.example' }], steps: TWO_STEPS, start: false });
    const [lead] = await leads(t);
    assert.equal((await remove(t, lead.id)).status, 204);
    const start = await app.request('POST', `/v1/campaigns/${t.campaignId}/start`, { key: t.key });
    assert.deepEqual([start.status, start.body.error.code], [400, 'no_leads_enrolled']);
  });
});
