// What a claim costs while many due follow-ups wait for a full account of the pool (issue 20
// review, docs/decisions.md "Waiting follow-ups do not hold up the pool"). Run: npm run bench:claim
//
// One pool of two accounts: `full` (inside its minimum interval, so it can take nothing now)
// and `free`. One campaign with BENCH_WAITING (default 50,000) due follow-ups sticky to `full`,
// and 1,000 due first steps of leads without an account yet, due after them. The claim of one
// batch (50 messages, the dispatcher's default) is timed in a transaction rolled back after
// it, alternately with the follow-ups waiting (the claim's scan passes over them) and with
// them moved out of the queue (the baseline: the same claim, the same other rows). Printed:
// the medians of 15 claims each and their ratio.
import { performance } from 'node:perf_hooks';
import { benchEnvironment, median } from './support.ts';

const WAITING = Number(process.env.BENCH_WAITING ?? 50_000);
const OTHERS = 1_000;
const ROUNDS = 15;

const env = await benchEnvironment();
const { claimForPool } = await import('../src/modules/sending/capacity.ts');
const s = env.services();
const full = await s.senders.add({ workspaceId: env.workspaceId, email: 'full@bench.example', name: 'Full', smtpUrl: 'smtp://u:p@127.0.0.1:2525', minIntervalMs: 3_600_000 });
const free = await s.senders.add({ workspaceId: env.workspaceId, email: 'free@bench.example', name: 'Free', smtpUrl: 'smtp://u:p@127.0.0.1:2526' });
const pool = await s.senders.createPool(env.workspaceId, 'bench', 1_000_000, [full.id, free.id]);
const { id: campaignId } = await env.api('POST', '/v1/campaigns', { name: 'claim bench', senderPoolId: pool.id, sequenceSteps: [{ subject: 'a', bodyHtml: 'a' }, { subject: '', bodyHtml: 'b' }] });

// The rows as the engine leaves them, written directly (set-up, not timed): WAITING enrollments
// sticky to `full` whose step 1 is due, OTHERS enrollments whose step 0 is due after them.
const now = new Date();
const client = await env.pool.connect();
await client.query(`update campaigns set status = 'running' where id = $1`, [campaignId]);
await client.query(`update sender_accounts set last_sent_at = $2 where id = $1`, [full.id, now]);
await client.query(
  `insert into enrollments (id, workspace_id, campaign_id, lead_id, status, sender_account_id, created_at, updated_at)
   select 'enr_w' || g, $1, $2, 'lead_w' || g, 'active', case when g <= $4::int then $3 end, $5, $5 from generate_series(1, $4::int + $6::int) g`,
  [env.workspaceId, campaignId, full.id, WAITING, now, OTHERS],
);
await client.query(
  `insert into outbound_messages (id, workspace_id, campaign_id, enrollment_id, lead_id, step_index, state, due_at, to_email, created_at, updated_at)
   select 'msg_w' || lpad(g::text, 8, '0'), $1, $2, 'enr_w' || g, 'lead_w' || g, case when g <= $3::int then 1 else 0 end, 'queued',
          $4::timestamptz - interval '1 hour' + g * interval '1 ms', 'w' || g || '@lead.example', $4, $4
     from generate_series(1, $3::int + $5::int) g`,
  [env.workspaceId, campaignId, WAITING, now, OTHERS],
);
await client.query('vacuum analyze outbound_messages');
await client.query('vacuum analyze enrollments');

const claimOnce = async (): Promise<{ ms: number; claimed: number }> => {
  let result = { ms: 0, claimed: 0 };
  await env.deps.orm.em
    .fork()
    .transactional(async (em) => {
      const t = performance.now();
      const claims = await claimForPool(em, { poolId: pool.id, campaignIds: [campaignId], now: new Date(), batchSize: 50, workerId: 'bench', leaseUntil: new Date(Date.now() + 600_000), held: new Set() });
      result = { ms: performance.now() - t, claimed: claims.length };
      throw new Error('rollback');
    })
    .catch((err: Error) => {
      if (err.message !== 'rollback') throw err;
    });
  return result;
};
// Moved out of the queue (and back) between the timed claims; not timed.
const setWaiting = (on: boolean) =>
  client.query(`update outbound_messages set state = $2 where campaign_id = $1 and step_index = 1 and state = $3`, [campaignId, on ? 'queued' : 'scheduled', on ? 'scheduled' : 'queued']);

const waiting: number[] = [];
const baseline: number[] = [];
await claimOnce(); // warm both paths' plans and caches once
for (let r = 0; r < ROUNDS; r++) {
  await setWaiting(true);
  const w = await claimOnce();
  if (w.claimed !== 50) throw new Error(`claimed ${w.claimed} with the follow-ups waiting`);
  waiting.push(w.ms);
  await setWaiting(false);
  const b = await claimOnce();
  if (b.claimed !== 50) throw new Error(`claimed ${b.claimed} without them`);
  baseline.push(b.ms);
}
client.release();
console.log(
  `claim of 50 with ${WAITING} due follow-ups waiting for a full account: median ${median(waiting).toFixed(1)} ms (${Math.min(...waiting).toFixed(1)}-${Math.max(...waiting).toFixed(1)}); ` +
    `without them ${median(baseline).toFixed(1)} ms (${Math.min(...baseline).toFixed(1)}-${Math.max(...baseline).toFixed(1)}); ratio ${(median(waiting) / median(baseline)).toFixed(1)}x`,
);
await env.close();
