// Sender accounts and pools: health, rolling-24h usage against the daily limit, pause/resume,
// add an account (probed against its real servers first), change its limits or SMTP settings (a
// rotated password: probed first too), pools with members and capacity (a member taken out, the
// capacity changed).
import { useRef, useState } from 'preact/hooks';
import { ApiError, del, get, patch, post } from '../api.ts';
import { Action, Ago, ErrorNote, Field, PageHead, Pill, useLoad, useFocusBackOnClose, useResultNote } from '../ui.tsx';
import { SENDER_LIMITS } from '../../../src/modules/senders/limits.ts';
import type { SenderAccount, SenderPool } from '../types.ts';

interface Probe {
  ok: boolean;
  kind?: string;
  error?: string;
}

export interface MailServer {
  host: string;
  port: number;
  secure: boolean;
  user: string;
  pass: string;
}

type Account = SenderAccount & { sentLast24h: number; poolIds: string[] };

/** A probe failure in plain words: what the server said and what to do about it. */
export function probeWords(protocol: string, p: { kind?: string; error?: string }): string {
  const name = protocol.toUpperCase();
  const next: Record<string, string> = {
    auth_failed: 'Check the user name and password (many providers need an app password for SMTP/IMAP).',
    unreachable: 'Check the host, the port and the TLS setting, and that the server accepts connections from this machine.',
    rate_limited: 'The server is limiting logins: wait a few minutes and try again.',
  };
  const what = p.kind === 'auth_failed' ? 'refused the login' : p.kind === 'unreachable' ? 'could not be reached' : p.kind === 'rate_limited' ? 'is rate limiting' : 'failed';
  return `The ${name} server ${what}: ${p.error ?? 'no answer'}. ${next[p.kind ?? ''] ?? ''}`.trim();
}

export function describeProbeError(e: unknown): unknown {
  if (e instanceof ApiError && e.code === 'mail_probe_failed' && e.body?.probe) return new Error(probeWords(e.body.probe.protocol, e.body.probe));
  return e;
}

export function ServerFields({ prefix, label, defaults, optional = false }: { prefix: string; label: string; defaults: { port: number; secure: boolean }; optional?: boolean }) {
  return (
    <fieldset>
      <legend>{label}</legend>
      <div class="row">
        <Field label={`${label} host`}>
          <input name={`${prefix}.host`} required={!optional} placeholder={`${prefix}.example.com`} />
        </Field>
        <Field label={`${label} port`}>
          <input name={`${prefix}.port`} type="number" min={1} max={65535} required={!optional} defaultValue={String(defaults.port)} />
        </Field>
        <label class="checks">
          <input name={`${prefix}.secure`} type="checkbox" defaultChecked={defaults.secure} /> {label}: implicit TLS
        </label>
      </div>
      <div class="row">
        <Field label={`${label} user`}>
          <input name={`${prefix}.user`} required={!optional} autoComplete="off" />
        </Field>
        <Field label={`${label} password`}>
          <input name={`${prefix}.pass`} type="password" required={!optional} autoComplete="new-password" />
        </Field>
      </div>
    </fieldset>
  );
}

export function readServer(form: HTMLFormElement, prefix: string): MailServer | undefined {
  const f = new FormData(form);
  const s = (k: string) => String(f.get(`${prefix}.${k}`) ?? '').trim();
  if (!s('host')) return undefined;
  return { host: s('host'), port: Number(s('port')), secure: f.get(`${prefix}.secure`) === 'on', user: s('user'), pass: String(f.get(`${prefix}.pass`) ?? '') };
}

export function SendersPage() {
  const accounts = useLoad(() => get<Account[]>('/v1/sender-accounts'), [], 30_000);
  const pools = useLoad(() => get<SenderPool[]>('/v1/sender-pools'), [], 30_000);
  const [adding, setAdding] = useState(false);
  // One form at a time: the add and change forms share their fields' labels.
  const [editing, setEditing] = useState<string | null>(null);
  const edited = accounts.data?.find((a) => a.id === editing);
  const reloadAll = () => Promise.all([accounts.reload(), pools.reload()]).then(() => undefined);
  const emailOf = (id: string) => accounts.data?.find((a) => a.id === id)?.email ?? id;
  return (
    <>
      <PageHead title="Senders">
        <button
          type="button"
          onClick={() => {
            setEditing(null);
            setAdding(true);
          }}
        >
          Add a sender account
        </button>
      </PageHead>
      {edited && (
        <EditSender
          key={edited.id}
          account={edited}
          onDone={async () => {
            setEditing(null);
            await reloadAll();
          }}
          onCancel={() => setEditing(null)}
        />
      )}
      {adding && (
        <AddSender
          pools={pools.data ?? []}
          onDone={async () => {
            setAdding(false);
            await reloadAll();
          }}
          onCancel={() => setAdding(false)}
        />
      )}
      <section class="card" aria-labelledby="accounts-h">
        <h2 id="accounts-h">Sender accounts</h2>
        <ErrorNote error={accounts.error} />
        {accounts.data?.length === 0 && <p>No sender accounts yet: add the first one with its SMTP (and IMAP, for replies and bounces) settings.</p>}
        {accounts.data && accounts.data.length > 0 && (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">account</th>
                  <th scope="col">state</th>
                  <th scope="col">SMTP health</th>
                  <th scope="col">IMAP health</th>
                  <th scope="col" class="num">sent in 24 h</th>
                  <th scope="col">
                    <span class="sr-only">actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {accounts.data.map((a) => (
                  <tr key={a.id} data-sender={a.email}>
                    <td>
                      {a.name} &lt;{a.email}&gt;
                      <div class="hint">
                        <code>{a.id}</code>
                      </div>
                    </td>
                    <td>
                      <Pill state={a.status} />
                    </td>
                    <td>
                      <Pill state={a.health} />
                      <HealthNote account={a} />
                    </td>
                    <td>{a.imapHealth ? <Pill state={a.imapHealth} /> : <span class="muted">no IMAP</span>}</td>
                    <td class="num">
                      {a.sentLast24h.toLocaleString('en')} / {a.dailyLimit === null ? 'no limit' : a.dailyLimit.toLocaleString('en')}
                      {a.dailyLimit !== null && <progress class="usage" max={a.dailyLimit} value={Math.min(a.sentLast24h, a.dailyLimit)} aria-label={`${a.email} usage of its daily limit`} />}
                      {a.minIntervalSeconds > 0 && <div class="hint">at most one every {a.minIntervalSeconds.toLocaleString('en')} s</div>}
                    </td>
                    <td>
                      <button
                        type="button"
                        class="secondary"
                        aria-label={`Change ${a.email}`}
                        onClick={() => {
                          setAdding(false);
                          setEditing(a.id);
                        }}
                      >
                        Change
                      </button>{' '}
                      {a.status === 'active' ? (
                        <Action class="secondary" label={`Pause ${a.email}`} run={async () => (await post(`/v1/sender-accounts/${a.id}/pause`), await accounts.reload())}>
                          Pause
                        </Action>
                      ) : (
                        <Action label={`Resume ${a.email}`} run={async () => (await post(`/v1/sender-accounts/${a.id}/resume`), await accounts.reload())}>
                          Resume
                        </Action>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      {/* The pools wait for the accounts, so a member never shows its account's id first. */}
      <Pools pools={accounts.loading && !accounts.data ? undefined : pools.data} accounts={accounts.data ?? []} error={pools.error} emailOf={emailOf} onChange={reloadAll} />
    </>
  );
}

/**
 * What an account's SMTP health means for its sending, and what to do about it: the server's
 * answer as it said it, whether (and until when) the account is skipped, and the way out.
 */
function HealthNote({ account: a }: { account: Account }) {
  const said = a.healthError && <div class="hint">The server said: {a.healthError}</div>;
  if (a.health === 'unknown') return <div class="hint">Known after its next send.</div>;
  if (a.health === 'auth_failed')
    return (
      <>
        {said}
        <div class="hint">Sends nothing until it can log in: press Change and give the current SMTP password (many providers need an app password).</div>
      </>
    );
  if (a.health === 'unreachable' || a.health === 'rate_limited') {
    const waiting = a.healthRetryAt !== null && Date.parse(a.healthRetryAt) > Date.now();
    return (
      <>
        {said}
        <div class="hint">
          {waiting ? (
            <>
              Skipped for now: tried again <Ago at={a.healthRetryAt} />.
            </>
          ) : (
            'Tried again with its next message.'
          )}
          {a.health === 'unreachable' ? ' If it lasts, check the host, port and TLS setting (Change).' : ' If it lasts, lower its daily limit or raise its minimum interval (Change).'}
        </div>
      </>
    );
  }
  return said || null;
}

function AddSender({ pools, onDone, onCancel }: { pools: SenderPool[]; onDone: () => Promise<void>; onCancel: () => void }) {
  useFocusBackOnClose();
  const [error, setError] = useState<unknown>(undefined);
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const body = (form: HTMLFormElement) => {
    const f = new FormData(form);
    const s = (k: string) => String(f.get(k) ?? '').trim();
    const imap = readServer(form, 'imap');
    return {
      email: s('email'),
      name: s('name'),
      smtp: readServer(form, 'smtp')!,
      ...(imap ? { imap } : {}),
      ...(s('poolId') ? { poolId: s('poolId') } : {}),
      ...(s('dailyLimit') ? { dailyLimit: Number(s('dailyLimit')) } : {}),
    };
  };
  const test = async (form: HTMLFormElement) => {
    if (busy || !form.reportValidity()) return;
    setBusy(true);
    setError(undefined);
    setStatus('Testing the servers…');
    try {
      const b = body(form);
      const r = await post<{ ok: boolean; smtp: Probe; imap: Probe | null }>('/v1/sender-accounts/probe', { smtp: b.smtp, ...(b.imap ? { imap: b.imap } : {}) });
      const words = [r.smtp.ok ? 'SMTP login works.' : probeWords('smtp', r.smtp), r.imap ? (r.imap.ok ? 'IMAP login works.' : probeWords('imap', r.imap)) : 'No IMAP server given.'];
      setStatus('');
      if (r.ok) setStatus(words.join(' '));
      else setError(new Error(words.join(' ')));
    } catch (e) {
      setStatus('');
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card" aria-labelledby="add-sender-h">
      <h2 id="add-sender-h">Add a sender account</h2>
      <p class="muted">mailgate logs in to the servers before it saves anything; the password is stored encrypted.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          if (busy) return;
          const form = e.currentTarget;
          setBusy(true);
          setError(undefined);
          setStatus('Testing the servers and saving…');
          try {
            await post('/v1/sender-accounts', body(form));
            setStatus('');
            await onDone();
          } catch (err) {
            setStatus('');
            setError(describeProbeError(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        <div class="row">
          <Field label="From address">
            <input name="email" type="email" required />
          </Field>
          <Field label="Display name">
            <input name="name" required />
          </Field>
          <Field label="Daily limit" hint="most messages in any 24 hours; empty: none">
            <input name="dailyLimit" type="number" min={1} />
          </Field>
          <Field label="Pool">
            <select name="poolId">
              <option value="">(none)</option>
              {pools.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <ServerFields prefix="smtp" label="SMTP" defaults={{ port: 587, secure: false }} />
        <details>
          <summary>IMAP (replies and bounces are read from here)</summary>
          <ImapOptional />
        </details>
        <div class="row">
          <button type="button" class="secondary" aria-disabled={busy || undefined} onClick={(e) => test((e.currentTarget as HTMLButtonElement).form!)}>
            Test connection
          </button>
          <button type="submit" aria-disabled={busy || undefined}>
            Test and save
          </button>
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel
          </button>
        </div>
        <p role="status" class={status && !busy ? 'ok' : 'muted'}>
          {status}
        </p>
        <ErrorNote error={error} />
      </form>
    </section>
  );
}

/**
 * An account's limits and SMTP settings, changed in place (PATCH). New SMTP settings (a password
 * rotated at the provider: the account shows auth_failed) are tested before they are saved; the
 * section is left empty to keep the ones stored.
 */
function EditSender({ account, onDone, onCancel }: { account: Account; onDone: () => Promise<void>; onCancel: () => void }) {
  useFocusBackOnClose();
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  return (
    <section class="card" aria-labelledby="edit-sender-h">
      <h2 id="edit-sender-h">Change {account.email}</h2>
      <p class="muted">New limits apply from the account's next batch. New SMTP settings are tested against the server before they are saved; the password is stored encrypted.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          if (busy) return;
          const form = e.currentTarget;
          const f = new FormData(form);
          const s = (k: string) => String(f.get(k) ?? '').trim();
          const smtp = readServer(form, 'smtp');
          setBusy(true);
          setError(undefined);
          try {
            await patch(`/v1/sender-accounts/${account.id}`, {
              dailyLimit: s('dailyLimit') ? Number(s('dailyLimit')) : null,
              minIntervalSeconds: s('minIntervalSeconds') ? Number(s('minIntervalSeconds')) : 0,
              ...(smtp ? { smtp } : {}),
            });
            await onDone();
          } catch (err) {
            setError(describeProbeError(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        <div class="row">
          <Field label="Daily limit" hint="most messages in any 24 hours; empty: none">
            <input name="dailyLimit" type="number" min={1} defaultValue={account.dailyLimit === null ? '' : String(account.dailyLimit)} />
          </Field>
          <Field label="Minimum interval (s)" hint="least time between two sends; 0: none">
            <input name="minIntervalSeconds" type="number" min={0} max={86400} step="any" defaultValue={String(account.minIntervalSeconds)} />
          </Field>
        </div>
        <details open={account.health === 'auth_failed'}>
          <summary>New SMTP settings (a changed password)</summary>
          <ServerFields prefix="smtp" label="SMTP" defaults={{ port: 587, secure: false }} optional />
        </details>
        <div class="row">
          <button type="submit" aria-disabled={busy || undefined}>
            {busy ? 'Saving…' : 'Save'}
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

/** The IMAP fields, all optional: an empty host means "no IMAP". */
function ImapOptional() {
  return (
    <fieldset>
      <legend>IMAP</legend>
      <div class="row">
        <Field label="IMAP host">
          <input name="imap.host" placeholder="imap.example.com" />
        </Field>
        <Field label="IMAP port">
          <input name="imap.port" type="number" min={1} max={65535} defaultValue="993" />
        </Field>
        <label class="checks">
          <input name="imap.secure" type="checkbox" defaultChecked /> IMAP: implicit TLS
        </label>
      </div>
      <div class="row">
        <Field label="IMAP user">
          <input name="imap.user" autoComplete="off" />
        </Field>
        <Field label="IMAP password">
          <input name="imap.pass" type="password" autoComplete="new-password" />
        </Field>
      </div>
    </fieldset>
  );
}

function Pools({ pools, accounts, error, emailOf, onChange }: { pools: SenderPool[] | undefined; accounts: Account[]; error: unknown; emailOf: (id: string) => string; onChange: () => Promise<void> }) {
  const [createError, setCreateError] = useState<unknown>(undefined);
  // One pool per press (a double click made two).
  const [creating, setCreating] = useState(false);
  // A removed member's button goes with it: the focus goes to what happened, not to <body>.
  const result = useResultNote();
  return (
    <section class="card" aria-labelledby="pools-h">
      <h2 id="pools-h">Sender pools</h2>
      <p class="muted">A campaign sends through one pool; the pool spreads its mail over its active members up to its daily capacity (rolling 24 hours).</p>
      {result.note}
      <ErrorNote error={error} />
      {pools && pools.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">pool</th>
                <th scope="col" class="num">left of capacity (24 h)</th>
                <th scope="col">members</th>
                <th scope="col">add a member</th>
              </tr>
            </thead>
            <tbody>
              {pools.map((p) => (
                <tr key={p.id} data-pool={p.name}>
                  <td>
                    {p.name}
                    <div class="hint">
                      <code>{p.id}</code>
                    </div>
                  </td>
                  <td class="num">
                    {p.remainingVolume.toLocaleString('en')} / {p.dailyCapacity.toLocaleString('en')}
                    <progress max={p.dailyCapacity} value={p.dailyCapacity - p.remainingVolume} aria-label={`${p.name} used capacity`} />
                    <ChangeCapacity pool={p} onChange={onChange} />
                  </td>
                  <td>
                    {p.senderAccountIds.length ? (
                      <ul class="members">
                        {p.senderAccountIds.map((id) => (
                          <li key={id}>
                            {emailOf(id)}{' '}
                            <RemoveMember
                              pool={p}
                              email={emailOf(id)}
                              id={id}
                              onRemoved={async () => {
                                await onChange();
                                result.show(`${emailOf(id)} was removed from ${p.name}.`);
                              }}
                            />
                          </li>
                        ))}
                      </ul>
                    ) : (
                      <span class="muted">none</span>
                    )}
                  </td>
                  <td>
                    <AddMember pool={p} accounts={accounts.filter((a) => !p.senderAccountIds.includes(a.id))} onChange={onChange} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form
        class="row"
        onSubmit={async (e) => {
          e.preventDefault();
          if (creating) return;
          const form = e.currentTarget;
          const f = new FormData(form);
          setCreating(true);
          setCreateError(undefined);
          try {
            await post('/v1/sender-pools', { name: String(f.get('name')).trim(), dailyCapacity: Number(f.get('dailyCapacity')) });
            form.reset();
            await onChange();
          } catch (err) {
            setCreateError(err);
          } finally {
            setCreating(false);
          }
        }}
      >
        <Field label="New pool name">
          <input name="name" required />
        </Field>
        <Field label="Daily capacity">
          <input name="dailyCapacity" type="number" min={1} required />
        </Field>
        <button type="submit" aria-disabled={creating || undefined}>
          Create pool
        </button>
      </form>
      <ErrorNote error={createError} />
    </section>
  );
}

/**
 * Takes an account out of a pool, asked once: what stops and what becomes of the leads whose
 * sequences it was sending (docs/decisions.md, "Taking an account out of a pool").
 */
function RemoveMember({ pool, email, id, onRemoved }: { pool: SenderPool; email: string; id: string; onRemoved: () => Promise<void> }) {
  const last = pool.senderAccountIds.length === 1;
  return (
    <Action
      class="secondary"
      label={`Remove ${email} from ${pool.name}`}
      confirm={{
        title: `Remove ${email} from ${pool.name}?`,
        body:
          `${pool.name} sends nothing more through ${email}; messages it is sending now finish. ` +
          (last
            ? `It is the pool's only member: the pool's campaigns wait until another account is added. `
            : `Leads whose sequences ${email} was sending get their next steps from the pool's other accounts, in the same thread. `) +
          `The account, its other pools and its mailbox stay as they are.`,
        yes: 'Remove from the pool',
      }}
      run={async () => {
        await del(`/v1/sender-pools/${pool.id}/members/${id}`);
        await onRemoved();
      }}
    >
      Remove
    </Action>
  );
}

/** A pool's rolling 24-hour capacity, changed in place (PATCH): taken at its next claim. */
function ChangeCapacity({ pool, onChange }: { pool: SenderPool; onChange: () => Promise<void> }) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const toggle = useRef<HTMLButtonElement>(null);
  const close = () => {
    setOpen(false);
    setError(undefined);
    toggle.current?.focus();
  };
  return (
    <div class="capacity">
      <button type="button" class="secondary" ref={toggle} aria-expanded={open} aria-label={`Change capacity of ${pool.name}`} onClick={() => (open ? close() : setOpen(true))}>
        Change capacity
      </button>
      {open && (
        <form
          class="row"
          onSubmit={async (e) => {
            e.preventDefault();
            if (busy) return;
            const value = Number(new FormData(e.currentTarget).get('dailyCapacity'));
            setBusy(true);
            setError(undefined);
            try {
              await patch(`/v1/sender-pools/${pool.id}`, { dailyCapacity: value });
              await onChange();
              close();
            } catch (err) {
              setError(err);
            } finally {
              setBusy(false);
            }
          }}
        >
          <Field label={`Daily capacity of ${pool.name}`} hint="most messages in any 24 hours; below what it sent, it waits">
            <input name="dailyCapacity" type="number" min={0} max={SENDER_LIMITS.dailyCapacity} step={1} required defaultValue={String(pool.dailyCapacity)} />
          </Field>
          <button type="submit" aria-disabled={busy || undefined}>
            {busy ? 'Saving…' : 'Save capacity'}
          </button>
          <button type="button" class="secondary" onClick={close}>
            Cancel
          </button>
        </form>
      )}
      <ErrorNote error={error} />
    </div>
  );
}

function AddMember({ pool, accounts, onChange }: { pool: SenderPool; accounts: Account[]; onChange: () => Promise<void> }) {
  const [pick, setPick] = useState('');
  if (accounts.length === 0) return <span class="muted">every account is a member</span>;
  // The account picked before may have joined the pool since (it is no longer a choice): the
  // first choice then, as the select shows, never the stale pick (re-adding it is a silent no-op).
  const chosen = accounts.some((a) => a.id === pick) ? pick : accounts[0].id;
  return (
    <div class="row">
        <select aria-label={`Account to add to ${pool.name}`} value={chosen} onChange={(e) => setPick(e.currentTarget.value)}>
          {accounts.map((a) => (
            <option key={a.id} value={a.id}>
              {a.email}
            </option>
          ))}
        </select>
      <Action label={`Add to ${pool.name}`} run={async () => (await post(`/v1/sender-pools/${pool.id}/members`, { senderAccountId: chosen }), await onChange())}>
        Add
      </Action>
    </div>
  );
}
