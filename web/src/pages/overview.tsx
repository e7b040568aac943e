// Admin overview: every campaign with its status and live stats, refreshed in place, and the
// time chart of one campaign.
import { useState } from 'preact/hooks';
import { get, post, qs } from '../api.ts';
import { Link, navigate, setQuery, useLocation } from '../router.tsx';
import { Ago, Empty, ErrorNote, Field, Num, PageHead, Pager, Pill, formValues, pct, useLoad, useFocusBackOnClose } from '../ui.tsx';
import { TimelineChart, type TimelinePoint } from '../chart.tsx';
import type { Campaign, CampaignStats, Page } from '../types.ts';
import { BLOCKED } from '../types.ts';

export const STATS_POLL_MS = 10_000;
const PAGE = 20;

export function Overview() {
  const { query } = useLocation();
  const offset = Number(query.get('offset') ?? 0) || 0;
  const campaigns = useLoad(
    async () => {
      const page = await get<Page<Campaign>>(`/v1/campaigns${qs({ limit: PAGE, offset })}`);
      const stats = await Promise.all(page.data.map((c) => get<CampaignStats>(`/v1/campaigns/${c.id}/stats`)));
      return { ...page, stats: Object.fromEntries(stats.map((s) => [s.campaignId, s])) as Record<string, CampaignStats> };
    },
    [offset],
    STATS_POLL_MS,
  );
  const senders = useLoad(() => get<unknown[]>('/v1/sender-accounts'), []);
  const [creating, setCreating] = useState(false);
  const list = campaigns.data;
  const chartId = query.get('chart') ?? list?.data.find((c) => c.status === 'running')?.id ?? list?.data[0]?.id;

  return (
    <>
      <PageHead title="Overview">
        <button type="button" onClick={() => setCreating(true)}>
          New campaign
        </button>
      </PageHead>
      {creating && <NewCampaign onCancel={() => setCreating(false)} />}
      <ErrorNote error={campaigns.error} prefix="Could not load the campaigns" />
      {list && list.total === 0 && (
        <Empty>
          <h2>No campaigns yet</h2>
          <ol>
            <li>
              Add a sender account (an SMTP mailbox mailgate sends from){senders.data && senders.data.length > 0 ? ` — you have ${senders.data.length}` : ''}: <Link href="/senders">Senders</Link>.
            </li>
            <li>
              Group senders into a pool that sets the daily capacity: <Link href="/senders">Senders → pools</Link>.
            </li>
            <li>Create a campaign, write its steps, import leads from a CSV file and start it.</li>
          </ol>
          <button type="button" onClick={() => setCreating(true)}>
            Create the first campaign
          </button>
        </Empty>
      )}
      {list && list.total > 0 && (
        <section class="card" aria-labelledby="campaigns-h">
          <h2 id="campaigns-h">
            Campaigns <span class="muted">(updated every {STATS_POLL_MS / 1000} s)</span>
          </h2>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">campaign</th>
                  <th scope="col">status</th>
                  <th scope="col" class="num">leads</th>
                  <th scope="col" class="num">queued</th>
                  <th scope="col" class="num">sent</th>
                  <th scope="col" class="num">delivered</th>
                  <th scope="col" class="num">opened</th>
                  <th scope="col" class="num">replied</th>
                  <th scope="col" class="num">bounced messages</th>
                  <th scope="col">started</th>
                </tr>
              </thead>
              <tbody>
                {list.data.map((c) => {
                  const s = list.stats[c.id];
                  const to = (filter?: string) => `/campaigns/${c.id}${filter ? `?${filter}` : ''}`;
                  return (
                    <tr key={c.id} data-campaign={c.id}>
                      <td>
                        <Link href={to()}>{c.name}</Link>
                      </td>
                      <td>
                        <Pill state={c.status} />
                        {s?.blockedReason && c.status === 'running' && (
                          <span class="hint"> {BLOCKED[s.blockedReason].short}</span>
                        )}
                      </td>
                      <td class="num">
                        <Link href={to()}>
                          <Num n={s?.totalEnrolled} />
                        </Link>
                      </td>
                      <td class="num" data-stat="queued">
                        <Num n={s?.queued} />
                      </td>
                      <td class="num" data-stat="sent">
                        <Num n={s?.sent} />
                      </td>
                      <td class="num" data-stat="delivered">
                        <Num n={s?.delivered} />
                      </td>
                      <td class="num" data-stat="opened" title={s ? `open rate ${pct(s.openRate)}` : undefined}>
                        <Num n={s?.opened} />
                      </td>
                      <td class="num" data-stat="replied">
                        {/* The leads `replied` counts, whatever their state now (an unsubscribe reply leaves its lead unsubscribed). */}
                        <Link href={to('replied=true')}>
                          <Num n={s?.replied} />
                        </Link>
                      </td>
                      <td class="num" data-stat="bounced">
                        {/* Messages, as the campaign's `bounced` counts them; the link opens the leads they went to, whatever their state now. */}
                        <Link href={to('bounced=true')}>
                          <Num n={s?.bounced} />
                        </Link>
                      </td>
                      <td>
                        <Ago at={c.startedAt} empty="not started" />
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
          <Pager label="Campaigns" total={list.total} limit={PAGE} offset={offset} onChange={(o) => setQuery({ offset: o || null })} />
        </section>
      )}
      {list && chartId && <Timeline campaigns={list.data} campaignId={chartId} />}
    </>
  );
}

/** What the timeline covers without from/to (docs/dashboard.md): its legend's totals say so. */
const TIMELINE_PERIOD = { hour: 'the last 48 hours', day: 'the last 30 days' } as const;

export function Timeline({ campaigns, campaignId, fixed }: { campaigns: Campaign[]; campaignId: string; fixed?: boolean }) {
  // In the address, as the chosen campaign is: a reload or a shared link keeps it.
  const { query } = useLocation();
  const bucket = query.get('bucket') === 'day' ? 'day' : 'hour';
  const setBucket = (b: 'hour' | 'day') => setQuery({ bucket: b === 'day' ? b : null });
  const timeline = useLoad(() => get<{ data: TimelinePoint[] }>(`/v1/campaigns/${campaignId}/timeline${qs({ bucket })}`), [campaignId, bucket], STATS_POLL_MS);
  const name = campaigns.find((c) => c.id === campaignId)?.name ?? campaignId;
  return (
    <section class="card" aria-labelledby="timeline-h">
      <div class="row">
        <h2 id="timeline-h">Activity{fixed ? '' : `: ${name}`}</h2>
        <div class="page-actions">
          {!fixed && (
              <select aria-label="Campaign" value={campaignId} onChange={(e) => setQuery({ chart: e.currentTarget.value })}>
                {campaigns.map((c) => (
                  <option key={c.id} value={c.id}>
                    {c.name}
                  </option>
                ))}
              </select>
          )}
            <select aria-label="Bucket" value={bucket} onChange={(e) => setBucket(e.currentTarget.value as 'hour' | 'day')}>
              <option value="hour">per hour, last 48 hours</option>
              <option value="day">per day, last 30 days</option>
            </select>
        </div>
      </div>
      <ErrorNote error={timeline.error} prefix="Could not load the timeline" />
      {timeline.data && <TimelineChart points={timeline.data.data} label={`Activity of ${name} per ${bucket}`} period={TIMELINE_PERIOD[bucket]} />}
    </section>
  );
}

function NewCampaign({ onCancel }: { onCancel: () => void }) {
  useFocusBackOnClose();
  const [error, setError] = useState<unknown>(undefined);
  // One campaign per press (a double click made two drafts).
  const [busy, setBusy] = useState(false);
  const pools = useLoad(() => get<{ id: string; name: string }[]>('/v1/sender-pools'), []);
  return (
    <section class="card" aria-labelledby="new-campaign-h">
      <h2 id="new-campaign-h">New campaign</h2>
      <form
        onSubmit={async (e) => {
          const v = formValues(e);
          if (busy) return;
          setBusy(true);
          setError(undefined);
          try {
            const c = await post<Campaign>('/v1/campaigns', { name: v.name, ...(v.pool ? { senderPoolId: v.pool } : {}) });
            navigate(`/campaigns/${c.id}`);
          } catch (err) {
            setError(err);
            setBusy(false);
          }
        }}
      >
        <div class="row">
          <Field label="Name">
            <input name="name" required maxLength={200} />
          </Field>
          <Field label="Sender pool">
            <select name="pool">
              <option value="">(choose later)</option>
              {pools.data?.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <div class="row">
          <button type="submit" aria-disabled={busy || undefined}>
            Create draft
          </button>
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel
          </button>
        </div>
        <ErrorNote error={error} />
      </form>
    </section>
  );
}
