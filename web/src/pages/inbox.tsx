// The SDR workspace: the inbox (counts per status, filters, search, snooze, priority order,
// paging) beside the open thread; keyboard first (j/k, /, e, r, ?). New replies appear by polling.
import { useEffect, useRef, useState } from 'preact/hooks';
import { get, qs } from '../api.ts';
import { Link, navigate, setQuery, useLocation } from '../router.tsx';
import { Ago, ErrorNote, Field, MailPill, PageHead, Pager, Pill, useLoad } from '../ui.tsx';
import { THREAD_STATUSES, type ProspectThread } from '../types.ts';
import { ThreadView } from './thread.tsx';

export const INBOX_POLL_MS = 10_000;
const PAGE = 50;
/**
 * What the inbox lists by default: every thread but the archived ones, as a mail client's inbox
 * leaves out what was archived (`e`). "all" (status=all in the address) lists those too.
 */
const INBOX_STATUSES = THREAD_STATUSES.filter((s) => s !== 'archived');

interface InboxPage {
  data: { threads: ProspectThread[]; total: number; hasMore: boolean };
}

function typing(e: KeyboardEvent): boolean {
  const t = e.target as HTMLElement | null;
  return !!t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName));
}

export function InboxPage({ threadId }: { threadId: string | null }) {
  const { query } = useLocation();
  const status = query.get('status') ?? '';
  const category = query.get('category') ?? '';
  const search = query.get('search') ?? '';
  const snoozed = query.get('snoozed') ?? 'false';
  const orderBy = query.get('orderBy') ?? 'priority';
  const offset = Number(query.get('offset') ?? 0) || 0;
  const [draftSearch, setDraftSearch] = useState(search);
  // The box says what the list is searched for: a link or the Inbox tab that drops the search empties it.
  useEffect(() => setDraftSearch(search), [search]);
  const searchBox = useRef<HTMLInputElement>(null);
  const help = useRef<HTMLDialogElement>(null);
  const filters = { status: status === '' ? INBOX_STATUSES : status === 'all' ? undefined : status, category, search, snoozed: snoozed === 'all' ? undefined : snoozed, orderBy };
  const inbox = useLoad(() => get<InboxPage>(`/v1/sdr/inbox${qs({ ...filters, limit: PAGE, offset })}`), [status, category, search, snoozed, orderBy, offset], INBOX_POLL_MS);
  // Counts per status come from the inbox's exact totals (kept by counters in the database).
  const counts = useLoad(
    async () => {
      const all = await Promise.all(THREAD_STATUSES.map((s) => get<InboxPage>(`/v1/sdr/inbox${qs({ status: s, snoozed: 'false', limit: 1 })}`).then((r) => [s, r.data.total] as const)));
      return Object.fromEntries(all) as Record<string, number>;
    },
    [],
    INBOX_POLL_MS * 3,
  );
  // The mailbox replies go out through: a warning above the desk when it cannot send.
  const mail = useLoad(() => get<{ data: { connected: boolean; healthState: string; email: string | null } }>('/v1/sdr/mail/status'), [], INBOX_POLL_MS * 6);
  const mailState = mail.data?.data.healthState;
  const threads = inbox.data?.data.threads ?? [];
  const keepQuery = location.search;
  const open = (id: string) => navigate(`/inbox/${id}${keepQuery}`);
  const pane = useRef<HTMLDivElement>(null);

  // The open thread is always in view: at desktop widths both panes scroll on their own and
  // stay on screen (styles.css .desk), so a newly opened thread starts at its top; on a narrow
  // screen, where the thread comes after the list, opening one scrolls to it.
  const listed = threads.length > 0;
  useEffect(() => {
    const el = pane.current;
    if (!threadId || !el) return;
    el.scrollTop = 0;
    const top = el.getBoundingClientRect().top;
    if (top < 0 || top > window.innerHeight / 2) el.scrollIntoView({ block: 'start' });
  }, [threadId, listed]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.metaKey || e.ctrlKey || e.altKey || typing(e)) return;
      // An open dialog (these shortcuts' own list, a confirmation) has the keyboard: nothing
      // behind it moves, opens or is archived.
      if (document.querySelector('dialog[open]')) return;
      const i = threads.findIndex((t) => t.id === threadId);
      if (e.key === 'j' || e.key === 'k') {
        e.preventDefault();
        const next = e.key === 'j' ? Math.min(threads.length - 1, i + 1) : Math.max(0, i === -1 ? 0 : i - 1);
        if (threads[next]) open(threads[next].id);
        document.querySelector<HTMLElement>(`[data-thread="${threads[next]?.id}"] a`)?.focus();
      } else if (e.key === '/') {
        e.preventDefault();
        searchBox.current?.focus();
      } else if (e.key === '?') {
        e.preventDefault();
        help.current?.showModal();
      } else if (e.key === 'r') {
        const box = document.getElementById('manual-reply');
        if (box) {
          e.preventDefault();
          box.focus();
        }
      } else if (e.key === 'e') {
        const archive = document.querySelector<HTMLButtonElement>('button[data-transition="archived"]');
        if (archive) {
          e.preventDefault();
          archive.click();
        }
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [threads, threadId, keepQuery]);

  return (
    <>
      <PageHead title="Inbox">
        <button type="button" class="secondary" onClick={() => help.current?.showModal()}>
          Keyboard shortcuts <kbd>?</kbd>
        </button>
      </PageHead>
      <dialog ref={help} aria-label="Keyboard shortcuts">
        <h2>Keyboard shortcuts</h2>
        <table>
          <tbody>
            {[
              ['j / k', 'next / previous thread'],
              ['/', 'search'],
              ['r', 'write a reply in the open thread'],
              ['e', 'archive the open thread'],
              ['?', 'this list'],
            ].map(([k, v]) => (
              <tr key={k}>
                <td>
                  <kbd>{k}</kbd>
                </td>
                <td>{v}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <button type="button" onClick={() => help.current?.close()}>
          Close
        </button>
      </dialog>
      <div class="counts" role="group" aria-label="Threads by status">
        <button type="button" aria-pressed={status === ''} data-status-count="inbox" onClick={() => setQuery({ status: null, offset: null })}>
          inbox {counts.data ? INBOX_STATUSES.reduce((n, s) => n + counts.data![s], 0) : ''}
        </button>
        {THREAD_STATUSES.map((s) => (
          <button type="button" key={s} aria-pressed={status === s} data-status-count={s} onClick={() => setQuery({ status: s, offset: null })}>
            {s.replace(/_/g, ' ')} {counts.data ? counts.data[s] : ''}
          </button>
        ))}
        <button type="button" aria-pressed={status === 'all'} onClick={() => setQuery({ status: 'all', offset: null })}>
          all
        </button>
      </div>
      {mailState && mailState !== 'active' && (threads.length > 0 || mailState !== 'disconnected') && (
        <p class="notice" role="status" data-testid="mail-warning">
          <MailPill state={mailState} />{' '}
          {mailState === 'needs_reauth'
            ? 'Your mailbox refused mailgate\'s login (a changed password?): replies cannot be sent until you reconnect it.'
            : mailState === 'rate_limited'
              ? 'Your mail server is limiting mailgate\'s logins: sending may fail for a while.'
              : 'Your mailbox is not connected: replies go out through your own mailbox, so connect it first.'}{' '}
          <Link href="/mail">{mailState === 'disconnected' ? 'Connect it on Mail connection' : 'Reconnect on Mail connection'}</Link>
        </p>
      )}
      <div class={`desk${threadId ? ' has-thread' : ''}`}>
        <div class="desk-list">
          <form
            class="row"
            role="search"
            onSubmit={(e) => {
              e.preventDefault();
              setQuery({ search: draftSearch.trim() || null, offset: null });
            }}
          >
            <Field label="Search">
              <input ref={searchBox} type="search" value={draftSearch} placeholder="name, email or subject" onInput={(e) => setDraftSearch(e.currentTarget.value)} />
            </Field>
            <Field label="Category">
              <select value={category} onChange={(e) => setQuery({ category: e.currentTarget.value || null, offset: null })}>
                <option value="">all</option>
                <option value="A">A</option>
                <option value="B">B</option>
                <option value="C">C</option>
              </select>
            </Field>
            <Field label="Snoozed">
              <select value={snoozed} onChange={(e) => setQuery({ snoozed: e.currentTarget.value === 'false' ? null : e.currentTarget.value, offset: null })}>
                <option value="false">hide snoozed</option>
                <option value="true">only snoozed</option>
                <option value="all">both</option>
              </select>
            </Field>
            <Field label="Order">
              <select value={orderBy} onChange={(e) => setQuery({ orderBy: e.currentTarget.value === 'priority' ? null : e.currentTarget.value, offset: null })}>
                <option value="priority">priority</option>
                <option value="lastMessage">last message</option>
                <option value="created">created</option>
              </select>
            </Field>
            <button type="submit" class="secondary">
              Search
            </button>
          </form>
          <ErrorNote error={inbox.error} />
          {/* Above the list, as in a mail client: in view at 1280 x 800, where the list's pane ends below the fold. */}
          {inbox.data && inbox.data.data.total > 0 && <Pager label="Threads" total={inbox.data.data.total} limit={PAGE} offset={offset} onChange={(o) => setQuery({ offset: o || null })} />}
          {inbox.data && threads.length === 0 && (
            <div class="empty">
              {search || status || category || snoozed !== 'false' ? (
                'No thread matches.'
              ) : (
                <>
                  <p>Your inbox is empty: threads arrive when an admin assigns you a reply.</p>
                  {mailState && mailState !== 'active' && (
                    <p>
                      Meanwhile, connect the mailbox your replies go out through: <Link href="/mail">Mail connection</Link>.
                    </p>
                  )}
                </>
              )}
            </div>
          )}
          {threads.length > 0 && (
            <ul class="threads" aria-label="Threads">
              {threads.map((t) => (
                <li key={t.id} data-thread={t.id} aria-current={t.id === threadId ? 'true' : undefined}>
                  <Link href={`/inbox/${t.id}${keepQuery}`}>
                    <div class="t-top">
                      <strong>{t.contactName || t.contactEmail}</strong>
                      <Ago at={t.lastMessageAt} />
                    </div>
                    <div class="t-subject">{t.subject}</div>
                    <div class="row">
                      <Pill state={t.status} /> <span class="pill tone-neutral">{t.category}</span>
                      {t.snoozedUntil && (
                        <span class="muted">
                          snoozed until <Ago at={t.snoozedUntil} />
                        </span>
                      )}
                    </div>
                  </Link>
                </li>
              ))}
            </ul>
          )}
        </div>
        <div class="desk-thread" ref={pane}>
          {threadId ? (
            <>
              <button
                type="button"
                class="link narrow-only"
                onClick={() => {
                  const link = document.querySelector<HTMLElement>(`[data-thread="${threadId}"] a`);
                  if (link) link.focus();
                  else searchBox.current?.focus();
                }}
              >
                Back to the list
              </button>
              <ThreadView
                id={threadId}
                onChanged={() => {
                  void inbox.reload();
                  void counts.reload();
                }}
              />
            </>
          ) : (
            <p class="empty">Open a thread from the list (or press j).</p>
          )}
        </div>
      </div>
    </>
  );
}
