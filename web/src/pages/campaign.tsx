// One campaign: state and start/pause/resume, live stats and the time chart, the steps with a
// live preview, the schedule, the leads table and the CSV import.
import { useEffect, useRef, useState } from 'preact/hooks';
import { del, fieldErrors, get, patch, post, qs } from '../api.ts';
import { Link, setQuery, useLocation } from '../router.tsx';
import { Action, ActionRow, Ago, ErrorNote, Field, Num, PageHead, Pager, Pill, pct, useLoad, useResultNote, useUnsentText } from '../ui.tsx';
import { Timeline, STATS_POLL_MS } from './overview.tsx';
import { CsvImport } from './csv-import.tsx';
import type { Campaign, CampaignStats, Day, Enrollment, Page, SenderPool, SequenceStep } from '../types.ts';
import { BLOCKED } from '../types.ts';

const LEAD_STATUSES = ['active', 'completed', 'replied', 'bounced', 'unsubscribed', 'suppressed', 'removed'];
/** The states in which a lead may still get mail from the campaign: those the Remove control ends. */
const REMOVABLE = new Set(['active', 'suppressed']);

export function CampaignPage({ id }: { id: string }) {
  const campaign = useLoad(() => get<Campaign>(`/v1/campaigns/${id}`), [id], STATS_POLL_MS);
  const stats = useLoad(() => get<CampaignStats>(`/v1/campaigns/${id}/stats`), [id], STATS_POLL_MS);
  const [leadsVersion, setLeadsVersion] = useState(0);
  // Step edits not saved yet: Start and Resume send the saved steps, so they wait for a save.
  const [stepsDirty, setStepsDirty] = useState(false);
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
    // Started as they are, the saved steps (or none: "no sequence steps") went out while the
    // page showed other text, and a running campaign's steps cannot change.
    if (stepsDirty) throw new Error(`The steps have changes that are not saved, and the campaign sends the saved ones: press Save steps (or undo the changes), then ${c.status === 'paused' ? 'Resume' : 'Start'}.`);
    await post(`/v1/campaigns/${id}/start`);
    // Starting queues the first step of every lead: the leads table shows it now, not at its next poll.
    setLeadsVersion((v) => v + 1);
    await Promise.all([campaign.reload(), stats.reload()]);
  };
  const pause = async () => {
    await post(`/v1/campaigns/${id}/pause`);
    setLeadsVersion((v) => v + 1);
    await campaign.reload();
  };
  return (
    <>
      <PageHead title={c.name}>
        <Pill state={c.status} />
        {/* One button that changes its word: keyboard focus stays on it from Start to Pause to Resume. */}
        <Action
          class={c.status === 'running' ? 'secondary' : undefined}
          name={c.status === 'draft' ? 'Start' : c.status === 'paused' ? 'Resume' : 'Pause'}
          resetOn={`${c.status} ${s?.totalEnrolled} ${c.sequenceSteps.length} ${c.senderPoolId} ${stepsDirty}`}
          run={c.status === 'running' ? pause : startOrResume}
        >
          {c.status === 'draft' ? 'Start' : c.status === 'paused' ? 'Resume' : 'Pause'}
        </Action>
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
          {/* The leads `replied` counts, whatever their state now (an unsubscribe reply leaves its lead unsubscribed). */}
          <Stat label="replied" n={s.replied} extra={pct(s.replyRate)} href={`/campaigns/${id}?replied=true#leads`} />
          {/* `bounced` counts messages (contract §4: hard + soft bounces), and says so; it opens the leads they went to, whatever their state now. */}
          <Stat name="bounced" label="bounced messages" n={s.bounced} href={`/campaigns/${id}?bounced=true#leads`} />
          <Stat label="unsubscribed" n={s.unsubscribed} href={`/campaigns/${id}?status=unsubscribed#leads`} />
        </div>
      )}
      {s?.blockedReason && c.status === 'running' && (
        <p class={BLOCKED[s.blockedReason].needsOperator ? 'error' : 'hint'} role="status">
          {BLOCKED[s.blockedReason].long}
        </p>
      )}
      <Timeline campaigns={[c]} campaignId={id} fixed />
      <Steps campaign={c} onSaved={campaign.reload} onDirty={setStepsDirty} />
      <Settings campaign={c} onSaved={campaign.reload} />
      <Leads id={id} version={leadsVersion} onRemoved={stats.reload} />
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

function Stat({ name, label, n, extra, href }: { name?: string; label: string; n: number; extra?: string; href?: string }) {
  return (
    <div class="stat" data-stat={name ?? label}>
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

/** Steps kept in the tab (useUnsentText), or null when there are none or they are not steps. */
function keptSteps(json: string): SequenceStep[] | null {
  try {
    const v: unknown = JSON.parse(json);
    return Array.isArray(v) && v.every((s) => s && typeof s.subject === 'string' && typeof s.bodyHtml === 'string' && typeof s.delayHours === 'number') ? (v as SequenceStep[]) : null;
  } catch {
    return null;
  }
}

function Steps({ campaign, onSaved, onDirty }: { campaign: Campaign; onSaved: () => Promise<void>; onDirty: (dirty: boolean) => void }) {
  const locked = campaign.status === 'running';
  const serverSteps = campaign.sequenceSteps.map((s) => ({ subject: s.subject, bodyHtml: s.bodyHtml, delayHours: s.delayHours }));
  // Edits not saved yet are kept in the tab, as an SDR's reply is: a reload, a visit to another
  // page or a session that ended meanwhile loses none of them ("Unsaved changes." says so).
  // Not shown over a running campaign's steps, which cannot change: kept for after its pause.
  const [kept, keep, forget] = useUnsentText(`steps.${campaign.id}`, JSON.stringify(serverSteps));
  const [steps, setStepsShown] = useState<SequenceStep[]>(() => (!locked && keptSteps(kept)) || serverSteps);
  const setSteps = (next: SequenceStep[]) => {
    setStepsShown(next);
    keep(JSON.stringify(next));
  };
  const [open, setOpen] = useState(0);
  const [saved, setSaved] = useState('');
  // The server's complaints about a field, by its path (sequenceSteps[1].bodyHtml), shown next to it.
  const [invalid, setInvalid] = useState<Record<string, string>>({});
  const section = useRef<HTMLElement>(null);
  const focusInvalid = useRef(false);
  const dirty = JSON.stringify(steps) !== JSON.stringify(serverSteps);
  useEffect(() => onDirty(dirty && !locked), [dirty, locked]);
  const update = (i: number, change: Partial<SequenceStep>) => {
    setSteps(steps.map((s, j) => (j === i ? { ...s, ...change } : s)));
    const gone = Object.keys(change).map((k) => `sequenceSteps[${i}].${k}`);
    if (gone.some((k) => k in invalid)) setInvalid(Object.fromEntries(Object.entries(invalid).filter(([k]) => !gone.includes(k))));
  };
  useEffect(() => {
    if (!focusInvalid.current) return;
    focusInvalid.current = false;
    section.current?.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus();
  }, [invalid, open]);
  const err = (i: number, k: string) => invalid[`sequenceSteps[${i}].${k}`];
  return (
    <section class="card" aria-labelledby="steps-h" ref={section}>
      <h2 id="steps-h">Steps</h2>
      {locked && <p class="muted">Steps cannot change while the campaign runs: pause it to edit them.</p>}
      {steps.length === 0 &&
        (campaign.startedAt ? (
          <p>No steps left: a campaign that has started keeps at least one. Add a step (or reload to get the saved ones back).</p>
        ) : (
          <p>No steps yet: a campaign needs at least one step to start.</p>
        ))}
      {steps.map((s, i) => (
        <details key={i} open={open === i} onToggle={(e) => e.currentTarget.open && setOpen(i)} class="card">
          <summary>
            Step {i + 1}: {s.subject || (i > 0 ? '(no subject: a reply to the previous step)' : '(no subject)')} {i > 0 && <span class="muted">— {s.delayHours} h after the previous step</span>}
            {Object.keys(invalid).some((k) => k.startsWith(`sequenceSteps[${i}]`)) && <span class="pill tone-bad">needs a fix</span>}
          </summary>
          <div class="grid2">
            <div>
              <Field label={`Step ${i + 1} subject`} hint={i > 0 ? 'Empty: sent as "Re: " and the previous step\'s subject, in the same thread.' : undefined} error={err(i, 'subject')}>
                <input value={s.subject} disabled={locked} onInput={(e) => update(i, { subject: e.currentTarget.value })} />
              </Field>
              <Field label={`Step ${i + 1} delay (hours after the previous step)`} error={err(i, 'delayHours')}>
                <input type="number" min={0} step="any" value={s.delayHours} disabled={locked || i === 0} onInput={(e) => update(i, { delayHours: Number(e.currentTarget.value) })} />
              </Field>
              <Field label={`Step ${i + 1} HTML body`} hint="Tokens: {{firstName}} {{company}} {{jobTitle}} {{email}} and any custom field." error={err(i, 'bodyHtml')}>
                <textarea rows={12} value={s.bodyHtml} disabled={locked} onInput={(e) => update(i, { bodyHtml: e.currentTarget.value })} />
              </Field>
              {!locked && (
                <button
                  type="button"
                  class="secondary"
                  onClick={() => {
                    setSteps(steps.filter((_, j) => j !== i));
                    setInvalid({});
                  }}
                >
                  Remove step {i + 1}
                </button>
              )}
            </div>
            {open === i && <StepPreview campaignId={campaign.id} steps={steps} index={i} />}
          </div>
        </details>
      ))}
      {!locked && (
        <ActionRow>
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
            resetOn={JSON.stringify(steps)}
            run={async () => {
              setSaved('');
              setInvalid({});
              try {
                await patch(`/v1/campaigns/${campaign.id}`, { sequenceSteps: steps });
              } catch (e) {
                const fields = fieldErrors(e);
                const first = Object.keys(fields)
                  .map((k) => /^sequenceSteps\[(\d+)\]/.exec(k))
                  .find(Boolean);
                if (first) setOpen(Number(first[1]));
                focusInvalid.current = Object.keys(fields).length > 0;
                setInvalid(fields);
                throw e;
              }
              forget();
              await onSaved();
              setSaved('Steps saved.');
            }}
          >
            Save steps
          </Action>
          <span role="status" class="muted">
            {saved && !dirty ? saved : dirty ? 'Unsaved changes.' : ''}
          </span>
        </ActionRow>
      )}
    </section>
  );
}

/** What the sending path does with an empty follow-up subject (sending/render.ts replySubject). */
const replySubject = (previous: string) => (/^\s*re\s*:/i.test(previous) ? previous : `Re: ${previous}`);

/**
 * The step rendered by the server's own renderer with a sample lead's tokens, in a sandboxed
 * frame. A follow-up without a subject is sent as a reply to the previous step: its preview
 * renders the nearest earlier subject (as written here, saved or not) and shows it as "Re: ...".
 */
function StepPreview({ campaignId, steps, index }: { campaignId: string; steps: SequenceStep[]; index: number }) {
  const step = steps[index];
  const [preview, setPreview] = useState<Preview | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  let from = index;
  while (from > 0 && !steps[from].subject.trim()) from--;
  const subject = steps[from].subject;
  const reply = from !== index;
  useEffect(() => {
    if (!subject.trim() || !step.bodyHtml.trim()) {
      setPreview(undefined);
      setError(undefined);
      return;
    }
    const t = setTimeout(async () => {
      try {
        setPreview(await post<Preview>(`/v1/campaigns/${campaignId}/preview`, { subject, bodyHtml: step.bodyHtml }));
        setError(undefined);
      } catch (e) {
        setError(e);
      }
    }, 300);
    return () => clearTimeout(t);
  }, [campaignId, subject, step.bodyHtml]);
  return (
    <div aria-live="polite">
      <h3>Preview</h3>
      <ErrorNote error={error} />
      {!preview && !error && <p class="muted">{index > 0 ? 'Write a body to see it rendered.' : 'Write a subject and a body to see them rendered.'}</p>}
      {preview && (
        <>
          <p class="muted">
            Rendered for {preview.lead.email} ({preview.lead.source === 'sample' ? 'a sample lead: import leads to preview with a real one' : 'the first enrolled lead'})
          </p>
          <p>
            <strong>Subject:</strong> <span data-testid="preview-subject">{reply ? replySubject(preview.subject) : preview.subject}</span>
            {reply && <span class="muted"> (no subject of its own: a reply to step {from + 1})</span>}
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
  // The server sets the pool itself too (Start gives a campaign without one the workspace's
  // first pool): the choice follows it, or it showed "(none)" and the next save removed the pool.
  useEffect(() => setPool(campaign.senderPoolId ?? ''), [campaign.senderPoolId]);
  const [useSchedule, setUseSchedule] = useState(!!campaign.schedule);
  const [sched, setSched] = useState(campaign.schedule ?? { timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC', days: ['mon', 'tue', 'wed', 'thu', 'fri'] as Day[], start: '09:00', end: '17:00' });
  const [trackOpens, setTrackOpens] = useState(campaign.trackOpens);
  const [saved, setSaved] = useState('');
  const [invalid, setInvalid] = useState<Record<string, string>>({});
  const section = useRef<HTMLElement>(null);
  const focusInvalid = useRef(false);
  const edit = (change: Partial<typeof sched>) => {
    setSched({ ...sched, ...change });
    setSaved('');
    const gone = Object.keys(change).map((k) => `schedule.${k}`);
    if (gone.some((k) => k in invalid)) setInvalid(Object.fromEntries(Object.entries(invalid).filter(([k]) => !gone.includes(k))));
  };
  useEffect(() => {
    if (!focusInvalid.current) return;
    focusInvalid.current = false;
    section.current?.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus();
  }, [invalid]);
  return (
    <section class="card" aria-labelledby="settings-h" ref={section}>
      <h2 id="settings-h">Schedule and sending</h2>
      <div class="row">
        <Field label="Sender pool" error={invalid.senderPoolId}>
          <select value={pool} onChange={(e) => setPool(e.currentTarget.value)}>
            <option value="">(none: the campaign cannot send)</option>
            {pools.data?.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name} ({p.remainingVolume} of {p.dailyCapacity} left, rolling 24 h)
              </option>
            ))}
          </select>
        </Field>
        <label class="checks">
          <input type="checkbox" checked={trackOpens} onChange={(e) => setTrackOpens(e.currentTarget.checked)} /> Track opens
        </label>
        <label class="checks">
          <input
            type="checkbox"
            checked={useSchedule}
            onChange={(e) => {
              setUseSchedule(e.currentTarget.checked);
              setInvalid({});
            }}
          />{' '}
          Send only inside a window
        </label>
      </div>
      {useSchedule && (
        <fieldset>
          <legend>Sending window</legend>
          <div class="row">
            <Field label="Time zone" hint="an IANA name, e.g. Europe/Berlin" error={invalid['schedule.timezone']}>
              <input value={sched.timezone} onInput={(e) => edit({ timezone: e.currentTarget.value })} />
            </Field>
            <Field label="From" error={invalid['schedule.start']}>
              <input type="time" value={sched.start} onInput={(e) => edit({ start: e.currentTarget.value })} />
            </Field>
            <Field label="To" error={invalid['schedule.end']}>
              <input type="time" value={sched.end} onInput={(e) => edit({ end: e.currentTarget.value })} />
            </Field>
          </div>
          <div class="checks" role="group" aria-label="Days" aria-describedby={invalid['schedule.days'] ? 'days-error' : undefined}>
            {DAYS.map((d) => (
              <label key={d}>
                <input type="checkbox" checked={sched.days.includes(d)} onChange={(e) => edit({ days: e.currentTarget.checked ? DAYS.filter((x) => x === d || sched.days.includes(x)) : sched.days.filter((x) => x !== d) })} />
                {d}
              </label>
            ))}
          </div>
          {invalid['schedule.days'] && (
            <p class="field-error" id="days-error">
              Days: {invalid['schedule.days']}
            </p>
          )}
        </fieldset>
      )}
      <ActionRow>
        <Action
          resetOn={JSON.stringify([pool, useSchedule, sched, trackOpens])}
          run={async () => {
            setSaved('');
            setInvalid({});
            try {
              await patch(`/v1/campaigns/${campaign.id}`, { senderPoolId: pool || null, trackOpens, schedule: useSchedule ? sched : null });
            } catch (e) {
              const fields = fieldErrors(e);
              focusInvalid.current = Object.keys(fields).length > 0;
              setInvalid(fields);
              throw e;
            }
            await onSaved();
            setSaved('Saved.');
          }}
        >
          Save schedule and sending
        </Action>
        <span role="status" class="muted">
          {saved}
        </span>
      </ActionRow>
    </section>
  );
}

const LEADS_PAGE = 50;

function Leads({ id, version, onRemoved }: { id: string; version: number; onRemoved: () => Promise<void> }) {
  const { query } = useLocation();
  const status = query.get('status') ?? '';
  // Only the leads the campaign's `replied` counts (the replied stat links here).
  const replied = query.get('replied') === 'true';
  // Only the leads with a message the campaign's `bounced` counts (the bounced stat links here).
  const bounced = query.get('bounced') === 'true';
  const q = query.get('q') ?? '';
  const offset = Number(query.get('offset') ?? 0) || 0;
  const [search, setSearch] = useState(q);
  // The box says what the table is searched for: a stat's link (bounced 3) drops the search.
  useEffect(() => setSearch(q), [q]);
  const leads = useLoad(
    () => get<Page<Enrollment>>(`/v1/campaigns/${id}/leads${qs({ limit: LEADS_PAGE, offset, status, replied: replied ? 'true' : undefined, bounced: bounced ? 'true' : undefined, q })}`),
    [id, status, replied, bounced, q, offset, version],
    STATS_POLL_MS * 2,
  );
  const result = useResultNote();
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
        <label class="checks">
          <input type="checkbox" checked={replied} onChange={(e) => setQuery({ replied: e.currentTarget.checked ? 'true' : null, offset: null })} />
          {' Replied (interested, not interested or unsubscribe)'}
        </label>
        <label class="checks">
          <input type="checkbox" checked={bounced} onChange={(e) => setQuery({ bounced: e.currentTarget.checked ? 'true' : null, offset: null })} />
          {' A message bounced'}
        </label>
        <button type="submit">Search</button>
      </form>
      <ErrorNote error={leads.error} />
      {result.note}
      {bounced && leads.data && (
        <p class="hint" data-testid="bounced-note">
          The leads of the campaign's bounced messages, whatever their state now: a lead two of whose messages bounced is one row, so there can be fewer rows than bounced messages.
        </p>
      )}
      {leads.data && leads.data.total === 0 && <p>No leads{q || status || replied || bounced ? ' match' : ' yet: import a CSV file below'}.</p>}
      {leads.data && leads.data.total > 0 && (
        <>
          {/* Focusable: on a narrow screen the table scrolls sideways, also by keyboard. */}
          <div class="table-wrap" tabIndex={0} role="region" aria-label="Leads table">
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
                  <th scope="col">
                    <span class="sr-only">actions</span>
                  </th>
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
                    <td>
                      {REMOVABLE.has(l.status) && (
                        <Action
                          class="secondary"
                          label={`Remove ${l.email} from the campaign`}
                          confirm={{
                            title: `Remove ${l.email} from this campaign?`,
                            body: `${l.email} gets nothing more from this campaign: its waiting steps are cancelled (a message being sent right now still goes out). The lead stays in your other campaigns and off the suppression list; importing the address again does not put it back into this campaign.`,
                            yes: 'Remove from campaign',
                          }}
                          run={async () => {
                            await del(`/v1/campaigns/${id}/leads/${encodeURIComponent(l.id)}`);
                            await Promise.all([leads.reload(), onRemoved()]);
                            // The button pressed is gone with the lead's state: the result takes the focus.
                            result.show(`${l.email} was removed from the campaign.`);
                          }}
                        >
                          Remove
                        </Action>
                      )}
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
