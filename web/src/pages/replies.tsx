// Replies: classification filters, each reply's snippet with its campaign and lead, the
// assignment to an SDR with the ICP gate's answer shown, and the operator's correction of a
// reply's classification (saying beforehand what the change does, and after what it did).
import { Fragment } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { ApiError, call, get, patch, post, qs } from '../api.ts';
import { Link, setQuery, useLocation } from '../router.tsx';
import { Ago, ErrorNote, Field, PageHead, Pager, Pill, useLoad, useFocusBackOnClose } from '../ui.tsx';
import type { Campaign, Page, Reply } from '../types.ts';
import { EMPLOYEE_COUNT_VALUES, SENIORITY_VALUES } from '../../../src/modules/sdrs/icp.ts';
import { OPERATOR_CLASSIFICATIONS, REPLY_CLASSIFICATIONS } from '../../../src/modules/inbound/classification.ts';

const CLASSES: readonly string[] = REPLY_CLASSIFICATIONS;
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
  // The one row form open: a reply's assignment or its classification.
  const [open, setOpen] = useState<{ id: string; form: 'assign' | 'classify' } | null>(null);
  const toggle = (id: string, form: 'assign' | 'classify') => setOpen(open?.id === id && open.form === form ? null : { id, form });
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
                        {r.reclassifiedAt && r.classifierClassification !== r.classification && (
                          <p class="muted">
                            classifier said {words(r.classifierClassification)}; changed <Ago at={r.reclassifiedAt} />
                          </p>
                        )}
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
                        <div class="row">
                          {(r.classification === 'interested' || r.classification === 'out_of_office' || r.classification === 'not_interested') && (
                            <button type="button" class="secondary" aria-expanded={open?.id === r.id && open.form === 'assign'} onClick={() => toggle(r.id, 'assign')}>
                              Assign…
                            </button>
                          )}
                          {reclassifiable(r) && (
                            <button type="button" class="secondary" aria-expanded={open?.id === r.id && open.form === 'classify'} onClick={() => toggle(r.id, 'classify')}>
                              Change class…
                            </button>
                          )}
                        </div>
                      </td>
                    </tr>
                    {open?.id === r.id && (
                      <tr>
                        <td colSpan={6}>
                          {open.form === 'assign' ? (
                            <Assign reply={r} sdrs={sdrs.data?.data} sdrsError={sdrs.error} onDone={() => setOpen(null)} onAssigned={() => void replies.reload()} />
                          ) : (
                            <Classify reply={r} campaign={nameOf(r.campaignId)} onDone={() => setOpen(null)} onChanged={() => void replies.reload()} />
                          )}
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

const words = (c: string) => c.replace(/_/g, ' ');

/**
 * Whether an operator may change the reply's class: not a bounce or a feedback-loop complaint
 * (a mail system's report, decided by `arf:`); the API refuses those with 409 either way.
 */
function reclassifiable(r: Reply): boolean {
  return r.classification !== 'bounce' && !r.decidedBy.startsWith('arf:');
}

/** What changing a reply from one class to another does, said before it is done (docs/dashboard.md). */
function changeWords(r: Reply, to: string, campaign: string): string {
  const human = (c: string) => c === 'interested' || c === 'not_interested' || c === 'unsubscribe';
  const parts: string[] = [];
  if (to === 'unsubscribe') parts.push(`Puts ${r.email} on the suppression list (no campaign mails the address again) and ends the lead's sequence in ${campaign}.`);
  else if (human(to) && !human(r.classification)) parts.push(`Ends the lead's sequence in ${campaign} (its waiting steps are cancelled), as their answer would have.`);
  if (human(to) && !human(r.classification)) parts.push('The lead counts in replied.');
  if (!human(to) && human(r.classification)) parts.push('The lead no longer counts in replied (unless another answer of theirs does); a sequence the reply stopped is not started again.');
  if (human(to) && human(r.classification) && to !== 'unsubscribe') parts.push('Changes the class only: the lead already counts in replied and their sequence already ended.');
  if (r.classification === 'unsubscribe') parts.push(`${r.email} stays on the suppression list: take it off on the Suppression page if the lead may be mailed again.`);
  return parts.join(' ');
}

interface Reclassified extends Reply {
  effects: { changed: boolean; from: string; replied: number; sequenceStopped: boolean; leadStatus: string | null; suppressed: boolean; addressSuppressed: boolean; notes: string[] };
}

function Classify({ reply, campaign, onDone, onChanged }: { reply: Reply; campaign: string; onDone: () => void; onChanged: () => void }) {
  useFocusBackOnClose();
  const [to, setTo] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [done, setDone] = useState<Reclassified | null>(null);
  const [busy, setBusy] = useState(false);
  const result = useRef<HTMLDivElement>(null);
  const targets = OPERATOR_CLASSIFICATIONS.filter((c) => c !== reply.classification);
  return (
    <form
      class="row-form"
      aria-label={`Change the class of the reply from ${reply.email}`}
      onSubmit={async (e) => {
        e.preventDefault();
        if (busy || !to) return;
        setError(undefined);
        setDone(null);
        setBusy(true);
        try {
          const r = await patch<Reclassified>(`/v1/replies/${reply.id}`, { classification: to });
          setDone(r);
          setTo('');
          onChanged();
          // The select's choices change with the class: the result takes the focus.
          setTimeout(() => result.current?.focus());
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <p>
        Now <strong>{words(reply.classification)}</strong>
        {reply.reclassifiedAt ? (
          <>
            {' '}
            (the classifier said {words(reply.classifierClassification)}; changed <Ago at={reply.reclassifiedAt} />)
          </>
        ) : (
          <> (the classifier's decision)</>
        )}
        .
      </p>
      <div class="row">
        <Field label="New class">
          <select name="classification" required value={to} onChange={(e) => setTo(e.currentTarget.value)}>
            <option value="">(choose)</option>
            {targets.map((c) => (
              <option key={c} value={c}>
                {words(c)}
              </option>
            ))}
          </select>
        </Field>
      </div>
      {/* Said as the choice changes (a live region: it is on the page before it speaks). */}
      <p data-testid="change-words" aria-live="polite">
        {to ? changeWords(reply, to, campaign) : ''}
      </p>
      <div class="row">
        <button type="submit" aria-disabled={busy || !to || undefined}>
          Change class
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          Close
        </button>
      </div>
      <div role="status" tabIndex={-1} ref={result}>
        {done && (
          <div class="ok">
            <p>
              {done.email}'s reply is {words(done.classification)} now (it was {words(done.effects.from)}).
              {done.effects.sequenceStopped ? ` Their sequence in ${campaign} was stopped.` : ''}
              {done.effects.replied > 0 ? ' The lead counts in replied.' : done.effects.replied < 0 ? ' The lead no longer counts in replied.' : ''}
              {done.effects.suppressed ? ` ${done.email} is on the suppression list.` : ''}
            </p>
            {done.effects.notes.map((n) => (
              <p key={n}>{n}</p>
            ))}
            {done.effects.from === 'unsubscribe' && done.effects.addressSuppressed && (
              <p>
                <Link href={`/suppression?q=${encodeURIComponent(done.email)}`}>Open {done.email} on the suppression list</Link>
              </p>
            )}
          </div>
        )}
      </div>
      <ErrorNote error={error} />
    </form>
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
