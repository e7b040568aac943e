// API keys: the list (never a secret), create (the key shown once, with a copy button), revoke.
import { useState } from 'preact/hooks';
import { get, post, qs, session } from '../api.ts';
import { Link, setQuery, useLocation } from '../router.tsx';
import { Action, Ago, ErrorNote, Field, PageHead, Pager, Pill, SecretOnce, formValues, useLoad, useResultNote } from '../ui.tsx';
import type { Page } from '../types.ts';

interface ApiKey {
  id: string;
  name: string | null;
  role: 'admin' | 'sdr';
  sdrId: string | null;
  keyPrefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

interface SdrRow {
  id: string;
  name: string;
  email: string;
  active: boolean;
}

const PAGE = 50;

export function KeysPage() {
  const { query } = useLocation();
  const offset = Number(query.get('offset') ?? 0) || 0;
  const keys = useLoad(() => get<Page<ApiKey>>(`/v1/api-keys${qs({ limit: PAGE, offset })}`), [offset]);
  const sdrs = useLoad(() => get<Page<SdrRow>>('/v1/sdr-profiles?limit=200'), []);
  const [created, setCreated] = useState<{ key: string; name: string } | null>(null);
  const [role, setRole] = useState<'admin' | 'sdr'>('admin');
  const [error, setError] = useState<unknown>(undefined);
  // One key per press: a second press (a double click) while the first is created would make a key whose secret nobody sees.
  const [creating, setCreating] = useState(false);
  const revoked = useResultNote();
  const sdrName = (id: string | null) => (id ? (sdrs.data?.data.find((s) => s.id === id)?.name ?? id) : '');
  const activeSdrs = sdrs.data?.data.filter((s) => s.active) ?? [];
  // An SDR key names an active SDR: without one to choose, say why (the list failed, or there is none) instead of an empty choice.
  const noSdr = role === 'sdr' && activeSdrs.length === 0;

  return (
    <>
      <PageHead title="API keys" />
      <section class="card" aria-labelledby="new-key-h">
        <h2 id="new-key-h">Create a key</h2>
        <form
          onSubmit={async (e) => {
            const v = formValues(e);
            if (creating) return;
            setCreating(true);
            setError(undefined);
            try {
              const k = await post<{ key: string; name: string }>('/dashboard/api/api-keys', { name: v.name, role, ...(role === 'sdr' ? { sdrId: v.sdrId } : {}) });
              setCreated(k);
              (e.target as HTMLFormElement).reset();
              await keys.reload();
            } catch (err) {
              setError(err);
            } finally {
              setCreating(false);
            }
          }}
        >
          <div class="row">
            <Field label="Name">
              <input name="name" required maxLength={200} placeholder="e.g. CRM sync" />
            </Field>
            <Field label="Role">
              <select name="role" value={role} onChange={(e) => setRole(e.currentTarget.value as 'admin' | 'sdr')}>
                <option value="admin">admin: every admin endpoint</option>
                <option value="sdr">sdr: one SDR's desk</option>
              </select>
            </Field>
            {role === 'sdr' && !noSdr && (
              <Field label="SDR">
                <select name="sdrId" required>
                  {activeSdrs.map((s) => (
                    <option key={s.id} value={s.id}>
                      {s.name} ({s.email})
                    </option>
                  ))}
                </select>
              </Field>
            )}
            <button type="submit" disabled={noSdr} aria-disabled={creating || undefined}>
              Create key
            </button>
          </div>
          {noSdr &&
            (sdrs.error ? (
              <ErrorNote error={sdrs.error} prefix="Could not load the SDRs" />
            ) : sdrs.loading ? (
              <p class="muted">Loading the SDRs…</p>
            ) : (
              <p>
                No active SDR to give a key to: <Link href="/sdrs">add an SDR</Link> (or activate one) first.
              </p>
            ))}
          <ErrorNote error={error} />
        </form>
        {created && <SecretOnce label={`New API key "${created.name}"`} value={created.key} onDone={() => setCreated(null)} />}
      </section>
      <section class="card" aria-labelledby="keys-h">
        <h2 id="keys-h">Keys</h2>
        {revoked.note}
        <ErrorNote error={keys.error} />
        {/* The list waits for the SDRs too, so an SDR key never shows its SDR's id first. */}
        {keys.data && (sdrs.data || !sdrs.loading) && (
          <>
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">name</th>
                    <th scope="col">key</th>
                    <th scope="col">role</th>
                    <th scope="col">SDR</th>
                    <th scope="col">created</th>
                    <th scope="col">last used</th>
                    <th scope="col">state</th>
                    <th scope="col">
                      <span class="sr-only">actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {keys.data.data.map((k) => (
                    <tr key={k.id} data-key={k.id}>
                      <td>
                        {k.name ?? <span class="muted">(unnamed)</span>}
                        {k.id === session()?.keyId && <div class="hint">this session signed in with it</div>}
                      </td>
                      <td>
                        <code>{k.keyPrefix}…</code> <code class="muted">{k.id}</code>
                      </td>
                      <td>{k.role}</td>
                      <td>{sdrName(k.sdrId)}</td>
                      <td>
                        <Ago at={k.createdAt} />
                      </td>
                      <td>
                        <Ago at={k.lastUsedAt} empty="never" />
                      </td>
                      <td>{k.revokedAt ? <Pill state="revoked" /> : <Pill state="active" />}</td>
                      <td>
                        {!k.revokedAt && (
                          <Action
                            class="danger"
                            label={`Revoke ${k.name ?? k.id}`}
                            confirm={{
                              title: `Revoke the key "${k.name ?? k.id}"?`,
                              body: `Every request with this ${k.role} key, and every dashboard session signed in with it, is refused from now on${k.id === session()?.keyId ? ' (this one too: you will be signed out)' : ''}. This cannot be undone.`,
                              yes: 'Revoke the key',
                            }}
                            run={async () => {
                              await post(`/dashboard/api/api-keys/${k.id}/revoke`);
                              await keys.reload();
                              // The Revoke button is gone with the key's state: the result takes the focus.
                              revoked.show(`The key "${k.name ?? k.id}" was revoked: requests and sessions with it are refused from now on.`);
                            }}
                          >
                            Revoke
                          </Action>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <Pager label="Keys" total={keys.data.total} limit={PAGE} offset={offset} onChange={(o) => setQuery({ offset: o || null })} />
          </>
        )}
      </section>
    </>
  );
}
