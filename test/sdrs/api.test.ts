import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startTestApp, seedWorkspace, seedSdr, ManualClock, type TestApp } from '../support/harness.ts';
import { THREAD_STATUSES, allowedTransitions, type ThreadStatus } from '../../src/modules/sdrs/threads-state.ts';
import { SdrMailboxSchema } from '../../src/modules/sdrs/entities.ts';
import { assertThreadCountsExact } from '../support/thread-counts.ts';

const T0 = '2026-04-01T12:00:00.000Z';

describe('SDR desk API: mail status, inbox, threads', () => {
  let app: TestApp;
  let db: pg.Client;
  const clock = new ManualClock(T0);
  let wsId: string;
  let adminKey: string;
  let sdrA: { id: string };
  let keyA: string;
  let sdrB: { id: string };
  let keyB: string;
  let otherWsSdr: { id: string };
  let otherWsId: string;
  let otherKey: string;

  before(async () => {
    app = await startTestApp({ clock });
    db = new pg.Client({ connectionString: app.databaseUrl });
    await db.connect();
    const ws = await seedWorkspace(app);
    wsId = ws.workspace.id;
    adminKey = ws.adminKey;
    ({ sdr: sdrA, sdrKey: keyA } = await seedSdr(app, wsId, 'Ann'));
    ({ sdr: sdrB, sdrKey: keyB } = await seedSdr(app, wsId, 'Bob'));
    const ws2 = await seedWorkspace(app);
    otherWsId = ws2.workspace.id;
    ({ sdr: otherWsSdr, sdrKey: otherKey } = await seedSdr(app, otherWsId, 'Olga'));
  });
  after(async () => {
    await db.end();
    await app.close();
  });

  let n = 0;
  async function thread(o: {
    sdrId?: string;
    workspaceId?: string;
    email?: string;
    name?: string;
    subject?: string;
    status?: ThreadStatus;
    category?: 'A' | 'B' | 'C';
    priority?: number;
    lastMessageAt?: string;
    createdAt?: string;
    snoozedUntil?: string | null;
    replyId?: string | null;
  } = {}): Promise<string> {
    const id = `thr_test${++n}${randomBytes(3).toString('hex')}`;
    await db.query(
      `insert into prospect_threads (id, workspace_id, sdr_id, reply_id, contact_email, contact_name, subject, status, category, priority_score, snoozed_until, last_message_at, created_at, updated_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)`,
      [
        id,
        o.workspaceId ?? wsId,
        o.sdrId ?? sdrA.id,
        o.replyId ?? null,
        o.email ?? `p${n}@prospect.example`,
        o.name ?? `Prospect ${n}`,
        o.subject ?? `Re: hello ${n}`,
        o.status ?? 'new',
        o.category ?? 'B',
        o.priority ?? 0,
        o.snoozedUntil ?? null,
        o.lastMessageAt ?? T0,
        o.createdAt ?? T0,
      ],
    );
    return id;
  }

  describe('roles', () => {
    it('an admin key gets 403 forbidden on every /v1/sdr endpoint; no key 401', async () => {
      const id = await thread();
      const calls: [string, string, unknown?][] = [
        ['GET', '/v1/sdr/mail/status'],
        ['GET', '/v1/sdr/inbox'],
        ['GET', `/v1/sdr/threads/${id}`],
        ['PATCH', `/v1/sdr/threads/${id}`, { status: 'archived' }],
        ['POST', `/v1/sdr/threads/${id}/snooze`, { until: '2026-05-01T00:00:00.000Z' }],
        ['POST', `/v1/sdr/threads/${id}/unsnooze`],
      ];
      for (const [method, path, body] of calls) {
        const res = await app.request(method, path, { key: adminKey, body });
        assert.equal(res.status, 403, `${method} ${path}`);
        assert.equal(res.body.error.code, 'forbidden');
        const anon = await app.request(method, path, { body });
        assert.equal(anon.status, 401, `${method} ${path}`);
      }
      const { rows } = await db.query('select status, snoozed_until from prospect_threads where id = $1', [id]);
      assert.deepEqual(rows[0], { status: 'new', snoozed_until: null });
    });

    it('a deactivated SDR’s key gets 403', async () => {
      const { sdr, sdrKey } = await seedSdr(app, wsId, 'Gone');
      await app.services().sdrs.setActive(sdr.id, false);
      const res = await app.request('GET', '/v1/sdr/inbox', { key: sdrKey });
      assert.equal(res.status, 403);
    });
  });

  describe('GET /v1/sdr/mail/status', () => {
    it('not connected: connected false, disconnected, nulls', async () => {
      const res = await app.request('GET', '/v1/sdr/mail/status', { key: keyB });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { data: { connected: false, email: null, healthState: 'disconnected', lastSyncedAt: null, lastSyncError: null } });
    });

    it('reports the stored mailbox of the key’s SDR, healthy or not', async () => {
      const em = app.deps.orm.em.fork();
      await em.insert(SdrMailboxSchema, {
        sdrId: sdrA.id,
        workspaceId: wsId,
        email: 'ann.box@example.com',
        smtpUrlEnc: 'x',
        imapUrlEnc: 'x',
        healthState: 'active',
        lastSyncedAt: new Date('2026-04-01T11:59:00.000Z'),
        lastSyncError: null,
        connectedAt: new Date(T0),
        updatedAt: new Date(T0),
      });
      const res = await app.request('GET', '/v1/sdr/mail/status', { key: keyA });
      assert.deepEqual(res.body, { data: { connected: true, email: 'ann.box@example.com', healthState: 'active', lastSyncedAt: '2026-04-01T11:59:00.000Z', lastSyncError: null } });
      await db.query(`update sdr_mailboxes set health_state = 'needs_reauth', last_sync_error = 'IMAP: authentication failed' where sdr_id = $1`, [sdrA.id]);
      const bad = await app.request('GET', '/v1/sdr/mail/status', { key: keyA });
      assert.deepEqual(bad.body.data, {
        connected: false,
        email: 'ann.box@example.com',
        healthState: 'needs_reauth',
        lastSyncedAt: '2026-04-01T11:59:00.000Z',
        lastSyncError: 'IMAP: authentication failed',
      });
      // Bob still has none.
      assert.equal((await app.request('GET', '/v1/sdr/mail/status', { key: keyB })).body.data.connected, false);
      const extra = await app.request('GET', '/v1/sdr/mail/status?verbose=1', { key: keyA });
      assert.equal(extra.status, 400);
      assert.equal(extra.body.error.code, 'invalid_request');
    });
  });

  describe('GET /v1/sdr/inbox', () => {
    // A dedicated SDR so earlier tests' threads do not interfere.
    let key: string;
    let sdrId: string;
    const ids: Record<string, string> = {};
    before(async () => {
      const s = await seedSdr(app, wsId, 'Ines');
      key = s.sdrKey;
      sdrId = s.sdr.id;
      ids.a = await thread({ sdrId, email: 'alice@acme.io', name: 'Alice Smith', subject: 'Pricing question', category: 'A', priority: 90, status: 'replied', lastMessageAt: '2026-03-30T10:00:00.000Z', createdAt: '2026-03-01T00:00:00.000Z' });
      ids.b = await thread({ sdrId, email: 'bob@globex.com', name: 'Bob Jones', subject: 'Re: 100% off_deal', category: 'B', priority: 50, status: 'new', lastMessageAt: '2026-04-01T09:00:00.000Z', createdAt: '2026-03-02T00:00:00.000Z' });
      ids.c = await thread({ sdrId, email: 'carol@initech.com', name: 'Carol ACME-fan', subject: 'Demo', category: 'C', priority: 10, status: 'awaiting_reply', lastMessageAt: '2026-03-31T00:00:00.000Z', createdAt: '2026-03-03T00:00:00.000Z', snoozedUntil: '2026-04-05T00:00:00.000Z' });
      ids.d = await thread({ sdrId, email: 'dan@hooli.com', name: 'Dan', subject: 'Later', category: 'B', priority: 70, status: 'lost_timing', lastMessageAt: '2026-03-29T00:00:00.000Z', createdAt: '2026-03-04T00:00:00.000Z', snoozedUntil: '2026-03-31T00:00:00.000Z' });
      // Other SDR in the same workspace and an SDR of another workspace: never visible.
      await thread({ sdrId: sdrB.id, email: 'alice@acme.io', subject: 'Pricing question', priority: 99 });
      await thread({ sdrId: otherWsSdr.id, workspaceId: otherWsId, email: 'alice@acme.io', priority: 99 });
    });

    async function inbox(qs = '') {
      const res = await app.request('GET', `/v1/sdr/inbox${qs}`, { key });
      assert.equal(res.status, 200, res.text);
      return res.body.data as { threads: any[]; total: number; hasMore: boolean };
    }

    it('lists only the key’s SDR’s threads, priority descending by default, with the thread shape', async () => {
      const d = await inbox();
      assert.deepEqual(d.threads.map((t) => t.id), [ids.a, ids.d, ids.b, ids.c]);
      assert.equal(d.total, 4);
      assert.equal(d.hasMore, false);
      assert.deepEqual(d.threads[0], {
        id: ids.a,
        contactEmail: 'alice@acme.io',
        contactName: 'Alice Smith',
        subject: 'Pricing question',
        status: 'replied',
        category: 'A',
        priorityScore: 90,
        lastMessageAt: '2026-03-30T10:00:00.000Z',
        createdAt: '2026-03-01T00:00:00.000Z',
        snoozedUntil: null,
      });
      assert.equal(d.threads.find((t) => t.id === ids.c).snoozedUntil, '2026-04-05T00:00:00.000Z');
    });

    it('orders by lastMessage and created', async () => {
      assert.deepEqual((await inbox('?orderBy=lastMessage')).threads.map((t) => t.id), [ids.b, ids.c, ids.a, ids.d]);
      assert.deepEqual((await inbox('?orderBy=created')).threads.map((t) => t.id), [ids.d, ids.c, ids.b, ids.a]);
      assert.deepEqual((await inbox('?orderBy=priority')).threads.map((t) => t.id), [ids.a, ids.d, ids.b, ids.c]);
    });

    it('filters by status (repeatable) and category', async () => {
      assert.deepEqual((await inbox('?status=new')).threads.map((t) => t.id), [ids.b]);
      assert.deepEqual((await inbox('?status=new&status=replied')).threads.map((t) => t.id), [ids.a, ids.b]);
      const cat = await inbox('?category=C');
      assert.deepEqual(cat.threads.map((t) => t.id), [ids.c]);
      assert.equal(cat.total, 1);
      assert.equal((await inbox('?status=won')).total, 0);
    });

    it('searches email, name and subject case-insensitively, wildcards taken literally', async () => {
      assert.deepEqual((await inbox('?search=ACME')).threads.map((t) => t.id), [ids.a, ids.c]);
      assert.deepEqual((await inbox('?search=GLOBEX.COM')).threads.map((t) => t.id), [ids.b]);
      assert.deepEqual((await inbox('?search=smith')).threads.map((t) => t.id), [ids.a]);
      // Spaces around the term (a pasted name, the search box) are ignored, as for leads' and the suppression list's q.
      assert.deepEqual((await inbox(`?search=${encodeURIComponent(' smith\t')}`)).threads.map((t) => t.id), [ids.a]);
      assert.equal((await inbox('?search=%20%20')).threads.length, (await inbox('')).threads.length);
      assert.deepEqual((await inbox('?search=demo')).threads.map((t) => t.id), [ids.c]);
      assert.deepEqual((await inbox(`?search=${encodeURIComponent('100%')}`)).threads.map((t) => t.id), [ids.b]);
      assert.deepEqual((await inbox(`?search=${encodeURIComponent('f_d')}`)).threads.map((t) => t.id), [ids.b]);
      assert.equal((await inbox(`?search=${encodeURIComponent('%')}`)).total, 1);
      assert.equal((await inbox('?search=nobody')).total, 0);
    });

    it('finds non-ASCII names as stored, whatever the database locale (the term lower-cased by PostgreSQL, like the text)', async () => {
      const { sdr, sdrKey } = await seedSdr(app, wsId, 'Una');
      const greek = await thread({ sdrId: sdr.id, email: 'sisyphos@hellas.example', name: 'ΣΊΣΥΦΟΣ Papadopoulos', subject: 'Re: offer' });
      const turkish = await thread({ sdrId: sdr.id, email: 'ismail@kargo.example', name: 'İsmail Yılmaz', subject: 'Re: İstanbul office' });
      const found = async (q: string) =>
        (await app.request('GET', `/v1/sdr/inbox?search=${encodeURIComponent(q)}`, { key: sdrKey })).body.data.threads.map((t: { id: string }) => t.id);
      assert.deepEqual(await found('ΣΊΣΥΦΟΣ'), [greek]);
      assert.deepEqual(await found('İsmail'), [turkish]);
      assert.deepEqual(await found('İstanbul'), [turkish]);
      assert.deepEqual(await found('Yılmaz'), [turkish]);
    });

    it('snoozed=true is snoozed now, false is not, omitted is both (per the injected clock)', async () => {
      assert.deepEqual((await inbox('?snoozed=true')).threads.map((t) => t.id), [ids.c]);
      assert.deepEqual((await inbox('?snoozed=false')).threads.map((t) => t.id), [ids.a, ids.d, ids.b]);
      assert.equal((await inbox()).total, 4);
      clock.set('2026-04-06T00:00:00.000Z');
      try {
        assert.equal((await inbox('?snoozed=true')).total, 0);
        assert.equal((await inbox('?snoozed=false')).total, 4);
      } finally {
        clock.set(T0);
      }
    });

    it('pages with limit and offset: total and hasMore', async () => {
      const p1 = await inbox('?limit=2');
      assert.deepEqual(p1.threads.map((t) => t.id), [ids.a, ids.d]);
      assert.equal(p1.total, 4);
      assert.equal(p1.hasMore, true);
      const p2 = await inbox('?limit=2&offset=2');
      assert.deepEqual(p2.threads.map((t) => t.id), [ids.b, ids.c]);
      assert.equal(p2.hasMore, false);
      const past = await inbox('?offset=10');
      assert.deepEqual(past, { threads: [], total: 4, hasMore: false });
      assert.equal((await inbox('?limit=100')).threads.length, 4);
    });

    it('bad or unknown query parameters are 400 invalid_request', async () => {
      for (const qs of ['?limit=101', '?limit=0', '?limit=abc', '?offset=-1', '?orderBy=name', '?status=open', '?status=new&status=bogus', '?category=D', '?snoozed=yes', '?sort=priority']) {
        const res = await app.request('GET', `/v1/sdr/inbox${qs}`, { key });
        assert.equal(res.status, 400, qs);
        assert.equal(res.body.error.code, 'invalid_request', qs);
      }
    });

    it('defaults limit to 50', async () => {
      const s = await seedSdr(app, wsId, 'Many');
      for (let i = 0; i < 55; i++) await thread({ sdrId: s.sdr.id, priority: i });
      const res = await app.request('GET', '/v1/sdr/inbox', { key: s.sdrKey });
      assert.equal(res.body.data.threads.length, 50);
      assert.equal(res.body.data.total, 55);
      assert.equal(res.body.data.hasMore, true);
      assert.equal(res.body.data.threads[0].priorityScore, 54);
    });
  });

  describe('GET /v1/sdr/threads/:id', () => {
    it('returns the thread with messages oldest first, the handoff snapshot and drafts', async () => {
      const cmp = await app.request('POST', '/v1/campaigns', { key: adminKey, body: { name: 'Q2' } });
      assert.equal(cmp.status, 201);
      const leadId = `lead_t${randomBytes(4).toString('hex')}`;
      await db.query(`insert into leads (id, workspace_id, email, email_key, first_name, created_at, updated_at) values ($1, $2, 'pat@prospect.example', 'pat@prospect.example', 'Pat', $3, $3)`, [leadId, wsId, T0]);
      const replyId = `rpl_t${randomBytes(4).toString('hex')}`;
      await db.query(
        `insert into replies (id, workspace_id, campaign_id, lead_id, email, classification, decided_by, confidence, received_at, created_at)
         values ($1, $2, $3, $4, 'pat@prospect.example', 'interested', 'rules', 0.9, $5, $5)`,
        [replyId, wsId, cmp.body.id, leadId, T0],
      );
      const id = await thread({ email: 'pat@prospect.example', name: 'Pat', subject: 'Re: intro', replyId });
      await db.query(
        `insert into thread_messages (id, thread_id, direction, from_email, to_emails, subject, body_text, at, created_at) values
         ('tmsg_2', $1, 'outbound', 'ann@example.com', '{pat@prospect.example}', 'Re: intro', 'Happy to help', '2026-04-01T11:00:00Z', $2),
         ('tmsg_1', $1, 'inbound', 'pat@prospect.example', '{sales@example.com}', 'Re: intro', 'Tell me more', '2026-04-01T10:00:00Z', $2)`,
        [id, T0],
      );
      // The shape assignment writes (sdrs/assign.ts snapshot()), as the OpenAPI document describes it.
      const snapshot = {
        campaign: { id: cmp.body.id, name: 'Q2' },
        lead: { email: 'pat@prospect.example', firstName: 'Pat', lastName: null, company: null, jobTitle: null, customFields: {} },
        messages: [{ direction: 'inbound', replyId, classification: 'interested', subject: 'Re: intro', bodyText: 'Tell me more', at: '2026-04-01T10:00:00.000Z' }],
      };
      await db.query(
        `insert into handoffs (id, workspace_id, reply_id, thread_id, sdr_id, to_email, subject, note, category, seniority, employee_count, snapshot, created_at)
         values ('hof_t1', $1, $2, $3, $4, 'ann@example.com', 'Fwd: Re: intro', 'hot lead', 'A', 'vp', '51-200', $5, $6)`,
        [wsId, replyId, id, sdrA.id, JSON.stringify(snapshot), T0],
      );
      await db.query(
        `insert into drafts (id, workspace_id, thread_id, sdr_id, subject, body_text, body_html, created_at, updated_at)
         values ('drf_t1', $1, $2, $3, 'Re: intro', 'Hi Pat', '<p>Hi Pat</p>', $4, $4)`,
        [wsId, id, sdrA.id, T0],
      );
      const res = await app.request('GET', `/v1/sdr/threads/${id}`, { key: keyA });
      assert.equal(res.status, 200, res.text);
      const d = res.body.data;
      assert.equal(d.id, id);
      assert.equal(d.contactEmail, 'pat@prospect.example');
      assert.equal(d.status, 'new');
      assert.deepEqual(d.messages.map((m: any) => [m.id, m.direction, m.bodyText, m.at]), [
        ['tmsg_1', 'inbound', 'Tell me more', '2026-04-01T10:00:00.000Z'],
        ['tmsg_2', 'outbound', 'Happy to help', '2026-04-01T11:00:00.000Z'],
      ]);
      assert.deepEqual(d.messages[1].toEmails, ['pat@prospect.example']);
      assert.equal(d.handoff.id, 'hof_t1');
      assert.equal(d.handoff.replyId, replyId);
      assert.equal(d.handoff.note, 'hot lead');
      assert.deepEqual(d.handoff.snapshot, snapshot);
      assert.deepEqual(d.drafts.map((x: any) => [x.id, x.state, x.bodyText, x.bodyHtml]), [['drf_t1', 'generated', 'Hi Pat', '<p>Hi Pat</p>']]);

      // The stored priority is recomputed on a write from the reply's classification (interested: 20).
      const patched = await app.request('PATCH', `/v1/sdr/threads/${id}`, { key: keyA, body: { status: 'meeting_booked' } });
      assert.equal(patched.body.data.priorityScore, 30 + 20 + 20);
    });

    it('a thread with no messages, handoff or drafts has empty lists and handoff null', async () => {
      const id = await thread();
      const res = await app.request('GET', `/v1/sdr/threads/${id}`, { key: keyA });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.data.messages, []);
      assert.equal(res.body.data.handoff, null);
      assert.deepEqual(res.body.data.drafts, []);
    });

    it('another SDR’s, another workspace’s or a missing thread is 404 thread_not_found', async () => {
      const mine = await thread({ sdrId: sdrA.id });
      for (const [key, id] of [
        [keyB, mine],
        [otherKey, mine],
        [keyA, 'thr_doesnotexist'],
      ]) {
        const res = await app.request('GET', `/v1/sdr/threads/${id}`, { key });
        assert.equal(res.status, 404);
        assert.equal(res.body.error.code, 'thread_not_found');
      }
    });
  });

  describe('PATCH /v1/sdr/threads/:id', () => {
    it('applies every transition of the table and refuses every other with allowedTransitions', async () => {
      for (const from of THREAD_STATUSES) {
        for (const to of THREAD_STATUSES) {
          const id = await thread({ status: from });
          const res = await app.request('PATCH', `/v1/sdr/threads/${id}`, { key: keyA, body: { status: to } });
          const { rows } = await db.query('select status from prospect_threads where id = $1', [id]);
          if (allowedTransitions(from).includes(to)) {
            assert.equal(res.status, 200, `${from} -> ${to}: ${res.text}`);
            assert.equal(res.body.data.status, to);
            assert.equal(res.body.data.id, id);
            assert.equal(rows[0].status, to);
          } else {
            assert.equal(res.status, 400, `${from} -> ${to}`);
            assert.equal(res.body.error.code, 'invalid_transition');
            assert.deepEqual(res.body.allowedTransitions, allowedTransitions(from));
            assert.equal(rows[0].status, from);
          }
        }
      }
    });

    it('recomputes the stored priorityScore with the injected clock', async () => {
      // A reopen (closing a thread would skip its pending follow-ups: followups.test.ts).
      const id = await thread({ status: 'lost_timing', category: 'A', priority: 0, lastMessageAt: '2026-03-31T12:00:00.000Z' });
      await db.query(`insert into followup_tasks (id, workspace_id, thread_id, sdr_id, status, due_at, created_at) values ('fup_t1', $1, $2, $3, 'pending', '2026-04-01T00:00:00Z', $4), ('fup_t2', $1, $2, $3, 'pending', '2026-04-09T00:00:00Z', $4), ('fup_t3', $1, $2, $3, 'done', '2026-03-01T00:00:00Z', $4)`, [wsId, id, sdrA.id, T0]);
      const res = await app.request('PATCH', `/v1/sdr/threads/${id}`, { key: keyA, body: { status: 'new' } });
      // A 50 + unknown classification 10 + recency (24h old) 10 + one overdue pending follow-up 10.
      assert.equal(res.body.data.priorityScore, 80);
    });

    it('bad bodies are 400 invalid_request; foreign threads 404', async () => {
      const id = await thread();
      for (const body of [{}, { status: 'open' }, { status: 'archived', note: 'x' }, { status: 3 }]) {
        const res = await app.request('PATCH', `/v1/sdr/threads/${id}`, { key: keyA, body });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error.code, 'invalid_request');
      }
      const malformed = await app.request('PATCH', `/v1/sdr/threads/${id}`, { key: keyA, raw: '{"status":', headers: { 'content-type': 'application/json' } });
      assert.equal(malformed.status, 400);
      for (const key of [keyB, otherKey]) {
        const res = await app.request('PATCH', `/v1/sdr/threads/${id}`, { key, body: { status: 'archived' } });
        assert.equal(res.status, 404);
        assert.equal(res.body.error.code, 'thread_not_found');
      }
      const { rows } = await db.query('select status from prospect_threads where id = $1', [id]);
      assert.equal(rows[0].status, 'new');
    });
  });

  describe('snooze and unsnooze', () => {
    it('snoozes until a future time, shows in snoozed=true, and unsnoozes', async () => {
      const s = await seedSdr(app, wsId, 'Zoe');
      const id = await thread({ sdrId: s.sdr.id });
      const res = await app.request('POST', `/v1/sdr/threads/${id}/snooze`, { key: s.sdrKey, body: { until: '2026-04-02T09:00:00+02:00' } });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.data.snoozedUntil, '2026-04-02T07:00:00.000Z');
      let inbox = await app.request('GET', '/v1/sdr/inbox?snoozed=true', { key: s.sdrKey });
      assert.deepEqual(inbox.body.data.threads.map((t: any) => t.id), [id]);
      const un = await app.request('POST', `/v1/sdr/threads/${id}/unsnooze`, { key: s.sdrKey });
      assert.equal(un.status, 200);
      assert.equal(un.body.data.snoozedUntil, null);
      inbox = await app.request('GET', '/v1/sdr/inbox?snoozed=true', { key: s.sdrKey });
      assert.equal(inbox.body.data.total, 0);
      // Unsnoozing a thread that is not snoozed is harmless.
      assert.equal((await app.request('POST', `/v1/sdr/threads/${id}/unsnooze`, { key: s.sdrKey, body: {} })).status, 200);
    });

    it('until must be a future ISO timestamp per the injected clock; unknown fields and bodies 400', async () => {
      const id = await thread();
      for (const body of [{ until: T0 }, { until: '2026-04-01T11:59:59.999Z' }, { until: 'tomorrow' }, {}, { until: '2026-05-01T00:00:00Z', why: 'x' }]) {
        const res = await app.request('POST', `/v1/sdr/threads/${id}/snooze`, { key: keyA, body });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error.code, 'invalid_request');
      }
      const un = await app.request('POST', `/v1/sdr/threads/${id}/unsnooze`, { key: keyA, body: { until: 'x' } });
      assert.equal(un.status, 400);
      const { rows } = await db.query('select snoozed_until from prospect_threads where id = $1', [id]);
      assert.equal(rows[0].snoozed_until, null);
      clock.set('2026-03-01T00:00:00.000Z');
      try {
        const ok = await app.request('POST', `/v1/sdr/threads/${id}/snooze`, { key: keyA, body: { until: T0 } });
        assert.equal(ok.status, 200);
      } finally {
        clock.set(T0);
      }
    });

    it('another SDR’s or workspace’s thread is 404 thread_not_found and unchanged', async () => {
      const id = await thread({ sdrId: sdrB.id, snoozedUntil: '2026-04-03T00:00:00.000Z' });
      for (const key of [keyA, otherKey]) {
        const s = await app.request('POST', `/v1/sdr/threads/${id}/snooze`, { key, body: { until: '2026-05-01T00:00:00Z' } });
        assert.equal(s.status, 404);
        assert.equal(s.body.error.code, 'thread_not_found');
        const u = await app.request('POST', `/v1/sdr/threads/${id}/unsnooze`, { key });
        assert.equal(u.status, 404);
      }
      const { rows } = await db.query('select snoozed_until from prospect_threads where id = $1', [id]);
      assert.equal(new Date(rows[0].snoozed_until).toISOString(), '2026-04-03T00:00:00.000Z');
    });
  });

  // Added with migration 0003: whatever the tests above wrote, the inbox counters still match
  // (a describe of its own, so it runs after the nested describes above).
  describe('afterwards', () => {
    it('prospect_thread_counts equal a count of the threads', async () => {
      await assertThreadCountsExact(db);
    });
  });
});
