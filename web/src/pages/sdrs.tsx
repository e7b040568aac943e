// SDRs: profiles (tone, signature, calendar link, language), active/inactive, and the mail
// connection flow (server settings tested live; reconnect for needs_reauth).
import { useRef, useState } from 'preact/hooks';
import { get, patch, post } from '../api.ts';
import { Action, ErrorNote, Field, MailPill, PageHead, Pill, useLoad, useFocusBackOnClose } from '../ui.tsx';
import { describeProbeError, readServer, ServerFields } from './senders.tsx';
import type { Page } from '../types.ts';

export interface SdrProfile {
  id: string;
  name: string;
  email: string;
  active: boolean;
  tone: string | null;
  signature: string | null;
  calendarUrl: string | null;
  language: string | null;
  mailConnected: boolean;
  mailEmail: string | null;
  healthState: string;
  lastSyncError: string | null;
  openThreads: number;
  createdAt: string;
}

interface Reassignment {
  fromSdrId: string;
  toSdrId: string;
  threadIds: string[];
  discardedDraftIds: string[];
  followupIds: string[];
}

export function SdrsPage() {
  const list = useLoad(() => get<Page<SdrProfile>>('/v1/sdr-profiles?limit=200'), [], 30_000);
  const [editing, setEditing] = useState<string | null>(null);
  const [connecting, setConnecting] = useState<string | null>(null);
  const [moving, setMoving] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  return (
    <>
      <PageHead title="SDRs" />
      <section class="card" aria-labelledby="new-sdr-h">
        <h2 id="new-sdr-h">Add an SDR</h2>
        <form
          class="row"
          onSubmit={async (e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = new FormData(form);
            setError(undefined);
            try {
              await post('/v1/sdr-profiles', { name: String(f.get('name')).trim(), email: String(f.get('email')).trim() });
              form.reset();
              await list.reload();
            } catch (err) {
              setError(err);
            }
          }}
        >
          <Field label="Name">
            <input name="name" required />
          </Field>
          <Field label="Email" hint="where assigned replies are forwarded">
            <input name="email" type="email" required />
          </Field>
          <button type="submit">Add SDR</button>
        </form>
        <ErrorNote error={error} />
      </section>
      <ErrorNote error={list.error} />
      {list.data?.data.map((s) => (
        <section class="card" key={s.id} aria-label={`SDR ${s.name}`} data-sdr={s.id}>
          <div class="row">
            <h2>{s.name}</h2>
            <span class="muted">{s.email}</span>
            <Pill state={s.active ? 'active' : 'inactive'} />
            <span>
              mail: <MailPill state={s.healthState} /> {s.mailEmail && <span class="muted">{s.mailEmail}</span>}
            </span>
            <span class="page-actions">
              <button type="button" class="secondary" aria-expanded={editing === s.id} onClick={() => setEditing(editing === s.id ? null : s.id)}>
                Edit profile
              </button>
              <button type="button" class={s.healthState === 'needs_reauth' ? '' : 'secondary'} aria-expanded={connecting === s.id} onClick={() => setConnecting(connecting === s.id ? null : s.id)}>
                {s.healthState === 'disconnected' ? 'Connect mail' : 'Reconnect mail'}
              </button>
              <button type="button" class="secondary" aria-expanded={moving === s.id} aria-label={`Move threads of ${s.name}`} onClick={() => setMoving(moving === s.id ? null : s.id)}>
                Move threads
              </button>
              <Action
                class="secondary"
                label={`${s.active ? 'Deactivate' : 'Activate'} ${s.name}`}
                confirm={
                  s.active
                    ? {
                        title: `Deactivate ${s.name}?`,
                        body: `${s.name}'s API keys and signed-in dashboard sessions are refused from now on, and replies can no longer be assigned to ${s.name}. The threads stay theirs, and their follow-ups pause: no new reminders meanwhile (Move threads hands them to another SDR). Activate brings it all back.`,
                        yes: 'Deactivate',
                      }
                    : undefined
                }
                run={async () => (await patch(`/v1/sdr-profiles/${s.id}`, { active: !s.active }), await list.reload())}
              >
                {s.active ? 'Deactivate' : 'Activate'}
              </Action>
            </span>
          </div>
          {s.lastSyncError && <p class="error">Last mail sync failed: {s.lastSyncError}</p>}
          {s.healthState === 'needs_reauth' && <p class="notice">The mailbox refused mailgate's login: the SDR cannot send replies until it is reconnected with a current password (Reconnect mail).</p>}
          <dl class="row muted">
            <dt>open threads</dt>
            <dd>{s.openThreads}</dd>
            <dt>tone</dt>
            <dd>{s.tone ?? '—'}</dd>
            <dt>language</dt>
            <dd>{s.language ?? '—'}</dd>
            <dt>calendar</dt>
            <dd>{s.calendarUrl ?? '—'}</dd>
          </dl>
          {editing === s.id && (
            <ProfileForm
              sdr={s}
              onDone={async () => {
                setEditing(null);
                await list.reload();
              }}
            />
          )}
          {moving === s.id && (
            <MoveThreadsForm
              sdr={s}
              others={(list.data?.data ?? []).filter((o) => o.id !== s.id)}
              onMoved={async () => {
                await list.reload();
              }}
            />
          )}
          {connecting === s.id && (
            <MailConnectForm
              sdrId={s.id}
              email={s.mailEmail ?? s.email}
              onConnected={async () => {
                setConnecting(null);
                await list.reload();
              }}
            />
          )}
        </section>
      ))}
    </>
  );
}

function ProfileForm({ sdr, onDone }: { sdr: SdrProfile; onDone: () => Promise<void> }) {
  useFocusBackOnClose();
  const [error, setError] = useState<unknown>(undefined);
  return (
    <form
      aria-label={`Profile of ${sdr.name}`}
      onSubmit={async (e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        const s = (k: string) => String(f.get(k) ?? '');
        setError(undefined);
        try {
          await patch(`/v1/sdr-profiles/${sdr.id}`, { name: s('name').trim(), tone: s('tone'), signature: s('signature'), calendarUrl: s('calendarUrl').trim(), language: s('language').trim() });
          await onDone();
        } catch (err) {
          setError(err);
        }
      }}
    >
      <div class="row">
        <Field label="Name">
          <input name="name" defaultValue={sdr.name} required />
        </Field>
        <Field label="Tone" hint="how drafts should sound, e.g. warm and brief">
          <input name="tone" defaultValue={sdr.tone ?? ''} />
        </Field>
        <Field label="Language">
          <input name="language" defaultValue={sdr.language ?? ''} placeholder="en" />
        </Field>
        <Field label="Calendar link">
          <input name="calendarUrl" type="url" defaultValue={sdr.calendarUrl ?? ''} />
        </Field>
      </div>
      <Field label="Signature">
        <textarea name="signature" rows={3} defaultValue={sdr.signature ?? ''} />
      </Field>
      <button type="submit">Save profile</button>
      <ErrorNote error={error} />
    </form>
  );
}

/**
 * Moves the SDR's open threads to another SDR (POST /v1/sdr-profiles/:sdrId/reassign-threads):
 * only active SDRs whose mailbox can send are offered, as the API accepts only those. It asks
 * once, naming both SDRs and what moves; what happened is said in a status line.
 */
function MoveThreadsForm({ sdr, others, onMoved }: { sdr: SdrProfile; others: SdrProfile[]; onMoved: () => Promise<void> }) {
  useFocusBackOnClose();
  const targets = others.filter((o) => o.active && (o.healthState === 'active' || o.healthState === 'rate_limited'));
  const [to, setTo] = useState(targets[0]?.id ?? '');
  const [done, setDone] = useState('');
  const status = useRef<HTMLParagraphElement>(null);
  const target = targets.find((t) => t.id === to);
  const n = sdr.openThreads;
  const threads = `${n} open thread${n === 1 ? '' : 's'}`;
  return (
    <section aria-label={`Move threads of ${sdr.name}`}>
      <h3>Move {sdr.name}'s threads</h3>
      <p class="muted">
        For an SDR who leaves or goes on leave: their open threads (new, awaiting reply, needs follow-up, replied) go to another SDR, who answers from their own
        mailbox in the same mail thread. Pending follow-ups move with the threads, due when they were; open AI drafts, written in {sdr.name}'s voice, are discarded.
        Answers that still reach {sdr.name}'s mailbox join the threads.
      </p>
      {targets.length === 0 ? (
        <p class="notice">No other active SDR has a connected mailbox: add an SDR or connect a mailbox first (Connect mail), then move the threads.</p>
      ) : n === 0 ? (
        <p>{sdr.name} has no open threads to move.</p>
      ) : (
        <div class="row">
          <Field label="Move to" hint="active SDRs with a connected mailbox">
            <select value={to} onChange={(e) => setTo(e.currentTarget.value)}>
              {targets.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name} ({t.mailEmail ?? t.email}, {t.openThreads} open)
                </option>
              ))}
            </select>
          </Field>
          <Action
            label={`Move ${threads} of ${sdr.name}`}
            resetOn={to}
            confirm={{
              title: `Move ${sdr.name}'s ${threads} to ${target?.name ?? 'another SDR'}?`,
              body: `${target?.name ?? 'The SDR'} gets the threads with their messages, status and pending follow-ups, and answers from ${target?.mailEmail ?? 'their own mailbox'}. ${sdr.name} no longer sees them, and their open AI drafts are discarded. Moving them back is another move.`,
              yes: 'Move threads',
            }}
            run={async () => {
              setDone('');
              const r = await post<{ data: Reassignment }>(`/v1/sdr-profiles/${sdr.id}/reassign-threads`, { toSdrId: to });
              const d = r.data;
              const moved = d.threadIds.length;
              setDone(
                `Moved ${moved} thread${moved === 1 ? '' : 's'} to ${target?.name ?? d.toSdrId}: ${d.followupIds.length} pending follow-up${d.followupIds.length === 1 ? '' : 's'} moved with them, ${d.discardedDraftIds.length} open draft${d.discardedDraftIds.length === 1 ? '' : 's'} discarded.`,
              );
              await onMoved();
              // The button goes with the last open thread: the focus goes to what happened.
              status.current?.focus();
            }}
          >
            Move {threads}
          </Action>
        </div>
      )}
      <p role="status" class={done ? 'ok' : ''} tabIndex={-1} ref={status}>
        {done}
      </p>
    </section>
  );
}

/** The spec's mail connection flow: the mailbox's servers and credentials, tested live. */
export function MailConnectForm({ sdrId, email, onConnected }: { sdrId: string; email: string; onConnected: () => Promise<void> }) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const [ok, setOk] = useState('');
  return (
    <form
      aria-label="Mail connection"
      onSubmit={async (e) => {
        e.preventDefault();
        if (busy) return;
        const form = e.currentTarget;
        setBusy(true);
        setError(undefined);
        setOk('');
        try {
          const r = await post<{ mailEmail: string; healthState: string }>(`/dashboard/api/sdrs/${sdrId}/mail-connection`, {
            email: String(new FormData(form).get('email') ?? '').trim() || undefined,
            smtp: readServer(form, 'smtp'),
            imap: readServer(form, 'imap'),
          });
          setOk(`Connected ${r.mailEmail}: both logins worked and the mailbox is ${r.healthState}.`);
          await onConnected();
        } catch (err) {
          setError(describeProbeError(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <h3>Mail connection</h3>
      <p class="muted">mailgate logs in to both servers now; nothing is saved unless both work. The passwords are stored encrypted.</p>
      <Field label="Mailbox address">
        <input name="email" type="email" defaultValue={email} />
      </Field>
      <ServerFields prefix="smtp" label="SMTP" defaults={{ port: 587, secure: false }} />
      <ServerFields prefix="imap" label="IMAP" defaults={{ port: 993, secure: true }} />
      <button type="submit" aria-disabled={busy || undefined}>
        {busy ? 'Testing…' : 'Test and connect'}
      </button>
      {ok && (
        <p class="ok" role="status">
          {ok}
        </p>
      )}
      <ErrorNote error={error} />
    </form>
  );
}
