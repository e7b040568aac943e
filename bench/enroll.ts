// Enrollment and stats benchmarks (issue 3). Run: npm run bench:enroll
//  (a) one 10,000-lead bulk request (each lead with two custom fields) through the API vs a
//      bare INSERT ... ON CONFLICT of the same rows through pg on the same database;
//  (b) 100,000 leads in 10 requests into one campaign, then start: time to queue step 0 (the
//      request, which writes the first 5,000 and counts the rest queued), and until a worker
//      has written the rest from the campaign's backlog;
//  (c) stats latency p50/p95 over 200 calls with 1,000,000 messages in one campaign, vs a bare
//      primary-key SELECT of the same counters row.
import { performance } from 'node:perf_hooks';
import { benchEnvironment, median, percentile, ms } from './support.ts';
import { benchResult } from './results.ts';
import { backlogCampaigns, writeBacklogChunk } from '../src/modules/messages/queue.ts';

const env = await benchEnvironment();
const round = (n: number) => Array.from({ length: 10_000 }, (_, i) => ({ email: `r${n}.lead${i}@bench.example`, firstName: `First${i}`, company: `Co ${i % 300}`, jobTitle: 'VP Sales', tier: i % 3, city: `City ${i % 50}` }));

// (a) alternate API and bare runs so both see the same machine state.
const apiTimes: number[] = [];
const bareTimes: number[] = [];
const leadsOnlyTimes: number[] = [];
for (let r = 0; r < 5; r++) {
  const { id } = await env.api('POST', '/v1/campaigns', { name: `bench a${r}`, sequenceSteps: [{ subject: 'Hi {{firstName}}', bodyHtml: '<p>Hello</p>' }] });
  const leads = round(r);
  let t = performance.now();
  const res = await env.api('POST', `/v1/campaigns/${id}/leads/bulk`, { leads });
  apiTimes.push(performance.now() - t);
  if (res.total !== 10_000) throw new Error('unexpected total');

  // The bare baseline writes the same rows the API writes (10,000 leads and their 10,000
  // enrollments) with one INSERT ... ON CONFLICT each, in one transaction, through pg.
  const { id: bareCampaign } = await env.api('POST', '/v1/campaigns', { name: `bench bare${r}`, sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hello</p>' }] });
  const rows = round(100 + r);
  const client = await env.pool.connect();
  t = performance.now();
  await client.query('begin');
  const { rows: ids } = await client.query(
    `insert into leads (id, workspace_id, email, email_key, first_name, company, job_title, custom, created_at, updated_at)
     select 'lead_b' || $7::text || '_' || t.n, $1, t.email, lower(t.email), t.first_name, t.company, t.job_title, t.custom::jsonb, now(), now()
       from unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) with ordinality as t(email, first_name, company, job_title, custom, n)
     on conflict (workspace_id, email_key) do update set first_name = excluded.first_name, company = excluded.company,
       job_title = excluded.job_title, custom = leads.custom || excluded.custom, updated_at = now()
     returning id`,
    [
      env.workspaceId,
      rows.map((l) => l.email),
      rows.map((l) => l.firstName),
      rows.map((l) => l.company),
      rows.map((l) => l.jobTitle),
      rows.map((l) => JSON.stringify({ tier: l.tier, city: l.city })),
      String(r),
    ],
  );
  const leadsOnly = performance.now() - t;
  await client.query(
    `insert into enrollments (id, workspace_id, campaign_id, lead_id, status, created_at, updated_at)
     select 'enr_b' || $3::text || '_' || t.n, $1, $2, t.lead_id, 'active', now(), now()
       from unnest($4::text[]) with ordinality as t(lead_id, n)
     on conflict (campaign_id, lead_id) do nothing`,
    [env.workspaceId, bareCampaign, String(r), ids.map((x: { id: string }) => x.id)],
  );
  await client.query('commit');
  client.release();
  leadsOnlyTimes.push(leadsOnly);
  bareTimes.push(performance.now() - t);
}
const ratioA = median(apiTimes) / median(bareTimes);
console.log(
  `(a) 10,000-lead bulk enroll: API median ${ms(median(apiTimes))} vs bare INSERT ... ON CONFLICT of the same leads and enrollments ${ms(median(bareTimes))}: ` +
    `ratio ${ratioA.toFixed(2)}x (target <= 1.5x, issue 20); the bare leads statement alone ${ms(median(leadsOnlyTimes))}`,
);
benchResult('enroll', { ratio: ratioA, apiMs: median(apiTimes), bareMs: median(bareTimes) });

// (b)
const { id: big } = await env.api('POST', '/v1/campaigns', { name: 'bench b', sequenceSteps: [{ subject: 'Hi', bodyHtml: '<p>Hi</p>' }] });
let t = performance.now();
for (let r = 0; r < 10; r++) await env.api('POST', `/v1/campaigns/${big}/leads/bulk`, { leads: round(1000 + r) });
const enrollMs = performance.now() - t;
t = performance.now();
await env.api('POST', `/v1/campaigns/${big}/start`);
const startMs = performance.now() - t;
const s = await env.api('GET', `/v1/campaigns/${big}/stats`);
const statsMs = performance.now() - t;
const { rows: [{ written }] } = await env.pool.query(`select count(*)::int as written from outbound_messages where campaign_id = $1`, [big]);
console.log(
  `(b) 100,000 leads in 10 requests: ${ms(enrollMs)}; start in ${ms(startMs)} (target < 1 s, issue 20): its stats (read by ${ms(statsMs)}) ` +
    `count ${s.queued} first steps queued, ${written} of them written by the request`,
);
benchResult('start', { ms: startMs, queued: Number(s.queued) });
// The rest, as a worker writes them (sending/dispatcher.ts writeBacklog): chunk after chunk,
// each in its own transaction, until the backlog is gone.
let chunks = 0;
const em = () => env.deps.orm.em.fork();
while ((await backlogCampaigns(em())).length) {
  for (const c of await backlogCampaigns(em())) if ((await em().transactional((x) => writeBacklogChunk(x, c, new Date()))) !== null) chunks++;
}
const allWrittenMs = performance.now() - t;
const { rows: [{ total }] } = await env.pool.query(`select count(*)::int as total from outbound_messages where campaign_id = $1`, [big]);
console.log(`    the start's backlog written by one worker in ${chunks} chunks: ${total} first steps written ${ms(allWrittenMs)} after the start request began`);
// This machine's speed, for reading the absolute target: the same first steps written by one
// bare INSERT ... SELECT (the start's own statement, without the request, the campaign's lock,
// counters and event around it) into an empty copy of outbound_messages, indexes included.
await env.pool.query(`create table bench_start_copy (like outbound_messages including all)`);
t = performance.now();
await env.pool.query(
  `insert into bench_start_copy (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
   select 'msg_' || e.id, e.workspace_id, e.campaign_id, e.id, e.lead_id, 0, 'queued', now(), l.email, now(), now()
     from enrollments e join leads l on l.id = e.lead_id
    where e.campaign_id = $1 and e.status = 'active'`,
  [big],
);
const bareStartMs = performance.now() - t;
await env.pool.query(`drop table bench_start_copy`);
console.log(
  `    the same 100,000 rows by one bare INSERT ... SELECT into an empty copy of outbound_messages: ${ms(bareStartMs)} ` +
    `(start request / bare ${(startMs / bareStartMs).toFixed(2)}x; start to the last first step written / bare ${(allWrittenMs / bareStartMs).toFixed(2)}x)`,
);

if (process.env.BENCH_SKIP_C) { await env.close(); process.exit(0); }
// (c) seed 1,000,000 messages: 100,000 enrollments x 10 steps.
t = performance.now();
const { rows: [{ id: cmp }] } = await env.pool.query(`select id from campaigns where name = 'bench b'`);
await env.pool.query(
  `insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, sent_at, created_at, updated_at)
   select 'msg_s' || e.seq || '_' || g, e.workspace_id, e.campaign_id, e.id, e.lead_id, g, 'sent', now(), 'x@bench.example', now(), now(), now()
     from enrollments e cross join generate_series(1, 10) g
    where e.campaign_id = $1`,
  [cmp],
);
const { rows: [{ n }] } = await env.pool.query('select count(*)::int as n from outbound_messages where campaign_id = $1', [cmp]);
await env.pool.query('analyze');
console.log(`    seeded ${n} messages in the campaign in ${ms(performance.now() - t)}`);
const statsTimes: number[] = [];
const bareStats: number[] = [];
for (let i = 0; i < 200; i++) {
  let t0 = performance.now();
  await env.api('GET', `/v1/campaigns/${cmp}/stats`);
  statsTimes.push(performance.now() - t0);
  t0 = performance.now();
  await env.pool.query('select * from campaign_counters where campaign_id = $1', [cmp]);
  bareStats.push(performance.now() - t0);
}
console.log(
  `(c) stats with ${n} messages: p50 ${ms(percentile(statsTimes, 50))}, p95 ${ms(percentile(statsTimes, 95))} (target p95 < 20 ms); ` +
    `bare counters SELECT p50 ${ms(percentile(bareStats, 50))}, p95 ${ms(percentile(bareStats, 95))}; p95 ratio ${(percentile(statsTimes, 95) / percentile(bareStats, 95)).toFixed(2)}x`,
);
await env.close();
