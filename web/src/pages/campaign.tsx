// One campaign: state and start/pause/resume, live stats and the time chart, the steps with a
// live preview, the schedule, the leads table and the CSV import.
import { useEffect, useState } from 'preact/hooks';
import { get, patch, post, qs } from '../api.ts';
import { Link, setQuery, useLocation } from '../router.tsx';
import { Action, Ago, ErrorNote, Field, Num, PageHead, Pager, Pill, pct, useLoad } from '../ui.tsx';
import { Timeline, STATS_POLL_MS } from './overview.tsx';
import { CsvImport } from './csv-import.tsx';
import type { Campaign, CampaignStats, Day, Enrollment, Page, SenderPool, SequenceStep } from '../types.ts';
import { BLOCKED } from '../types.ts';

const LEAD_STATUSES = ['active', 'completed', 'replied', 'bounced', 'unsubscribed', 'suppressed'];

export function CampaignPage({ id }: { id: string }) {
  const campaign = useLoad(() => get<Campaign>(`/v1/campaigns/${id}`), [id], STATS_POLL_MS);
  const stats = useLoad(() => get<CampaignStats>(`/v1/campaigns/${id}/stats`), [id], STATS_POLL_MS);
  const [leadsVersion, setLeadsVersion] = useState(0);
  const c = campaign.data;
  if (campaign.error && !c) {
    return (
      <>
        <PageHead title="Campaign" />
        <ErrorNote error={campaign.error} />
        <Link href="/">Back to the overview</Link>
      </>
    );
  }
  if (!c) return <p class="loading">Loading…</p>;
  const s = stats.data;
  const startOrResume = async () => {
    await post(`/v1/campaigns/${id}/start`);
    await Promise.all([campaign.reload(), stats.reload()]);
  };
  return (
    <>
      <PageHead title={c.name}>
        <Pill state={c.status} />
        {c.status === 'draft' && <Action run={startOrResume}>Start</Action>}
        {c.status === 'paused' && <Action run={startOrResume}>Resume</Action>}
        {c.status === 'running' && (
          <Action
            class="secondary"
            run={async () => {
              await post(`/v1/campaigns/${id}/pause`);
              await campaign.reload();
            }}
          >
            Pause
          </Action>
        )}
      </PageHead>
      <p class="muted">
        <code>{c.id}</code> · created <Ago at={c.createdAt} /> {c.startedAt && <>· started <Ago at={c.startedAt} /></>} {c.pausedAt && c.status === 'paused' && <>· paused <Ago at={c.pausedAt} /></>}
      </p>
      {s && (
        <div class="stats" aria-label="Campaign stats" role="group">
          <Stat label="enrolled" n={s.totalEnrolled} href={`/campaigns/${id}`} />
          <Stat label="queued" n={s.queued} />
          <Stat label="sent" n={s.sent} />
          <Stat label="delivered" n={s.delivered} />
          <Stat label="opened" n={s.opened} extra={pct(s.openRate)} />
          <Stat label="replied" n={s.replied} extra={pct(s.replyRate)} href={`/campaigns/${id}?status=replied#leads`} />
          <Stat label="bounced" n={s.bounced} href={`/campaigns/${id}?status=bounced#leads`} />
          <Stat label="unsubscribed" n={s.unsubscribed} href={`/campaigns/${id}?status=unsubscribed#leads`} />
        </div>
      )}
      {s?.blockedReason && c.status === 'running' && (
        <p class={BLOCKED[s.blockedReason].needsOperator ? 'error' : 'hint'} role="status">
          {BLOCKED[s.blockedReason].long}
        </p>
      )}
      <Timeline campaigns={[c]} campaignId={id} fixed />
      <Steps campaign={c} onSaved={campaign.reload} />
      <Settings campaign={c} onSaved={campaign.reload} />
      <Leads id={id} version={leadsVersion} />
      <CsvImport
        campaignId={id}
        onImported={() => {
          setLeadsVersion((v) => v + 1);
          void stats.reload();
        }}
      />
    </>
  );
}

function Stat({ label, n, extra, href }: { label: string; n: number; extra?: string; href?: string }) {
  return (
    <div class="stat" data-stat={label}>
      <div class="n">{href ? <Link href={href}>{n.toLocaleString('en')}</Link> : <Num n={n} />}</div>
      <div class="l">
        {label}
        {extra ? ` · ${extra}` : ''}
      </div>
    </div>
  );
}

interface Preview {
  subject: string;
  html: string;
  text: string;
  lead: { source: 'lead' | 'inline' | 'first_enrolled' | 'sample'; leadId: string | null; email: string };
}

function Steps({ campaign, onSaved }: { campaign: Campaign; onSaved: () => Promise<void> }) {
  const [steps, setSteps] = useState<SequenceStep[]>(() => campaign.sequenceSteps.map((s) => ({ subject: s.subject, bodyHtml: s.bodyHtml, delayHours: s.delayHours })));
  const [open, setOpen] = useState(0);
  const [saved, setSaved] = useState('');
  const locked = campaign.status === 'running';
  const dirty = JSON.stringify(steps) !== JSON.stringify(campaign.sequenceSteps.map((s) => ({ subject: s.subject, bodyHtml: s.bodyHtml, delayHours: s.delayHours })));
  const update = (i: number, change: Partial<SequenceStep>) => setSteps(steps.map((s, j) => (j === i ? { ...s, ...change } : s)));
  return (
    <section class="card" aria-labelledby="steps-h">
      <h2 id="steps-h">Steps</h2>
      {locked && <p class="muted">Steps cannot change while the campaign runs: pause it to edit them.</p>}
      {steps.length === 0 && <p>No steps yet: a campaign needs at least one step to start.</p>}
      {steps.map((s, i) => (
        <details key={i} open={open === i} onToggle={(e) => e.currentTarget.open && setOpen(i)} class="card">
          <summary>
            Step {i + 1}: {s.subject || '(no subject)'} {i > 0 && <span class="muted">— {s.delayHours} h after the previous step</span>}
          </summary>
          <div class="grid2">
            <div>
              <Field label={`Step ${i + 1} subject`}>
                <input value={s.subject} disabled={locked} onInput={(e) => update(i, { subject: e.currentTarget.value })} />
              </Field>
              <Field label={`Step ${i + 1} delay (hours after the previous step)`}>
                <input type="number" min={0} step="any" value={s.delayHours} disabled={locked || i === 0} onInput={(e) => update(i, { delayHours: Number(e.currentTarget.value) })} />
              </Field>
              <Field label={`Step ${i + 1} HTML body`} hint="Tokens: {{firstName}} {{company}} {{jobTitle}} {{email}} and any custom field.">
                <textarea rows={12} value={s.bodyHtml} disabled={locked} onInput={(e) => update(i, { bodyHtml: e.currentTarget.value })} />
              </Field>
              {!locked && (
                <button type="button" class="secondary" onClick={() => setSteps(steps.filter((_, j) => j !== i))}>
                  Remove step {i + 1}
                </button>
              )}
            </div>
            {open === i && <StepPreview campaignId={campaign.id} step={s} />}
          </div>
        </details>
      ))}
      {!locked && (
        <div class="row">
          <button
            type="button"
            class="secondary"
            onClick={() => {
              setSteps([...steps, { subject: '', bodyHtml: '', delayHours: steps.length ? 72 : 0 }]);
              setOpen(steps.length);
            }}
          >
            Add a step
          </button>
          <Action
            disabled={!dirty}
            run={async () => {
              setSaved('');
              await patch(`/v1/campaigns/${campaign.id}`, { sequenceSteps: steps });
              await onSaved();
              setSaved('Steps saved.');
            }}
          >
            Save steps
          </Action>
          <span role="status" class="muted">
            {saved && !dirty ? saved : dirty ? 'Unsaved changes.' : ''}
          </span>
        </div>
      )}
    </section>
  );
}

/** The step rendered by the server's own renderer with a sample lead's tokens, in a sandboxed frame. */
function StepPreview({ campaignId, step }: { campaignId: string; step: SequenceStep }) {
  const [preview, setPreview] = useState<Preview | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    if (!step.subject.trim() || !step.bodyHtml.trim()) {
      setPreview(undefined);
      setError(undefined);
      return;
    }
    const t = setTimeout(async () => {
      try {
        setPreview(await post<Preview>(`/v1/campaigns/${campaignId}/preview`, { subject: step.subject, bodyHtml: step.bodyHtml }));
        setError(undefined);
      } catch (e) {
        setError(e);
      }
    }, 300);
    return () => clearTimeout(t);
  }, [campaignId, step.subject, step.bodyHtml]);
  return (
    <div aria-live="polite">
      <h3>Preview</h3>
      <ErrorNote error={error} />
      {!preview && !error && <p class="muted">Write a subject and a body to see them rendered.</p>}
      {preview && (
        <>
          <p class="muted">
            Rendered for {preview.lead.email} ({preview.lead.source === 'sample' ? 'a sample lead: import leads to preview with a real one' : 'the first enrolled lead'})
          </p>
          <p>
            <strong>Subject:</strong> <span data-testid="preview-subject">{preview.subject}</span>
          </p>
          <iframe class="preview" sandbox="" title="Rendered HTML body" srcdoc={preview.html} />
        </>
      )}
    </div>
  );
}

const DAYS: Day[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

function Settings({ campaign, onSaved }: { campaign: Campaign; onSaved: () => Promise<void> }) {
  const pools = useLoad(() => get<SenderPool[]>('/v1/sender-pools'), []);
  const [pool, setPool] = useState(campaign.senderPoolId ?? '');
  const [useSchedule, setUseSchedule] = useState(!!campaign.schedule);
  const [sched, setSched] = useState(campaign.schedule ?? { timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC', days: ['mon', 'tue', 'wed', 'thu', 'fri'] as Day[], start: '09:00', end: '17:00' });
  const [trackOpens, setTrackOpens] = useState(campaign.trackOpens);
  const [saved, setSaved] = useState('');
  return (
    <section class="card" aria-labelledby="settings-h">
      <h2 id="settings-h">Schedule and sending</h2>
      <div class="row">
        <Field label="Sender pool">
          <select value={pool} onChange={(e) => setPool(e.currentTarget.value)}>
            <option value="">(none: the campaign cannot send)</option>
            {pools.data?.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name} ({p.remainingVolume} of {p.dailyCapacity} left today)
              </option>
            ))}
          </select>
        </Field>
        <label class="checks">
          <input type="checkbox" checked={trackOpens} onChange={(e) => setTrackOpens(e.currentTarget.checked)} /> Track opens
        </label>
        <label class="checks">
          <input type="checkbox" checked={useSchedule} onChange={(e) => setUseSchedule(e.currentTarget.checked)} /> Send only inside a window
        </label>
      </div>
      {useSchedule && (
        <fieldset>
          <legend>Sending window</legend>
          <div class="row">
            <Field label="Time zone">
              <input value={sched.timezone} onInput={(e) => setSched({ ...sched, timezone: e.currentTarget.value })} />
            </Field>
            <Field label="From">
              <input type="time" value={sched.start} onInput={(e) => setSched({ ...sched, start: e.currentTarget.value })} />
            </Field>
            <Field label="To">
              <input type="time" value={sched.end} onInput={(e) => setSched({ ...sched, end: e.currentTarget.value })} />
            </Field>
          </div>
          <div class="checks" role="group" aria-label="Days">
            {DAYS.map((d) => (
              <label key={d}>
                <input type="checkbox" checked={sched.days.includes(d)} onChange={(e) => setSched({ ...sched, days: e.currentTarget.checked ? DAYS.filter((x) => x === d || sched.days.includes(x)) : sched.days.filter((x) => x !== d) })} />
                {d}
              </label>
            ))}
          </div>
        </fieldset>
      )}
      <div class="row">
        <Action
          run={async () => {
            setSaved('');
            await patch(`/v1/campaigns/${campaign.id}`, { senderPoolId: pool || null, trackOpens, schedule: useSchedule ? sched : null });
            await onSaved();
            setSaved('Saved.');
          }}
        >
          Save schedule and sending
        </Action>
        <span role="status" class="muted">
          {saved}
        </span>
      </div>
    </section>
  );
}

const LEADS_PAGE = 50;

function Leads({ id, version }: { id: string; version: number }) {
  const { query } = useLocation();
  const status = query.get('status') ?? '';
  const q = query.get('q') ?? '';
  const offset = Number(query.get('offset') ?? 0) || 0;
  const [search, setSearch] = useState(q);
  const leads = useLoad(() => get<Page<Enrollment>>(`/v1/campaigns/${id}/leads${qs({ limit: LEADS_PAGE, offset, status, q })}`), [id, status, q, offset, version], STATS_POLL_MS * 2);
  return (
    <section class="card" aria-labelledby="leads-h" id="leads">
      <h2 id="leads-h">Leads</h2>
      <form
        class="row"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setQuery({ q: search.trim() || null, offset: null });
        }}
      >
        <Field label="Search leads">
          <input type="search" value={search} placeholder="email, name or company" onInput={(e) => setSearch(e.currentTarget.value)} />
        </Field>
        <Field label="State">
          <select value={status} onChange={(e) => setQuery({ status: e.currentTarget.value || null, offset: null })}>
            <option value="">all</option>
            {LEAD_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Search</button>
      </form>
      <ErrorNote error={leads.error} />
      {leads.data && leads.data.total === 0 && <p>No leads{q || status ? ' match' : ' yet: import a CSV file below'}.</p>}
      {leads.data && leads.data.total > 0 && (
        <>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">email</th>
                  <th scope="col">name</th>
                  <th scope="col">company</th>
                  <th scope="col">state</th>
                  <th scope="col" class="num">step</th>
                  <th scope="col">last event</th>
                  <th scope="col">next send</th>
                </tr>
              </thead>
              <tbody>
                {leads.data.data.map((l) => (
                  <tr key={l.enrollmentId}>
                    <td>{l.email}</td>
                    <td>{[l.firstName, l.lastName].filter(Boolean).join(' ')}</td>
                    <td>{l.company}</td>
                    <td>
                      <Pill state={l.status} />
                      {l.failureReason && <div class="hint">{l.failureReason}</div>}
                    </td>
                    <td class="num">{l.currentStep === null ? '—' : l.currentStep + 1}</td>
                    <td>
                      {l.lastEvent ? (
                        <>
                          {l.lastEvent.replace(/_/g, ' ')} <Ago at={l.lastEventAt} />
                        </>
                      ) : (
                        <span class="muted">—</span>
                      )}
                    </td>
                    <td>
                      <Ago at={l.nextSendAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager label="Leads" total={leads.data.total} limit={LEADS_PAGE} offset={offset} onChange={(o) => setQuery({ offset: o || null })} />
        </>
      )}
    </section>
  );
}
