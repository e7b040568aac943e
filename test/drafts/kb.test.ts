// The knowledge base: `mailgate kb add|list|remove` and its retrieval (full-text search, trigram
// fallback), which the planner uses to pick what a draft may quote.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCliCaptured } from '../support/cli.ts';
import { createTestDatabase, startTestApp, seedWorkspace, type TestApp } from '../support/harness.ts';
import { searchTerms } from '../../src/modules/drafts/kb.ts';

describe('knowledge base: mailgate kb', () => {
  let db: { url: string; drop(): Promise<void> };
  let env: NodeJS.ProcessEnv;
  let dir: string;
  before(async () => {
    db = await createTestDatabase();
    env = { DATABASE_URL: db.url, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex'), LOG_LEVEL: 'warn' };
    dir = await mkdtemp(path.join(tmpdir(), 'mailgate-kb-'));
    assert.equal((await cli('workspace', 'create', '--name', 'kbws', '--json')).code, 0);
  });
  after(async () => {
    await db.drop();
  });
  const cli = (...argv: string[]) => runCliCaptured(env, argv);

  it('adds from --text or --file, lists, removes; --json prints one object', async () => {
    const a = await cli('kb', 'add', '--workspace', 'kbws', '--title', 'Pricing', '--text', 'Team plan: $49 per rep per month. https://acme.example/pricing', '--json');
    assert.equal(a.code, 0, a.err);
    assert.match(a.json.id, /^kb_/);
    assert.equal(a.json.title, 'Pricing');
    const file = path.join(dir, 'security.md');
    await writeFile(file, 'We are SOC 2 Type II certified.\r\nDPAs on request.\r\n');
    const b = await cli('kb', 'add', '--workspace', 'kbws', '--title', 'Security', '--file', file, '--json');
    assert.equal(b.code, 0, b.err);
    const list = await cli('kb', 'list', '--workspace', 'kbws', '--json');
    assert.deepEqual(
      list.json.data.map((e: { title: string }) => e.title),
      ['Pricing', 'Security'],
    );
    assert.equal(list.json.data[1].body, 'We are SOC 2 Type II certified.\nDPAs on request.');
    const human = await cli('kb', 'list', '--workspace', 'kbws');
    assert.match(human.out, /Pricing/);
    const rm = await cli('kb', 'remove', a.json.id, '--json');
    assert.deepEqual(rm.json, { id: a.json.id, removed: true });
    assert.equal((await cli('kb', 'list', '--workspace', 'kbws', '--json')).json.data.length, 1);
  });

  it('warns about links a draft could not send (http:, shorteners), and still stores the entry', async () => {
    const r = await cli('kb', 'add', '--workspace', 'kbws', '--title', 'Old links', '--text', 'Docs: http://acme.example/docs and https://bit.ly/x1 and https://acme.example/ok', '--json');
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(
      r.json.warnings,
      [
        'link http://acme.example/docs (http) would block a draft that quotes it; use a direct https link',
        'link https://bit.ly/x1 (shortener) would block a draft that quotes it; use a direct https link',
      ],
    );
    assert.equal(r.err.trim().split('\n').length, 2);
    assert.match(r.err, /^warning: link http:\/\/acme\.example\/docs/);
    assert.equal((await cli('kb', 'remove', r.json.id, '--json')).code, 0);
  });

  it('bad input: a one-line error and a non-zero exit, nothing written', async () => {
    const cases: [string[], RegExp][] = [
      [['kb', 'add', '--workspace', 'kbws', '--title', 'X'], /exactly one of --file or --text/],
      [['kb', 'add', '--workspace', 'kbws', '--title', 'X', '--text', 'a', '--file', 'b'], /exactly one of --file or --text/],
      [['kb', 'add', '--workspace', 'kbws', '--title', '  ', '--text', 'a'], /title: must not be empty/],
      [['kb', 'add', '--workspace', 'kbws', '--title', 'X', '--text', '   '], /text: must not be empty/],
      [['kb', 'add', '--workspace', 'kbws', '--title', 'X', '--file', path.join(dir, 'missing.txt')], /cannot read .*ENOENT/],
      [['kb', 'add', '--workspace', 'nope', '--title', 'X', '--text', 'a'], /workspace/],
      [['kb', 'remove', 'kb_missing'], /not found/],
    ];
    for (const [argv, message] of cases) {
      const r = await cli(...argv);
      assert.notEqual(r.code, 0, argv.join(' '));
      assert.match(r.err, message);
      assert.equal(r.err.trim().split('\n').length, 1);
    }
    assert.equal((await cli('kb', 'list', '--workspace', 'kbws', '--json')).json.data.length, 1);
  });
});

describe('knowledge base retrieval', () => {
  let app: TestApp;
  let ws: string;
  before(async () => {
    app = await startTestApp();
    ws = (await seedWorkspace(app)).workspace.id;
    const kb = app.services().kb;
    await kb.add(ws, 'Pricing', 'The Team plan is $49 per rep per month, billed annually. Volume discounts from 25 seats.');
    await kb.add(ws, 'Security', 'SOC 2 Type II certified; SSO with SAML; DPAs on request.');
    await kb.add(ws, 'Integrations', 'Native Salesforce and HubSpot integrations, plus a REST API.');
    await kb.add(ws, 'Case study: Contoso', 'Contoso cut ramp time from 5 to 3 months.');
    const other = (await seedWorkspace(app)).workspace.id;
    await kb.add(other, 'Pricing (other workspace)', 'Pricing pricing pricing.');
  });
  after(async () => {
    await app.close();
  });

  it('ranks full-text matches of the message’s terms, scoped to the workspace', async () => {
    const hits = await app.services().kb.search(ws, 'What does pricing look like for 40 seats? Do you integrate with Salesforce?');
    assert.deepEqual(hits.slice(0, 2).map((h) => h.title).sort(), ['Integrations', 'Pricing']);
    assert.ok(hits.every((h) => !h.title.includes('other workspace')));
    assert.equal(hits[0].matchedBy, 'fulltext');
  });

  it('falls back to trigram similarity for misspelled or inflected words', async () => {
    const hits = await app.services().kb.search(ws, 'any info on integraton with Salesforse?');
    assert.equal(hits[0]?.title, 'Integrations', JSON.stringify(hits));
    assert.equal(hits[0].matchedBy, 'trigram');
  });

  it('nothing to search for: no hits; stopwords and punctuation are not terms', async () => {
    assert.deepEqual(await app.services().kb.search(ws, 'ok, thanks!'), []);
    assert.deepEqual(searchTerms("What's the PRICE & (SSO)?!"), ['price', 'sso']);
  });
});
