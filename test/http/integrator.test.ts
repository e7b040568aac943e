import assert from 'node:assert/strict';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, ManualClock, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';
import { openApiDocument } from '../../src/app.ts';

// A CRM integration's client, written from the docs: it syncs replies with the filters the API
// documents (a time with its zone offset, repeated classifications), pages with the documented
// ranges, and generates its types from the OpenAPI document. Mail goes out through smtp-server
// and answers come in through the inbound service, as the watcher hands them over.
describe('HTTP: what an integrator reads from the docs works as written', function () {
  this.timeout(60_000);
  const clock = new ManualClock('2026-05-04T10:00:00.000Z');
  const sink = new SmtpSink();
  let app: TestApp;
  let db: pg.Client;
  let messenger: SmtpMessenger;
  let dispatcher: SendDispatcher;
  let key: string;
  let sdrKey: string;
  let campaignId: string;

  before(async () => {
    await sink.start();
    app = await startTestApp({ clock });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    messenger = new SmtpMessenger({ maxConnections: 2 });
    dispatcher = new SendDispatcher(app.deps, messenger, { maxConnections: 2, retryDelaysMs: [60_000] });
    const { adminKey, workspace } = await seedWorkspace(app);
    key = adminKey;
    sdrKey = (await seedSdr(app, workspace.id)).sdrKey;
    const email = 'alice@acme.example';
    sink.users.set(email, 'pw');
    const s = app.services();
    const account = await s.senders.add({ workspaceId: workspace.id, email, name: 'Alice', smtpUrl: sink.url(email, 'pw'), imapUrl: 'imap://alice:pw@127.0.0.1:1' });
    await s.senders.createPool(workspace.id, 'p', 100, [account.id]);
    const created = await app.request('POST', '/v1/campaigns', { key, body: { name: 'Sync', sequenceSteps: [{ subject: 'Quick question', bodyHtml: '<p>Hi</p>' }] } });
    campaignId = created.body.id;
    const leads = ['ann', 'bob', 'cat'].map((n) => ({ email: `${n}@lead.example` }));
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads } })).status, 200);
    assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/start`, { key })).status, 200);
    await dispatcher.runRound();
    const sent = new Map(sink.received.map((r) => [r.to[0], r.parsed.messageId!]));
    assert.equal(sent.size, 3);
    const { rows } = await db.query(`update mailbox_watches set lease_owner = 'test', uid_validity = 1 where sender_account_id = $1 returning id`, [account.id]);
    // Answers at 10:01, 10:02 and 10:03 UTC.
    let uid = 0;
    for (const [lead, body] of [['ann', 'Yes, interested: send me the pricing.'], ['bob', 'Please remove me from your list.'], ['cat', 'Not interested, thanks.']]) {
      clock.advance(60_000);
      const to = `${lead}@lead.example`;
      const raw = [`From: ${to}`, `To: ${email}`, 'Subject: Re: Quick question', `Date: ${clock.now().toUTCString()}`, `Message-ID: <a${++uid}@lead.example>`,
        `In-Reply-To: ${sent.get(to)}`, 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', '', body, ''].join('\r\n');
      const result = await app.services().inbound.ingest({ watchId: rows[0].id, workspaceId: workspace.id, senderAccountId: account.id, owner: 'test', uidValidity: 1n, uid, raw: Buffer.from(raw), receivedAt: clock.now() });
      assert.equal(result, 'reply');
    }
  });
  after(async () => {
    await messenger.close();
    await dispatcher.close();
    await db.end();
    await app.close();
    await sink.stop();
  });

  const replies = (query: string) => app.request('GET', `/v1/replies?${query}`, { key });

  it('since with a zone offset: encoded, it filters as its UTC instant; sent with a bare + (a space in a query), the 400 says so', async () => {
    const utc = await replies('since=2026-05-04T10:02:00Z');
    assert.equal(utc.status, 200, utc.text);
    assert.deepEqual(utc.body.map((r: { email: string }) => r.email), ['cat@lead.example', 'bob@lead.example']);
    assert.equal(utc.headers.get('x-total-count'), '2');
    const offset = await replies(`since=${encodeURIComponent('2026-05-04T12:02:00+02:00')}`);
    assert.equal(offset.status, 200, offset.text);
    assert.deepEqual(offset.body, utc.body);

    // What a client gets when it pastes the time into the URL as is: the + is decoded as a
    // space, so the value has no zone. The answer names the cause instead of asking for a zone
    // the client wrote.
    for (const path of ['/v1/replies?since=2026-05-04T12:02:00+02:00', `/v1/campaigns/${campaignId}/timeline?from=2026-05-04T00:00:00.000+02:00`]) {
      const bare = await app.request('GET', path, { key });
      assert.equal(bare.status, 400, path);
      assert.equal(bare.body.error.code, 'invalid_request');
      assert.match(bare.body.error.message, /the \+ of its offset arrived as a space .*%2B/, bare.text);
      assert.equal(bare.body.errors.length, 1);
    }
    // Other malformed values keep the general answer.
    const noZone = await replies('since=2026-05-04T10:02:00');
    assert.equal(noZone.body.error.message, 'query since: must be an ISO 8601 date-time with a time zone, e.g. 2025-01-31T09:00:00Z');
  });

  it('a repeated filter with one value it does not know names that value (the parameter takes a list)', async () => {
    const both = await replies('classification=interested&classification=unsubscribe');
    assert.equal(both.status, 200, both.text);
    assert.deepEqual(both.body.map((r: { email: string }) => r.email), ['bob@lead.example', 'ann@lead.example']);

    const bad = await replies('classification=interested&classification=meeting_booked');
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.error.code, 'invalid_request');
    assert.equal(bad.body.error.message, 'query classification: must be one of: interested, not_interested, out_of_office, bounce, unsubscribe (got "meeting_booked")');
    assert.deepEqual(bad.body.errors, [{ field: 'classification', message: 'must be one of: interested, not_interested, out_of_office, bounce, unsubscribe (got "meeting_booked")' }]);

    const inbox = await app.request('GET', '/v1/sdr/inbox?status=new&status=closed', { key: sdrKey });
    assert.equal(inbox.status, 400, inbox.text);
    assert.match(inbox.body.error.message, /^query status: must be one of: new, .* \(got "closed"\)$/);
    // A single unknown value reads as before.
    const one = await replies('classification=happy');
    assert.match(one.body.error.message, /\(got "happy"\)$/);
  });

  it('paging numbers: every value the OpenAPI document allows is taken; past it, the 400 gives the range', async () => {
    const doc = openApiDocument() as any;
    const params = doc.paths['/v1/replies'].get.parameters as Array<{ name: string; schema: { maximum: number } }>;
    const max = params.find((p) => p.name === 'page')!.schema.maximum;
    const last = await replies(`page=${max}`);
    assert.equal(last.status, 200, last.text);
    assert.deepEqual(last.body, []);
    assert.equal(last.headers.get('x-total-count'), '3');
    const past = await replies(`page=${BigInt(max) + 1n}`);
    assert.equal(past.status, 400, past.text);
    assert.equal(past.body.error.message, `query page: must be at most ${max}`);
    const offset = await app.request('GET', `/v1/campaigns/${campaignId}/leads?offset=${max}`, { key });
    assert.equal(offset.status, 200, offset.text);
    assert.deepEqual([offset.body.data, offset.body.total, offset.body.hasMore], [[], 3, false]);
    const huge = await app.request('GET', `/v1/campaigns/${campaignId}/leads?limit=123456789012345678901234567890`, { key });
    assert.equal(huge.body.error.message, 'query limit: must be at most 200');
    // Leading zeros do not count as digits.
    const padded = await app.request('GET', `/v1/campaigns/${campaignId}/leads?limit=0000000000000000002`, { key });
    assert.equal(padded.status, 200, padded.text);
    assert.equal(padded.body.data.length, 2);
  });

  it('every timestamp of a sender account is documented as a date-time, healthRetryAt included', async () => {
    // A generated client types a field by its schema: a date-time format becomes a date.
    const account = (openApiDocument() as any).components.schemas.SenderAccount.properties;
    const dateTime = (s: any) => s.format === 'date-time' || (s.anyOf ?? []).some((x: any) => x.format === 'date-time');
    assert.ok(dateTime(account.healthRetryAt), JSON.stringify(account.healthRetryAt));
    // And the server writes one.
    await db.query(`update sender_accounts set health = 'rate_limited', health_error = '421 try later', health_retry_at = $1`, [new Date('2026-05-04T11:00:00.000Z')]);
    const listed = await app.request('GET', '/v1/sender-accounts', { key });
    assert.equal(listed.body[0].healthRetryAt, '2026-05-04T11:00:00.000Z');
  });
});
