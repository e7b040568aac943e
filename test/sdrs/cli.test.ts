import assert from 'node:assert/strict';
import { runCliCaptured } from '../support/cli.ts';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createTestDatabase } from '../support/harness.ts';

describe('mailgate CLI: SDR desk commands', () => {
  let db: { url: string; drop(): Promise<void> };
  let env: NodeJS.ProcessEnv;
  let client: pg.Client;
  let wsId: string;
  let sdrId: string;
  let dir: string;

  before(async () => {
    db = await createTestDatabase();
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex'), LOG_LEVEL: 'warn' };
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    dir = await mkdtemp(path.join(tmpdir(), 'mailgate-sdr-cli-'));
    const ws = await cli('workspace', 'create', '--name', 'desk', '--json');
    ok(ws);
    wsId = ws.json.id;
    const sdr = await cli('sdr', 'add', '--workspace', 'desk', '--name', 'Ann', '--email', 'ann@example.com', '--json');
    ok(sdr);
    sdrId = sdr.json.id;
  });
  after(async () => {
    await client.end();
    await db.drop();
  });

  const cli = (...argv: string[]) => runCliCaptured(env, argv);


  function ok(r: { code: number | null; err: string; out: string }) {
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out.trim().split('\n').length, 1, 'exactly one line (one JSON object) on stdout');
  }

  function fails(r: { code: number | null; err: string; out: string }, pattern: RegExp) {
    assert.notEqual(r.code, 0);
    assert.equal(r.out, '');
    assert.match(r.err, /^error: [^\n]*\n$/, 'one line on stderr');
    assert.match(r.err, pattern);
  }

  describe('sdr set-profile', () => {
    it('sets tone, signature (from a file), calendar URL and language and prints the profile', async () => {
      const sig = path.join(dir, 'sig.txt');
      await writeFile(sig, 'Ann Rep\nAcme Sales\n\n');
      const r = await cli('sdr', 'set-profile', sdrId, '--tone', 'warm, concise', '--signature-file', sig, '--calendar-url', 'https://cal.example.com/ann', '--language', 'pt-BR', '--json');
      ok(r);
      assert.deepEqual(r.json, { id: sdrId, name: 'Ann', email: 'ann@example.com', tone: 'warm, concise', signature: 'Ann Rep\nAcme Sales', calendarUrl: 'https://cal.example.com/ann', language: 'pt-BR' });
      const { rows } = await client.query('select tone, signature, calendar_url, language from sdrs where id = $1', [sdrId]);
      assert.deepEqual(rows[0], { tone: 'warm, concise', signature: 'Ann Rep\nAcme Sales', calendar_url: 'https://cal.example.com/ann', language: 'pt-BR' });
    });

    it('leaves fields not given alone and clears one given empty', async () => {
      const r = await cli('sdr', 'set-profile', sdrId, '--tone', '', '--language', 'en', '--json');
      ok(r);
      assert.equal(r.json.tone, null);
      assert.equal(r.json.language, 'en');
      assert.equal(r.json.calendarUrl, 'https://cal.example.com/ann');
      assert.equal(r.json.signature, 'Ann Rep\nAcme Sales');
    });

    it('rejects bad values, a missing file and an unknown SDR, changing nothing', async () => {
      fails(await cli('sdr', 'set-profile', sdrId, '--calendar-url', 'http://cal.example.com/ann', '--json'), /calendarUrl/);
      fails(await cli('sdr', 'set-profile', sdrId, '--calendar-url', 'not a url', '--json'), /calendarUrl/);
      fails(await cli('sdr', 'set-profile', sdrId, '--language', 'english please', '--json'), /language/);
      fails(await cli('sdr', 'set-profile', sdrId, '--signature-file', path.join(dir, 'missing.txt'), '--json'), /signature-file.*ENOENT/);
      fails(await cli('sdr', 'set-profile', 'sdr_nope', '--tone', 'x', '--json'), /not found/);
      const { rows } = await client.query('select tone, calendar_url, language from sdrs where id = $1', [sdrId]);
      assert.deepEqual(rows[0], { tone: null, calendar_url: 'https://cal.example.com/ann', language: 'en' });
    });
  });

  describe('sdr reassign-threads', () => {
    it("moves the SDR's open threads to another SDR with a usable mailbox; refuses a bad target and moves nothing", async () => {
      const bo = await cli('sdr', 'add', '--workspace', 'desk', '--name', 'Bo', '--email', 'bo@example.com', '--json');
      ok(bo);
      const boId = bo.json.id;
      for (const [id, status] of [['thr_cli_open', 'replied'], ['thr_cli_won', 'won']]) {
        await client.query(
          `insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, last_message_at, created_at, updated_at)
           values ($1, $2, $3, 'lee@lead.example', 'Lee', 'Re: hi', $4, 'B', 10, now(), now(), now())`,
          [id, wsId, sdrId, status],
        );
      }
      const holders = async () => (await client.query(`select id, sdr_id from prospect_threads where id like 'thr_cli_%' order by id`)).rows.map((r) => `${r.id}:${r.sdr_id === sdrId ? 'ann' : 'bo'}`);
      // Bo has no mailbox yet: refused (exit code non-zero, one line on stderr), nothing moved.
      fails(await cli('sdr', 'reassign-threads', sdrId, '--to', boId, '--json'), /mailbox is not connected/);
      fails(await cli('sdr', 'reassign-threads', sdrId, '--to', 'sdr_nope', '--json'), /toSdrId: sdr_nope is not an SDR of this workspace/);
      fails(await cli('sdr', 'reassign-threads', sdrId, '--to', sdrId, '--json'), /toSdrId/);
      fails(await cli('sdr', 'reassign-threads', 'sdr_nope', '--to', boId, '--json'), /not found/);
      assert.deepEqual(await holders(), ['thr_cli_open:ann', 'thr_cli_won:ann']);
      await client.query(
        `insert into sdr_mailboxes (sdr_id, workspace_id, email, smtp_url_enc, imap_url_enc, health_state, connected_at, updated_at)
         values ($1, $2, 'bo@example.com', 'x', 'x', 'active', now(), now())`,
        [boId, wsId],
      );
      const r = await cli('sdr', 'reassign-threads', sdrId, '--to', boId, '--json');
      ok(r);
      assert.deepEqual(r.json, { fromSdrId: sdrId, toSdrId: boId, threadIds: ['thr_cli_open'], discardedDraftIds: [], followupIds: [] });
      assert.deepEqual(await holders(), ['thr_cli_open:bo', 'thr_cli_won:ann'], 'a closed thread stays unless named');
      const named = await cli('sdr', 'reassign-threads', sdrId, '--to', boId, '--thread', 'thr_cli_won');
      assert.equal(named.code, 0, named.err);
      assert.match(named.out, /^moved 1 thread from sdr_\w+ to sdr_\w+ \(0 pending follow-ups moved, 0 open drafts discarded\)\n$/);
      assert.deepEqual(await holders(), ['thr_cli_open:bo', 'thr_cli_won:bo']);
      fails(await cli('sdr', 'reassign-threads', sdrId, '--to', boId, '--thread', 'thr_cli_won', '--json'), /threadIds: thr_cli_won is not a thread of Ann; nothing was moved/);
    });
  });

  describe('icp set', () => {
    it('stores the canonical values in icp_criteria and prints them', async () => {
      const r = await cli('icp', 'set', '--workspace', 'desk', '--seniority', 'VP, cxo,director', '--employee-count', '51-200,201-500', '--json');
      ok(r);
      assert.equal(r.json.workspaceId, wsId);
      assert.deepEqual(r.json.seniority, ['vp', 'cxo', 'director']);
      assert.deepEqual(r.json.employeeCount, ['51-200', '201-500']);
      assert.match(r.json.updatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const { rows } = await client.query('select seniority, employee_counts from icp_criteria where workspace_id = $1', [wsId]);
      assert.deepEqual(rows, [{ seniority: ['vp', 'cxo', 'director'], employee_counts: ['51-200', '201-500'] }]);
    });

    it('replaces the criteria; an empty list means everything passes (null)', async () => {
      const r = await cli('icp', 'set', '--workspace', wsId, '--seniority', '', '--employee-count', '10001+', '--json');
      ok(r);
      assert.equal(r.json.seniority, null);
      const { rows } = await client.query('select seniority, employee_counts from icp_criteria where workspace_id = $1', [wsId]);
      assert.deepEqual(rows, [{ seniority: null, employee_counts: ['10001+'] }]);
    });

    it('an unknown value, a missing option or an unknown workspace is an error and changes nothing', async () => {
      fails(await cli('icp', 'set', '--workspace', 'desk', '--seniority', 'vp,ceo', '--employee-count', '1-10', '--json'), /"ceo" is not one of/);
      fails(await cli('icp', 'set', '--workspace', 'desk', '--seniority', 'vp', '--employee-count', '250', '--json'), /"250" is not one of/);
      fails(await cli('icp', 'set', '--workspace', 'nope', '--seniority', 'vp', '--employee-count', '1-10', '--json'), /nope/);
      const missing = await cli('icp', 'set', '--workspace', 'desk', '--seniority', 'vp', '--json');
      assert.notEqual(missing.code, 0);
      assert.match(missing.err, /employee-count/);
      const { rows } = await client.query('select seniority, employee_counts from icp_criteria where workspace_id = $1', [wsId]);
      assert.deepEqual(rows, [{ seniority: null, employee_counts: ['10001+'] }]);
    });
  });

  describe('followup-rule add / list / remove', () => {
    let first: string;
    it('adds rules with defaults and options', async () => {
      const a = await cli('followup-rule', 'add', '--workspace', 'desk', '--name', 'Nudge', '--after', '3d', '--json');
      ok(a);
      assert.match(a.json.id, /^fur_/);
      first = a.json.id;
      assert.deepEqual({ ...a.json, id: undefined, createdAt: undefined }, {
        id: undefined,
        createdAt: undefined,
        workspaceId: wsId,
        name: 'Nudge',
        afterMs: 3 * 86_400_000,
        businessDays: false,
        categories: null,
        maxAttempts: 1,
      });
      const b = await cli('followup-rule', 'add', '--workspace', wsId, '--name', 'Hot leads', '--after', '48h', '--business-days', '--category', 'a,B', '--max-attempts', '3', '--json');
      ok(b);
      assert.equal(b.json.afterMs, 48 * 3_600_000);
      assert.equal(b.json.businessDays, true);
      assert.deepEqual(b.json.categories, ['A', 'B']);
      assert.equal(b.json.maxAttempts, 3);
      const { rows } = await client.query('select name, after_ms::int as after_ms, business_days, categories, max_attempts from followup_rules where id = $1', [b.json.id]);
      assert.deepEqual(rows[0], { name: 'Hot leads', after_ms: 172_800_000, business_days: true, categories: ['A', 'B'], max_attempts: 3 });
    });

    it('lists the workspace’s rules as {data: [...]} oldest first', async () => {
      const other = await cli('workspace', 'create', '--name', 'other', '--json');
      ok(other);
      ok(await cli('followup-rule', 'add', '--workspace', 'other', '--name', 'Elsewhere', '--after', '1d', '--json'));
      const l = await cli('followup-rule', 'list', '--workspace', 'desk', '--json');
      ok(l);
      assert.deepEqual(Object.keys(l.json), ['data']);
      assert.deepEqual(l.json.data.map((r: any) => r.name), ['Nudge', 'Hot leads']);
      const empty = await cli('workspace', 'create', '--name', 'empty', '--json');
      ok(empty);
      assert.deepEqual((await cli('followup-rule', 'list', '--workspace', 'empty', '--json')).json, { data: [] });
    });

    it('rejects a bad duration, category, attempt count or empty name', async () => {
      fails(await cli('followup-rule', 'add', '--workspace', 'desk', '--name', 'x', '--after', 'soon', '--json'), /--after/);
      fails(await cli('followup-rule', 'add', '--workspace', 'desk', '--name', 'x', '--after', '0s', '--json'), /--after: must be greater than zero/);
      fails(await cli('followup-rule', 'add', '--workspace', 'desk', '--name', 'x', '--after', '1d', '--category', 'A,D', '--json'), /"D" is not one of A, B, C/);
      fails(await cli('followup-rule', 'add', '--workspace', 'desk', '--name', 'x', '--after', '1d', '--max-attempts', '0', '--json'), /--max-attempts/);
      fails(await cli('followup-rule', 'add', '--workspace', 'desk', '--name', '  ', '--after', '1d', '--json'), /name/);
      const { rows } = await client.query(`select count(*)::int as n from followup_rules where workspace_id = $1`, [wsId]);
      assert.equal(rows[0].n, 2);
    });

    it('removes a rule, then removing it again is an error', async () => {
      const r = await cli('followup-rule', 'remove', first, '--json');
      ok(r);
      assert.deepEqual(r.json, { id: first, removed: true });
      assert.deepEqual((await cli('followup-rule', 'list', '--workspace', 'desk', '--json')).json.data.map((x: any) => x.name), ['Hot leads']);
      fails(await cli('followup-rule', 'remove', first, '--json'), /not found/);
    });
  });
});
