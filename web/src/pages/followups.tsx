// Follow-ups due now (and, on request, upcoming ones): open the thread, mark done or skip.
import { get, post, qs } from '../api.ts';
import { Link, setQuery, useLocation } from '../router.tsx';
import { Action, Ago, ErrorNote, PageHead, Pill, useLoad, useResultNote } from '../ui.tsx';

interface Followup {
  id: string;
  threadId: string;
  status: string;
  dueAt: string;
  attempt: number;
  thread: { contactEmail: string; contactName: string; subject: string };
}

/** Who and what a follow-up is about: the contact's name (else address) and the subject. */
function about(f: Followup): string {
  const who = f.thread.contactName || f.thread.contactEmail;
  return f.thread.subject ? `${who}: ${f.thread.subject}` : who;
}

export function FollowupsPage() {
  // In the address, as every list's filter is: a reload or a shared link keeps it.
  const { query } = useLocation();
  const upcoming = query.get('upcoming') === '1';
  const setUpcoming = (on: boolean) => setQuery({ upcoming: on ? '1' : null });
  const list = useLoad(() => get<{ data: Followup[] }>(`/v1/sdr/followups/due${qs({ limit: 200, includeUpcoming: upcoming ? 'true' : undefined })}`), [upcoming], 30_000);
  const startOfToday = new Date();
  startOfToday.setHours(0, 0, 0, 0);
  const endOfToday = new Date();
  endOfToday.setHours(23, 59, 59, 999);
  const when = (dueAt: string) => {
    const due = new Date(dueAt);
    if (due < startOfToday) return <Pill state="overdue" label="overdue" />;
    if (due <= endOfToday) return <Pill state="due_today" label="due today" />;
    return null;
  };
  const rows = list.data?.data ?? [];
  const result = useResultNote();
  // Done and Skip take the row (and the button pressed) away: the focus goes to what happened.
  const settle = async (f: Followup, how: 'complete' | 'skip') => {
    await post(`/v1/sdr/followups/${f.id}/${how}`);
    await list.reload();
    result.show(`The follow-up with ${about(f)} was ${how === 'complete' ? 'marked done' : 'skipped'}.`);
  };
  return (
    <>
      <PageHead title="Follow-ups">
        <label class="checks">
          <input type="checkbox" checked={upcoming} onChange={(e) => setUpcoming(e.currentTarget.checked)} /> Include upcoming
        </label>
      </PageHead>
      <ErrorNote error={list.error} />
      {result.note}
      {list.data && rows.length === 0 && <p>Nothing due{upcoming ? ' or upcoming' : ' now'}. Follow-ups appear when a thread waits for the prospect longer than a rule allows.</p>}
      {rows.length > 0 && (
        <section class="card" aria-label="Follow-ups">
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">thread</th>
                  <th scope="col">due</th>
                  <th scope="col" class="num">attempt</th>
                  <th scope="col">state</th>
                  <th scope="col">
                    <span class="sr-only">actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {rows.map((f) => (
                  <tr key={f.id}>
                    <td>
                      <Link href={`/inbox/${f.threadId}`}>{about(f)}</Link>
                    </td>
                    <td>
                      <Ago at={f.dueAt} /> {when(f.dueAt)}
                    </td>
                    <td class="num">{f.attempt}</td>
                    <td>
                      <Pill state={f.status} />
                    </td>
                    <td class="row">
                      <Action run={() => settle(f, 'complete')}>Done</Action>
                      <Action class="secondary" run={() => settle(f, 'skip')}>
                        Skip
                      </Action>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      )}
    </>
  );
}
