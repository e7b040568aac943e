// The pools' and accounts' sent tallies (messages/tallies.ts): a claim counts a rolling 24 hours
// from them and from the one bucket the window cuts. The count must be the messages' own count,
// exactly, at every moment: written by the real writers (outcomes, bounces, forwards), and for
// any sent times at all (the window's arithmetic at bucket edges, the backfill the migration
// and benchmarks use). Pruning must not change any count a claim can still ask for.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Job } from 'agenda';
import { sendingWorld, HOUR } from '../sending/world.ts';
import { recordForward } from '../../src/modules/messages/desk.ts';
import { accountSlots, lockAccounts, lockPool } from '../../src/modules/messages/claim.ts';
import { backfillTalliesSql, tallyWindow, usedSql, TALLY_BUCKET_MS } from '../../src/modules/messages/tallies.ts';
import { nativePlaceholders } from '../../src/db/sql.ts';
import { recurringJobs, type Workers } from '../../src/jobs/registry.ts';

const DAY = 24 * HOUR;

describe('messages: sent tallies count a rolling 24 hours exactly', function () {
  this.timeout(120_000);
  const w = sendingWorld();

  /** What the claim reads at `now` (lockPool, lockAccounts, accountSlots, in a transaction rolled back). */
  async function claimCounts(poolId: string, now: Date): Promise<{ pool: number; accounts: Map<string, number> }> {
    const em = w.app.deps.orm.em.fork();
    let out!: { pool: number; accounts: Map<string, number> };
    await em
      .transactional(async (tx) => {
        assert.ok(await lockPool(tx, poolId));
        const locked = await lockAccounts(tx, poolId, now);
        const accounts = await accountSlots(tx, locked.ids, now);
        out = { pool: locked.used, accounts: new Map(accounts.map((a) => [a.id, Number(a.used)])) };
        throw new Error('rollback');
      })
      .catch((e) => {
        if (e.message !== 'rollback') throw e;
      });
    return out;
  }

  /** The messages themselves, counted. */
  async function directCount(column: 'pool_id' | 'sender_account_id', owner: string, now: Date): Promise<number> {
    const { rows } = await w.db.query(`select count(*)::int as n from outbound_messages where ${column} = $1 and sent_at > $2`, [owner, new Date(now.getTime() - DAY)]);
    return rows[0].n;
  }

  it('outcomes, bounces and forwards are tallied as they are sent; the claim’s counts equal the messages’ at every edge of the day; pruning keeps them', async () => {
    w.clock.advance(2 * 60_000 + 13_500); // off the bucket grid
    const steps = [
      { subject: 'One', bodyHtml: '<p>1</p>' },
      { subject: 'Two', bodyHtml: '<p>2</p>' },
    ];
    const leads = Array.from({ length: 4 }, (_, i) => ({ email: `tally${i}@lead.example` }));
    w.sink.rcptAnswers.set('tally3@lead.example', [550, '5.1.1 no such user']);
    const t = await w.setup({ leads, steps, senders: [{ email: 'tally.a@acme.example', dailyLimit: 100 }, { email: 'tally.b@acme.example', dailyLimit: 100 }] });
    await w.dispatcher.runRound();
    w.clock.advance(4 * 60_000 + 59_999); // the next bucket, by a millisecond
    const more = await w.app.request('POST', `/v1/campaigns/${t.campaignId}/leads/bulk`, { key: t.key, body: { leads: [{ email: 'tally4@lead.example' }, { email: 'tally5@lead.example' }] } });
    assert.equal(more.status, 200);
    await w.dispatcher.runRound();
    await w.dispatcher.runRound();
    w.clock.advance(11 * 60_000);
    const { rows: [sent] } = await w.db.query(`select id, lead_id from outbound_messages where campaign_id = $1 and state = 'sent' limit 1`, [t.campaignId]);
    await w.app.deps.orm.em.fork().transactional((em) =>
      recordForward(
        em,
        { id: 'msg_tally_fwd', workspaceId: t.workspaceId, campaignId: t.campaignId, leadId: sent.lead_id, senderAccountId: t.senders[0], to: 'sdr@x.example', subject: 'Fwd: One', messageIdHeader: '<fwd.tally@x.example>', response: '250 ok' },
        w.clock.now(),
      ),
    );

    const { rows: msgs } = await w.db.query(`select state, kind, sent_at from outbound_messages where workspace_id = $1 and sent_at is not null order by sent_at`, [t.workspaceId]);
    // Campaign messages sent and one bounced, in two buckets, and the forward in a third.
    const kinds = msgs.map((m) => `${m.kind}:${m.state}`);
    assert.equal(kinds.filter((k) => k === 'campaign:bounced').length, 1, kinds.join());
    assert.equal(kinds.filter((k) => k === 'forward:sent').length, 1, kinds.join());
    assert.ok(kinds.filter((k) => k === 'campaign:sent').length >= 5, kinds.join());
    assert.equal(new Set(msgs.map((m) => Math.floor(new Date(m.sent_at).getTime() / TALLY_BUCKET_MS))).size, 3);
    // Every writer tallied under its own rows: the worker's outcomes, its bounces, the forward.
    const { rows: writers } = await w.db.query(`select distinct writer from sent_tallies where workspace_id = $1 order by 1`, [t.workspaceId]);
    assert.deepEqual(writers.map((r) => r.writer).sort(), [`bounce:${w.dispatcher.workerId}`, 'msg_tally_fwd', w.dispatcher.workerId].sort());

    // Every moment a message enters or leaves the window, a millisecond either side, and the
    // bucket edges around them.
    const moments = new Set<number>([w.clock.now().getTime()]);
    for (const m of msgs) {
      const s = new Date(m.sent_at).getTime();
      for (const d of [-1, 0, 1]) moments.add(s + DAY + d);
      const edge = Math.floor(s / TALLY_BUCKET_MS) * TALLY_BUCKET_MS + DAY;
      for (const d of [-1, 0, 1, TALLY_BUCKET_MS - 1, TALLY_BUCKET_MS]) moments.add(edge + d);
    }
    const check = async (label: string) => {
      for (const at of [...moments].sort((a, b) => a - b)) {
        const now = new Date(at);
        const got = await claimCounts(t.poolId, now);
        assert.equal(got.pool, await directCount('pool_id', t.poolId, now), `${label}: pool at ${now.toISOString()}`);
        for (const a of t.senders) assert.equal(got.accounts.get(a), await directCount('sender_account_id', a, now), `${label}: ${a} at ${now.toISOString()}`);
      }
    };
    await check('as sent');
    // Not a vacuous comparison: the day's sends are in the window at first, and out of it at the end.
    assert.equal((await claimCounts(t.poolId, w.clock.now())).pool, msgs.length - 1); // the forward has no pool
    assert.equal((await claimCounts(t.poolId, new Date(Math.max(...moments)))).pool, 0);

    // A day and a bit later the job prunes what no window reaches; every count from then on is unchanged.
    const job = recurringJobs({ deps: w.app.deps } as Workers).find((j) => j.name === 'tallies.prune');
    assert.ok(job, 'tallies.prune is registered');
    const rowsBefore = (await w.db.query(`select count(*)::int as n from sent_tallies where workspace_id = $1`, [t.workspaceId])).rows[0].n;
    w.clock.set(new Date(new Date(msgs[0].sent_at).getTime() + DAY + TALLY_BUCKET_MS + 1));
    const pruned = Number(await job.run({ touch: async () => {} } as unknown as Job));
    assert.ok(pruned >= 1, `pruned ${pruned}`);
    const rowsAfter = (await w.db.query(`select count(*)::int as n from sent_tallies where workspace_id = $1`, [t.workspaceId])).rows[0].n;
    assert.ok(rowsAfter < rowsBefore && rowsAfter > 0, `${rowsBefore} -> ${rowsAfter}`);
    for (const at of [...moments]) if (at < w.clock.now().getTime()) moments.delete(at);
    await check('after pruning');
  });

  it('for any sent times, the tallies (as backfilled) and the window’s edge bucket give the count of the messages', async () => {
    let run = 0;
    const base0 = Date.parse('2031-01-01T00:00:00Z');
    await fc.assert(
      fc.asyncProperty(
        // Sent times as a bucket (from 26 hours before `now` to one after) and a place in it,
        // often its first or last millisecond; `now` anywhere within a bucket.
        fc.array(
          fc.tuple(fc.integer({ min: -26 * 12, max: 12 }), fc.oneof(fc.constantFrom(0, 1, TALLY_BUCKET_MS - 1), fc.integer({ min: 0, max: TALLY_BUCKET_MS - 1 }))),
          { maxLength: 60 },
        ),
        fc.oneof(fc.constantFrom(0, 1, TALLY_BUCKET_MS - 1), fc.integer({ min: 0, max: TALLY_BUCKET_MS - 1 })),
        fc.boolean(),
        async (sent, nowOffset, exactEdges) => {
          run++;
          const base = base0 + run * 10 * DAY; // each run far from the others
          const now = base + nowOffset;
          let times = sent.map(([b, o]) => base + b * TALLY_BUCKET_MS + o);
          // Some runs put messages exactly on the window's start, and a millisecond either side.
          if (exactEdges) times = times.concat([now - DAY - 1, now - DAY, now - DAY + 1]);
          const pool = `pool_prop_${run}`;
          const account = `acc_prop_${run}`;
          await w.db.query(
            `insert into outbound_messages (id, workspace_id, campaign_id, step_index, kind, state, due_at, pool_id, sender_account_id, to_email, sent_at, created_at, updated_at)
             select 'msg_prop_' || $1::int || '_' || i, 'ws_prop', 'cmp_prop', i, 'campaign', 'sent', t, $2, $3, 'p@x.example', t, t, t
               from unnest($4::timestamptz[]) with ordinality as x(t, i)`,
            [run, pool, account, times.map((x) => new Date(x))],
          );
          await w.db.query(nativePlaceholders(backfillTalliesSql()), [new Date(base - 27 * HOUR)]);
          const win = tallyWindow(new Date(now));
          const expected = times.filter((x) => x > now - DAY).length;
          for (const [owner, column] of [[pool, 'pool_id'], [account, 'sender_account_id']] as const) {
            const { rows } = await w.db.query(nativePlaceholders(`select ${usedSql('?::text', column)}::int as used`), [owner, win.edgeEnd, owner, win.since, win.edgeEnd]);
            assert.equal(rows[0].used, expected, `${column} at ${new Date(now).toISOString()}`);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
