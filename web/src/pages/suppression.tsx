// The suppression list: search, add (pasted or from a CSV file), remove (dashboard only).
import { useEffect, useState } from 'preact/hooks';
import { ApiError, del, get, post, problemWords, qs } from '../api.ts';
import { parseCsv } from '../csv.ts';
import { setQuery, useLocation } from '../router.tsx';
import { Action, Ago, ErrorNote, Field, PageHead, Pager, Pill, useLoad, useResultNote } from '../ui.tsx';
import type { Page } from '../types.ts';

interface Suppression {
  email: string;
  reason: string;
  source: string | null;
  createdAt: string;
}

const REASONS = ['manual', 'hard_bounce', 'unsubscribe', 'reply_unsubscribe', 'complaint'];
const PAGE = 50;
const BATCH = 1000;

/** Addresses from pasted text or a CSV file: anything that looks like one, once each. */
export function extractEmails(text: string): string[] {
  const cells = parseCsv(text).flat().flatMap((c) => c.split(/[\s;]+/));
  return [...new Set(cells.map((c) => c.trim().replace(/^<|>$/g, '')).filter((c) => c.includes('@')))];
}

export function SuppressionPage() {
  const { query } = useLocation();
  const q = query.get('q') ?? '';
  const reason = query.get('reason') ?? '';
  const offset = Number(query.get('offset') ?? 0) || 0;
  const [search, setSearch] = useState(q);
  // The box says what the list is searched for (the Suppression tab drops the search).
  useEffect(() => setSearch(q), [q]);
  const list = useLoad(() => get<Page<Suppression>>(`/v1/suppression-list${qs({ q, reason, limit: PAGE, offset })}`), [q, reason, offset]);
  const [text, setText] = useState('');
  const result = useResultNote();
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);

  const add = async (emails: string[]) => {
    result.set('');
    setError(undefined);
    if (emails.length === 0) return setError(new Error('No email addresses found: paste one address per line, or choose a CSV file with an address column.'));
    setBusy(true);
    let added = 0;
    try {
      for (let i = 0; i < emails.length; i += BATCH) added += (await post<{ suppressed: number }>('/v1/suppression-list', { emails: emails.slice(i, i + BATCH) })).suppressed;
      result.set(`${added} of ${emails.length} addresses added (${emails.length - added} were already suppressed).`);
      setText('');
      await list.reload();
    } catch (e) {
      if (added) result.set(`${added} addresses were added before the failure.`);
      // Each refused address by itself (not "row 2"), then what to do.
      if (e instanceof ApiError && e.status === 422 && e.errors.length) {
        const bad = e.errors.map(problemWords);
        setError(new Error(`${bad.slice(0, 10).join('; ')}${bad.length > 10 ? `; and ${bad.length - 10} more` : ''}. Nothing ${added ? 'from that batch ' : ''}was added: fix ${bad.length === 1 ? 'the address' : 'the addresses'} and add again.`));
      } else setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <PageHead title="Suppression list" />
      <p class="muted">Suppressed addresses are never mailed by any campaign of the workspace. Bounces, unsubscribes and complaints add themselves.</p>
      <section class="card" aria-labelledby="add-h">
        <h2 id="add-h">Add addresses</h2>
        <div class="grid2">
          <div>
            <Field label="Addresses (one per line, or separated by commas)">
              <textarea rows={4} value={text} onInput={(e) => setText(e.currentTarget.value)} />
            </Field>
            <button type="button" aria-disabled={busy || undefined} onClick={() => busy || add(extractEmails(text))}>
              Suppress
            </button>
          </div>
          <Field label="Or a CSV file" hint="Every cell that holds an address is taken.">
            <input
              type="file"
              accept=".csv,text/csv,text/plain"
              disabled={busy}
              onChange={async (e) => {
                const input = e.currentTarget;
                const file = input.files?.[0];
                if (!file) return;
                const text = await file.text();
                // Emptied once read: choosing the same file again (fixed, or after a failure) reads it again.
                input.value = '';
                await add(extractEmails(text));
              }}
            />
          </Field>
        </div>
        {result.note}
        <ErrorNote error={error} />
      </section>
      <section class="card" aria-labelledby="list-h">
        <h2 id="list-h">Suppressed addresses</h2>
        <form
          class="row"
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            setQuery({ q: search.trim() || null, offset: null });
          }}
        >
          <Field label="Search addresses">
            <input type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
          </Field>
          <Field label="Reason">
            <select value={reason} onChange={(e) => setQuery({ reason: e.currentTarget.value || null, offset: null })}>
              <option value="">any</option>
              {REASONS.map((r) => (
                <option key={r} value={r}>
                  {r.replace(/_/g, ' ')}
                </option>
              ))}
            </select>
          </Field>
          <button type="submit">Search</button>
        </form>
        <ErrorNote error={list.error} />
        {list.data && list.data.total === 0 && <p>{q || reason ? 'No suppressed address matches.' : 'The list is empty.'}</p>}
        {list.data && list.data.total > 0 && (
          <>
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">address</th>
                    <th scope="col">reason</th>
                    <th scope="col">source</th>
                    <th scope="col">since</th>
                    <th scope="col">
                      <span class="sr-only">actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {list.data.data.map((s) => (
                    <tr key={s.email}>
                      <td>{s.email}</td>
                      <td>
                        <Pill state={s.reason === 'manual' ? 'neutral' : 'suppressed'} label={s.reason.replace(/_/g, ' ')} />
                      </td>
                      <td>{s.source ?? <span class="muted">—</span>}</td>
                      <td>
                        <Ago at={s.createdAt} />
                      </td>
                      <td>
                        <Action
                          class="secondary"
                          label={`Remove ${s.email}`}
                          confirm={{
                            title: `Remove ${s.email} from the suppression list?`,
                            body: `Campaigns of this workspace may mail ${s.email} again (it was suppressed as ${s.reason.replace(/_/g, ' ')}).`,
                            yes: 'Remove',
                          }}
                          run={async () => {
                            await del(`/dashboard/api/suppression-list/${encodeURIComponent(s.email)}`);
                            await list.reload();
                            // Its row (and the button pressed) is gone: the result takes the focus.
                            result.show(`${s.email} was removed from the suppression list.`);
                          }}
                        >
                          Remove
                        </Action>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <Pager label="Suppressed addresses" total={list.data.total} limit={PAGE} offset={offset} onChange={(o) => setQuery({ offset: o || null })} />
          </>
        )}
      </section>
    </>
  );
}
