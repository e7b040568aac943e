// The sending engine's test world, shared by the files of test/sending/ and test/tracking/:
// the app on a fresh database with a manual clock (a Monday), a counting SMTP sink, a pooled
// messenger and a dispatcher, and a factory for a started campaign. Call it inside a describe:
// it registers its own hooks.
import assert from 'node:assert/strict';
import pg from 'pg';
import type { ParsedMail } from 'mailparser';
import { startTestApp, seedWorkspace, subscribeEvents, ManualClock, type TestApp } from '../support/harness.ts';
import type { EventType } from '../../src/modules/events/catalogue.ts';
import { SmtpSink } from '../support/smtp.ts';
import { SmtpMessenger, type Messenger, type MailAccount, type OutgoingMail } from '../../src/adapters/smtp.ts';
import { SendDispatcher } from '../../src/modules/sending/dispatcher.ts';

export const HOUR = 3_600_000;

/** A header as it was sent (mailparser turns List-* headers into objects). */
export function rawHeader(parsed: ParsedMail, name: string): string {
  const line = parsed.headerLines.find((h) => h.key === name)?.line ?? '';
  return line.slice(line.indexOf(':') + 1).replace(/\r?\n\s+/g, ' ').trim();
}

/**
 * The real messenger, running `act` once: after the first message's guard passed, before the
 * end of its data (a pause, a removal committed while that message is in flight).
 */
export function afterFirstGuard(messenger: Messenger, act: () => Promise<void>): Messenger {
  let done = false;
  return {
    send: (account: MailAccount, mail: OutgoingMail, beforeEnd?: () => Promise<void>) =>
      messenger.send(account, mail, async () => {
        await beforeEnd!();
        if (!done) {
          done = true;
          await act();
        }
      }),
    close: async () => {},
  };
}

export interface Setup {
  key: string;
  workspaceId: string;
  poolId: string;
  senders: string[];
  campaignId: string;
}

export interface SetupOptions {
  leads: unknown[];
  steps?: Array<{ subject: string; bodyHtml: string; delayHours?: number }>;
  capacity?: number;
  senders?: Array<{ email: string; dailyLimit?: number; minIntervalMs?: number; password?: string }>;
  campaign?: Record<string, unknown>;
  start?: boolean;
  /** The event types a webhook of the workspace subscribes to (default all four): only those reach the outbox (events/outbox.ts). */
  subscribe?: EventType[];
}

export interface SendingWorld {
  app: TestApp;
  db: pg.Client;
  clock: ManualClock;
  sink: SmtpSink;
  messenger: SmtpMessenger;
  dispatcher: SendDispatcher;
  setup(opts: SetupOptions): Promise<Setup>;
  stats(t: Setup): Promise<any>;
  to(addr: string): SmtpSink['received'];
}

export function sendingWorld(): SendingWorld {
  const clock = new ManualClock('2026-05-04T10:00:00.000Z'); // a Monday
  const sink = new SmtpSink();
  const w = { clock, sink } as SendingWorld;

  before(async () => {
    await sink.start();
    w.app = await startTestApp({ clock, config: { publicUrl: 'https://mg.example.com' } });
    w.db = new pg.Client({ connectionString: w.app.databaseUrl });
    await w.db.connect();
    w.messenger = new SmtpMessenger({ maxConnections: 2 });
    w.dispatcher = new SendDispatcher(w.app.deps, w.messenger, { maxConnections: 2, retryDelaysMs: [5 * 60_000, 30 * 60_000] });
  });
  after(async () => {
    await w.messenger.close();
    await w.db.end();
    await w.app.close();
    await sink.stop();
  });
  beforeEach(() => {
    sink.received.length = 0;
    sink.rcptAnswers.clear();
  });

  w.setup = async (opts) => {
    const app = w.app;
    const { adminKey: key, workspace } = await seedWorkspace(app);
    const s = app.services();
    if (opts.subscribe?.length !== 0) await subscribeEvents(app, workspace.id, opts.subscribe);
    const senders: string[] = [];
    for (const spec of opts.senders ?? [{ email: `sender.${Math.random().toString(36).slice(2, 8)}@acme.example` }]) {
      sink.users.set(spec.email, 'pw');
      const a = await s.senders.add({
        workspaceId: workspace.id,
        email: spec.email,
        name: 'Alice Sender',
        smtpUrl: sink.url(spec.email, spec.password ?? 'pw'),
        dailyLimit: spec.dailyLimit,
        minIntervalMs: spec.minIntervalMs,
      });
      senders.push(a.id);
    }
    const pool = await s.senders.createPool(workspace.id, 'pool', opts.capacity ?? 1000, senders);
    const res = await app.request('POST', '/v1/campaigns', {
      key,
      body: {
        name: 'Seq',
        senderPoolId: pool.id,
        sequenceSteps: opts.steps ?? [{ subject: 'Hello {{firstName|there}}', bodyHtml: '<p>Hi {{firstName|there}} at {{company}}</p>' }],
        ...opts.campaign,
      },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const campaignId = res.body.id;
    const enrolled = await app.request('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { key, body: { leads: opts.leads } });
    assert.equal(enrolled.status, 200, JSON.stringify(enrolled.body));
    if (opts.start !== false) assert.equal((await app.request('POST', `/v1/campaigns/${campaignId}/start`, { key })).status, 200);
    return { key, workspaceId: workspace.id, poolId: pool.id, senders, campaignId };
  };
  w.stats = async (t) => (await w.app.request('GET', `/v1/campaigns/${t.campaignId}/stats`, { key: t.key })).body;
  w.to = (addr) => sink.received.filter((r) => r.to.includes(addr));
  return w;
}
