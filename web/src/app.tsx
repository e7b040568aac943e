// The shell: the session (sign-in with an API key, sign-out), navigation by role, light/dark,
// and the page chosen by the path.
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import { ApiError, call, describeError, get, session as currentSession, setSession, whenSignedOut, type Session } from './api.ts';
import { Link, match, navigate, scrollToHash, useLocation } from './router.tsx';
import { ErrorNote, Field, focusPageTitle, forgetUnsentTexts, hasUnsentTexts } from './ui.tsx';
import { Overview } from './pages/overview.tsx';
import { CampaignPage } from './pages/campaign.tsx';
import { KeysPage } from './pages/keys.tsx';
import { SuppressionPage } from './pages/suppression.tsx';
import { SendersPage } from './pages/senders.tsx';
import { WebhooksPage, WebhookPage } from './pages/webhooks.tsx';
import { RepliesPage } from './pages/replies.tsx';
import { SdrsPage } from './pages/sdrs.tsx';
import { InboxPage } from './pages/inbox.tsx';
import { FollowupsPage } from './pages/followups.tsx';
import { MailPage } from './pages/mail.tsx';

type Theme = 'system' | 'light' | 'dark';

let signingOut = false;

function applyTheme(t: Theme) {
  if (t === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}

export function App() {
  const [session, setCurrent] = useState<Session | null | undefined>(undefined);
  const [ended, setEnded] = useState(false);
  // The session is refused, not over (403: its SDR was deactivated): the reason, on the sign-in page.
  const [refused, setRefused] = useState('');
  const [signOutError, setSignOutError] = useState<unknown>(undefined);
  const [theme, setTheme] = useState<Theme>(() => (localStorage.getItem('mailgate.theme') as Theme) || 'system');
  const { path } = useLocation();

  useEffect(() => {
    // The session ended under the page (idle expiry, its key revoked): say so on the sign-in
    // page. The address stays, so signing in again returns to the same page, and unsent text
    // (useUnsentText) is still there.
    whenSignedOut(() => {
      // A poll answered 401 while (or after) signing out on purpose: nothing to explain.
      if (signingOut || !currentSession()) return;
      setSession(null);
      setCurrent(null);
      setEnded(true);
    });
    get<Session>('/dashboard/api/session')
      .then((s) => {
        setSession(s);
        setCurrent(s);
        // An address with #hash (a link from elsewhere): the target exists once its page renders.
        if (location.hash) scrollToHash(location.hash);
      })
      .catch((e) => {
        if (e instanceof ApiError && e.status === 403) setRefused(describeError(e));
        setCurrent(null);
      });
  }, []);
  useEffect(() => {
    applyTheme(theme);
    localStorage.setItem('mailgate.theme', theme);
  }, [theme]);
  // A new page: move focus to its heading so keyboard and screen-reader users start there.
  // Moving inside one page (another thread of the inbox, a filter) keeps the focus where it is.
  const page = session?.role === 'sdr' && (path === '/' || path.startsWith('/inbox')) ? '/inbox' : path;
  // A layout effect: as the new page is put on the page, in the same task as the navigation. A
  // plain effect ran a frame later and took the focus from whatever had it by then (a button
  // pressed at once: its key went to the heading instead).
  useLayoutEffect(() => {
    focusPageTitle();
  }, [page, session]);

  if (session === undefined) return <p class="loading">Loading…</p>;
  if (session === null)
    return (
      <SignIn
        ended={ended}
        refused={refused}
        onSignedIn={(s) => {
          setEnded(false);
          setRefused('');
          setCurrent(s);
        }}
      />
    );

  const signOut = async () => {
    signingOut = true;
    setSignOutError(undefined);
    try {
      await call('DELETE', '/dashboard/api/session');
    } catch (err) {
      // Not signed out (the daemon unreachable): the session still works and a reload would
      // bring it back, so the page stays and says so instead of showing the sign-in page.
      signingOut = false;
      setSignOutError(err);
      return;
    }
    forgetUnsentTexts();
    setSession(null);
    setCurrent(null);
    navigate('/');
    signingOut = false;
  };
  const links =
    session.role === 'admin'
      ? [
          ['/', 'Overview'],
          ['/senders', 'Senders'],
          ['/replies', 'Replies'],
          ['/sdrs', 'SDRs'],
          ['/suppression', 'Suppression'],
          ['/webhooks', 'Webhooks'],
          ['/keys', 'API keys'],
        ]
      : [
          ['/', 'Inbox'],
          ['/followups', 'Follow-ups'],
          ['/mail', 'Mail connection'],
        ];
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">mailgate</span>
        <nav aria-label="Main">
          <ul>
            {links.map(([href, label]) => {
              const current = href === '/' ? path === '/' || (session.role === 'sdr' && path.startsWith('/inbox')) || path.startsWith('/campaigns') : path.startsWith(href);
              return (
                <li key={href}>
                  <Link href={href} aria-current={current ? 'page' : undefined}>
                    {label}
                  </Link>
                </li>
              );
            })}
          </ul>
        </nav>
        <div class="top-right">
            <select aria-label="Theme" value={theme} onChange={(e) => setTheme(e.currentTarget.value as Theme)}>
              <option value="system">System theme</option>
              <option value="light">Light</option>
              <option value="dark">Dark</option>
            </select>
          <span class="muted who">
            {session.workspaceName} · {session.role === 'admin' ? 'admin' : 'SDR'}
          </span>
          <button type="button" class="secondary" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      {signOutError !== undefined && (
        <div class="top-error">
          <ErrorNote error={signOutError} prefix="Not signed out (this session still works)" />
        </div>
      )}
      <main id="main">{session.role === 'admin' ? <AdminRoutes path={path} /> : <SdrRoutes path={path} session={session} />}</main>
    </>
  );
}

function AdminRoutes({ path }: { path: string }) {
  let m: Record<string, string> | null;
  if (path === '/') return <Overview />;
  if ((m = match('/campaigns/:id', path))) return <CampaignPage id={m.id} />;
  if (path === '/senders') return <SendersPage />;
  if (path === '/replies') return <RepliesPage />;
  if (path === '/sdrs') return <SdrsPage />;
  if (path === '/suppression') return <SuppressionPage />;
  if (path === '/webhooks') return <WebhooksPage />;
  if ((m = match('/webhooks/:id', path))) return <WebhookPage id={m.id} />;
  if (path === '/keys') return <KeysPage />;
  return <NotFound />;
}

function SdrRoutes({ path, session }: { path: string; session: Session }) {
  let m: Record<string, string> | null;
  if (path === '/' || path === '/inbox') return <InboxPage threadId={null} />;
  if ((m = match('/inbox/:id', path))) return <InboxPage threadId={m.id} />;
  if (path === '/followups') return <FollowupsPage />;
  if (path === '/mail') return <MailPage session={session} />;
  return <NotFound />;
}

function NotFound() {
  return (
    <section>
      <h1 tabIndex={-1} id="page-title">
        Not found
      </h1>
      <p>
        There is no page at this address. <Link href="/">Go to the start page</Link>.
      </p>
    </section>
  );
}

function SignIn({ onSignedIn, ended, refused }: { onSignedIn: (s: Session) => void; ended: boolean; refused: string }) {
  const [error, setError] = useState(refused);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    document.title = 'Sign in · mailgate';
  }, []);
  return (
    <main id="main" class="signin">
      <h1 tabIndex={-1} id="page-title">
        Sign in to mailgate
      </h1>
      {ended && (
        <p class="notice" role="alert" data-testid="session-ended">
          Your session ended (it was idle too long, or its key was revoked): sign in again to continue where you were.{hasUnsentTexts() ? ' What you had written and not sent yet is kept.' : ''}
        </p>
      )}
      <p>Paste an API key. An admin key opens the admin pages; an SDR key opens that SDR's inbox. The key is exchanged for a session cookie and not stored in the browser.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          if (busy) return;
          const apiKey = String(new FormData(e.currentTarget).get('apiKey') ?? '').trim();
          if (!apiKey) return setError('Paste an API key first (it starts with mgk_).');
          setBusy(true);
          setError('');
          try {
            const { body } = await call<Session>('POST', '/dashboard/api/session', { apiKey });
            setSession(body);
            onSignedIn(body);
          } catch (err) {
            setError(describeError(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        <Field label="API key">
          <input name="apiKey" type="password" autoComplete="off" spellcheck={false} required />
        </Field>
        <button type="submit" aria-disabled={busy || undefined}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
      <p class="muted">
        No key yet? <code>mailgate key create --workspace NAME --role admin</code> prints one.
      </p>
    </main>
  );
}

export function Section({ title, children, id }: { title: string; children: ComponentChildren; id?: string }) {
  return (
    <section class="card" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}
