// Replies: classification filters, each reply's snippet with its campaign and lead, and the
// assignment to an SDR with the ICP gate's answer shown.
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, call, get, post, qs } from '../api.ts';
import { Link, setQuery, useLocation } from '../router.tsx';
import { Ago, ErrorNote, Field, PageHead, Pager, Pill, useLoad, useFocusBackOnClose } from '../ui.tsx';
import type { Campaign, Page, Reply } from '../types.ts';
import { EMPLOYEE_COUNT_VALUES, SENIORITY_VALUES } from '../../../src/modules/sdrs/icp.ts';

const CLASSES = ['interested', 'not_interested', 'out_of_office', 'bounce', 'unsubscribe'];
const PAGE = 50;

interface SdrRow {
  id: string;
  name: string;
  email: string;
  active: boolean;
  mailConnected: boolean;
  healthState?: string;
}

export function RepliesPage() {
  const { query } = useLocation();
  const classification = query.get('classification') ?? '';
  const campaignId = query.get('campaignId') ?? '';
  const offset = Number(query.get('offset') ?? 0) || 0;
  const replies = useLoad(
    async () => {
      const { body, headers } = await call<Reply[]>('GET', `/v1/replies${qs({ classification, campaignId, page: Math.floor(offset / PAGE) + 1, pageSize: PAGE })}`);
      return { data: body, total: Number(headers.get('x-total-count') ?? body.length) };
    },
    [classification, campaignId, offset],
    10_000,
  );
  const campaigns = useLoad(() => get<Page<Campaign>>('/v1/campaigns?limit=200'), []);
  const sdrs = useLoad(() => get<Page<SdrRow>>('/v1/sdr-profiles?active=true&limit=200'), []);
  const [open, setOpen] = useState<string | null>(null);
  const nameOf = (id: string) => campaigns.data?.data.find((c) => c.id === id)?.name ?? id;
  // The rows wait for the campaigns too, so a campaign's column never shows its id first and
  // its name a moment later (a failed campaign list still shows the rows, with the ids).
  const campaignsSettled = campaigns.data !== undefined || !campaigns.loading;
  return (
    <>
      <PageHead title="Replies" />
      <div class="row" role="group" aria-label="Filters">
        <Field label="Classification">
          <select value={classification} onChange={(e) => setQuery({ classification: e.currentTarget.value || null, offset: null })}>
            <option value="">all</option>
            {CLASSES.map((c) => (
              <option key={c} value={c}>
                {c.replace(/_/g, ' ')}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Campaign">
          <select value={campaignId} onChange={(e) => setQuery({ campaignId: e.currentTarget.value || null, offset: null })}>
            <option value="">all</option>
            {campaigns.data?.data.map((c) => (
              <option key={c.id} value={c.id}>
                {c.name}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <ErrorNote error={replies.error} />
      {replies.data?.total === 0 && <p>No replies{classification || campaignId ? ' match the filters' : ' yet'}.</p>}
      {replies.data && replies.data.total > 0 && campaignsSettled && (
        <section class="card" aria-label="Replies">
          <div class="table-wrap has-row-forms">
            <table>
              <thead>
                <tr>
                  <th scope="col">from</th>
                  <th scope="col">class</th>
                  <th scope="col">snippet</th>
                  <th scope="col">campaign</th>
                  <th scope="col">received</th>
                  <th scope="col">
                    <span class="sr-only">actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {replies.data.data.map((r) => (
                  <Fragment key={r.id}>
                    <tr data-reply={r.id}>
                      <td>{r.email}</td>
                      <td>
                        <Pill state={r.classification} />
                      </td>
                      <td class="mailtext">{r.threadSnippet}</td>
                      <td>
                        <Link href={`/campaigns/${r.campaignId}?q=${encodeURIComponent(r.email)}#leads`}>{nameOf(r.campaignId)}</Link>
                      </td>
                      <td>
                        <Ago at={r.receivedAt} />
                      </td>
                      <td>
                        {r.assignedTo.length > 0 && <p class="muted">With {r.assignedTo.map((a) => a.name).join(', ')}</p>}
                        {(r.classification === 'interested' || r.classification === 'out_of_office' || r.classification === 'not_interested') && (
                          <button type="button" class="secondary" aria-expanded={open === r.id} onClick={() => setOpen(open === r.id ? null : r.id)}>
                            Assign…
                          </button>
                        )}
                      </td>
                    </tr>
                    {open === r.id && (
                      <tr>
                        <td colSpan={6}>
                          <Assign reply={r} sdrs={sdrs.data?.data} sdrsError={sdrs.error} onDone={() => setOpen(null)} onAssigned={() => void replies.reload()} />
                        </td>
                      </tr>
                    )}
                  </Fragment>
                ))}
              </tbody>
            </table>
          </div>
          <Pager label="Replies" total={replies.data.total} limit={PAGE} offset={offset} onChange={(o) => setQuery({ offset: o || null })} />
        </section>
      )}
    </>
  );
}

function Assign({ reply, sdrs, sdrsError, onDone, onAssigned }: { reply: Reply; sdrs: SdrRow[] | undefined; sdrsError: unknown; onDone: () => void; onAssigned: () => void }) {
  useFocusBackOnClose();
  const [error, setError] = useState<unknown>(undefined);
  const [icp, setIcp] = useState('');
  const [done, setDone] = useState('');
  const [skip, setSkip] = useState(false);
  const [busy, setBusy] = useState(false);
  // The SDRs not there (yet): a failed list says why, never "no active SDR".
  if (!sdrs) return sdrsError ? <ErrorNote error={sdrsError} prefix="Could not load the SDRs" /> : <p class="muted">Loading the SDRs…</p>;
  if (sdrs.length === 0)
    return (
      <p>
        No active SDR to assign to: <Link href="/sdrs">add an SDR</Link> first.
      </p>
    );
  return (
    <form
      class="row-form"
      aria-label={`Assign the reply from ${reply.email}`}
      onSubmit={async (e) => {
        e.preventDefault();
        if (busy) return;
        const f = new FormData(e.currentTarget);
        const s = (k: string) => String(f.get(k) ?? '').trim();
        setError(undefined);
        setIcp('');
        setDone('');
        setBusy(true);
        try {
          const r = await post<{ data: { threadId: string } }>(`/v1/replies/${reply.id}/assign`, {
            sdrId: s('sdrId'),
            // Not chosen: the server's default (B for a new thread; a thread the SDR has keeps its own).
            ...(s('category') ? { category: s('category') } : {}),
            ...(s('note') ? { note: s('note') } : {}),
            ...(skip ? { skipIcpCheck: true } : { seniority: s('seniority'), employeeCount: s('employeeCount') }),
            ...(f.get('forceForward') === 'on' ? { forceForward: true } : {}),
          });
          setDone(`Forwarded to ${sdrs.find((x) => x.id === s('sdrId'))?.name}: the thread ${r.data.threadId} is in their inbox.`);
          // The row says who has the reply now.
          onAssigned();
        } catch (err) {
          if (err instanceof ApiError && err.code === 'icp_failed')
            setIcp(`The ICP gate said no: ${err.message} (answered: seniority ${s('seniority')}, ${s('employeeCount')} employees). Change the answers, or skip the ICP check if this lead should go through anyway.`);
          else if (err instanceof ApiError && err.code === 'already_forwarded') {
            const at = /\(([^)]+)\)/.exec(err.message)?.[1];
            const when = at && !Number.isNaN(Date.parse(at)) ? ` on ${new Date(at).toLocaleString('en')}` : '';
            setError(new Error(`This reply was already forwarded${when}, so nothing was sent. To send it again (to this or another SDR), tick "Forward again if already forwarded" and assign again.`));
          } else setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <div class="row">
        <Field label="SDR">
          <select name="sdrId">
            {sdrs.map((s) => (
              <option key={s.id} value={s.id}>
                {s.name}
                {s.mailConnected ? '' : ` (mail ${!s.healthState || s.healthState === 'disconnected' ? 'not connected' : s.healthState.replace(/_/g, ' ')})`}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Category" hint="default: B, or the thread's own">
          <select name="category">
            <option value="">default</option>
            <option value="A">A</option>
            <option value="B">B</option>
            <option value="C">C</option>
          </select>
        </Field>
        <Field label="Seniority" hint="asked by the ICP gate">
          <select name="seniority" required={!skip} disabled={skip}>
            <option value="">(choose)</option>
            {SENIORITY_VALUES.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Employee count" hint="asked by the ICP gate">
          <select name="employeeCount" required={!skip} disabled={skip}>
            <option value="">(choose)</option>
            {EMPLOYEE_COUNT_VALUES.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <div class="row">
        <Field label="Note for the SDR">
          <input name="note" />
        </Field>
        <label class="checks">
          <input type="checkbox" checked={skip} onChange={(e) => setSkip(e.currentTarget.checked)} /> Skip the ICP check
        </label>
        <label class="checks">
          <input type="checkbox" name="forceForward" /> Forward again if already forwarded
        </label>
      </div>
      <div class="row">
        <button type="submit" aria-disabled={busy || undefined}>
          Assign and forward
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          Close
        </button>
      </div>
      {icp && (
        <p class="error" role="alert" data-testid="icp-answer">
          {icp}
        </p>
      )}
      {done && (
        <p class="ok" role="status">
          {done}
        </p>
      )}
      <ErrorNote error={error} />
    </form>
  );
}
