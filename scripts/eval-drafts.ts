// npm run eval:drafts — runs the real draft pipeline (planner, writer, judge, guardrails) over
// the fixture threads in fixtures/drafts (interested replies, pricing questions, scheduling,
// objections, other languages, hostile replies) against a fresh database, three variants per
// thread, and prints the judge's scores, the guardrails' outcome and every failure by kind.
// Offline (the built-in composer) unless MAILGATE_LLM_BASE_URL is set, then that model writes.
// Exits 1 when a draft is blocked by the guardrails or misses what its fixture expects.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchEnvironment } from '../bench/support.ts';
import { createServices } from '../src/services.ts';
import { llmFromConfig, type Deps } from '../src/deps.ts';
import { newId } from '../src/adapters/ids.ts';
import type { GuardrailsResult } from '../src/modules/drafts/guardrails.ts';

interface Fixture {
  id: string;
  kind: string;
  language?: string;
  contact: { firstName?: string; lastName?: string; company?: string };
  reply: string;
  html?: string;
  expect: { mentions?: string[]; absent?: string[] };
}

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'drafts');
const fixtures: Fixture[] = JSON.parse(await readFile(path.join(dir, 'threads.json'), 'utf8'));
const kb: { title: string; body: string }[] = JSON.parse(await readFile(path.join(dir, 'kb.json'), 'utf8'));

const env = await benchEnvironment();
const config = {
  ...env.deps.config,
  llmBaseUrl: process.env.MAILGATE_LLM_BASE_URL || undefined,
  llmApiKey: process.env.MAILGATE_LLM_API_KEY || undefined,
  llmModel: process.env.MAILGATE_LLM_MODEL || env.deps.config.llmModel,
};
// The LLM follows the configuration: built again for this one.
const deps: Deps = { ...env.deps, config, llm: llmFromConfig(config, env.deps.log, env.deps.metrics) };
const services = () => createServices(deps, env.deps.orm.em.fork());
const mode = config.llmBaseUrl ? `LLM ${config.llmModel} at ${config.llmBaseUrl}` : 'offline composer';

const ws = env.workspaceId;
const sdr = await services().sdrs.add(ws, 'Sam Rivera', 'sam@acme-sales.example');
await services().sdrs.setProfile(sdr.id, { tone: 'warm, concise', signature: 'Sam Rivera\nAcme Sales', calendarUrl: 'https://cal.acme-sales.example/sam/20min' });
for (const e of kb) await services().kb.add(ws, e.title, e.body);
await services().sdrs.addFollowupRule(ws, { name: 'Nudge after 3 business days', afterMs: 3 * 86_400_000, businessDays: true, categories: null, maxAttempts: 2 });
const scope = { workspaceId: ws, sdrId: sdr.id };

interface Row {
  fixture: Fixture;
  approach: string;
  scores: GuardrailsResult['scores'];
  blocks: string[];
  warns: string[];
  misses: string[];
}
const rows: Row[] = [];

for (const f of fixtures) {
  const email = `${f.id}@prospect.example`;
  const leadId = newId('lead');
  const threadId = newId('thr');
  const now = new Date();
  await env.pool.query(
    `insert into leads (id, workspace_id, email, email_key, first_name, last_name, company, created_at, updated_at) values ($1, $2, $3, $3, $4, $5, $6, $7, $7)`,
    [leadId, ws, email, f.contact.firstName ?? null, f.contact.lastName ?? null, f.contact.company ?? null, now],
  );
  await env.pool.query(
    `insert into prospect_threads (id, workspace_id, sdr_id, lead_id, contact_email, contact_name, subject, status, category, last_message_at, created_at, updated_at)
     values ($1, $2, $3, $4, $5, $6, 'Re: Coaching for your reps', 'new', 'A', $7, $7, $7)`,
    [threadId, ws, sdr.id, leadId, email, [f.contact.firstName, f.contact.lastName].filter(Boolean).join(' '), now],
  );
  await env.pool.query(
    `insert into thread_messages (id, thread_id, direction, message_id_header, from_email, subject, body_text, body_html, at, created_at)
     values ($1, $2, 'inbound', $3, $4, 'Re: Coaching for your reps', $5, $6, $7, $7)`,
    [newId('tmsg'), threadId, `<${f.id}@prospect.example>`, email, f.html ? `${f.reply}\n(hidden parts of the HTML, as a text/plain part could carry them)` : f.reply, f.html ?? null, now],
  );
  const { data } = await services().drafts.generate(scope, { threadId, variantCount: 3 });
  for (const [i, d] of data.drafts.entries()) {
    const g = await services().drafts.guardrails(scope, threadId, { subject: d.subject, bodyText: d.bodyText, bodyHtml: d.bodyHtml, cc: [] }, [email]);
    const text = d.bodyText.toLowerCase();
    const misses = [
      ...(f.expect.mentions ?? []).filter((m) => !text.includes(m.toLowerCase())).map((m) => `missing "${m}"`),
      ...(f.expect.absent ?? []).filter((m) => text.includes(m.toLowerCase())).map((m) => `contains "${m}"`),
    ];
    rows.push({
      fixture: f,
      approach: `${data.insights[i].approach}${data.insights[i].approach === 'offline_template' ? `/${['direct', 'question', 'proof'][i]}` : ''}`,
      scores: g.scores,
      blocks: g.issues.filter((x) => x.severity === 'block').map((x) => x.code),
      warns: g.issues.filter((x) => x.severity === 'warn').map((x) => x.code),
      misses,
    });
  }
}
await env.close();

const pad = (s: string | number, n: number) => String(s).padEnd(n);
const num = (x: number) => x.toFixed(2);
console.log(`eval:drafts — ${fixtures.length} threads x 3 variants, ${mode}\n`);
console.log(`${pad('thread', 24)}${pad('approach', 26)}overall  read  pers  link  guardrails`);
for (const r of rows) {
  const outcome = r.blocks.length ? `BLOCKED ${r.blocks.join(',')}` : 'pass';
  const extra = [r.warns.length ? `warn ${r.warns.join(',')}` : '', r.misses.length ? `EXPECT ${r.misses.join('; ')}` : ''].filter(Boolean).join('  ');
  console.log(`${pad(r.fixture.id, 24)}${pad(r.approach, 26)}${pad(num(r.scores.overall), 9)}${pad(num(r.scores.readability), 6)}${pad(num(r.scores.personalization), 6)}${pad(num(r.scores.linkQuality), 6)}${outcome}${extra ? '  ' + extra : ''}`);
}

console.log(`\n${pad('kind', 14)}${pad('drafts', 8)}${pad('passed', 8)}${pad('mean overall', 14)}${pad('min overall', 13)}expectation misses`);
const kinds = [...new Set(rows.map((r) => r.fixture.kind))];
for (const k of kinds) {
  const rs = rows.filter((r) => r.fixture.kind === k);
  const overall = rs.map((r) => r.scores.overall);
  console.log(
    `${pad(k, 14)}${pad(rs.length, 8)}${pad(rs.filter((r) => !r.blocks.length).length, 8)}${pad(num(overall.reduce((a, b) => a + b, 0) / rs.length), 14)}${pad(num(Math.min(...overall)), 13)}${rs.filter((r) => r.misses.length).length}`,
  );
}

const failures = new Map<string, number>();
for (const r of rows) {
  for (const b of r.blocks) failures.set(`guardrail ${b}`, (failures.get(`guardrail ${b}`) ?? 0) + 1);
  for (const m of r.misses) failures.set(`expectation (${r.fixture.kind})`, (failures.get(`expectation (${r.fixture.kind})`) ?? 0) + 1);
}
const warns = new Map<string, number>();
for (const r of rows) for (const w of r.warns) warns.set(w, (warns.get(w) ?? 0) + 1);
console.log(`\nfailures by kind: ${failures.size ? [...failures].map(([k, n]) => `${k}: ${n}`).join(', ') : 'none'}`);
console.log(`warnings: ${warns.size ? [...warns].map(([k, n]) => `${k}: ${n}`).join(', ') : 'none'}`);
const passed = rows.filter((r) => !r.blocks.length && !r.misses.length).length;
console.log(`\n${passed} of ${rows.length} drafts pass the guardrails and meet their fixture's expectations`);
process.exit(passed === rows.length ? 0 : 1);
