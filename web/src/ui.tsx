// Small shared pieces: loading with polling, status pills, relative times, paging, secrets shown
// once, confirmations, action buttons that report their errors.
import { cloneElement, createContext, type ComponentChildren, type TargetedEvent, type VNode } from 'preact';
import { useCallback, useContext, useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { describeError } from './api.ts';
import { relative } from './time.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => Promise<void>;
}

/**
 * Runs `fn` when `deps` change and, with `pollMs`, again every `pollMs` while the tab is visible.
 * The previous data stays on screen while a refresh runs, so nothing jumps.
 */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[], pollMs?: number): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const seq = useRef(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const reload = useCallback(async () => {
    const mine = ++seq.current;
    setLoading(true);
    try {
      const d = await fnRef.current();
      if (mine !== seq.current) return;
      setData(d);
      setError(undefined);
    } catch (e) {
      if (mine === seq.current) setError(e);
    } finally {
      if (mine === seq.current) setLoading(false);
    }
  }, []);
  useEffect(() => {
    void reload();
    if (!pollMs) return;
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') void reload();
    }, pollMs);
    return () => clearInterval(t);
  }, deps);
  return { data, error, loading, reload };
}

const TONE: Record<string, string> = {
  active: 'good', running: 'good', ok: 'good', delivered: 'good', interested: 'good', won: 'good', meeting_booked: 'good', enrolled: 'good', sent: 'good', completed: 'neutral', replied: 'info',
  paused: 'muted', draft: 'muted', disabled: 'muted', revoked: 'muted', superseded: 'muted', discarded: 'muted', archived: 'muted', unknown: 'muted', skipped: 'muted', cancelled: 'muted', removed: 'muted', inactive: 'muted', disconnected: 'muted',
  needs_reauth: 'warn', rate_limited: 'warn', pending: 'warn', out_of_office: 'warn', needs_followup: 'warn', generated: 'info', edited: 'info', new: 'info', awaiting_reply: 'info',
  due_today: 'warn', overdue: 'bad',
  failed: 'bad', bounced: 'bad', bounce: 'bad', auth_failed: 'bad', unreachable: 'bad', suppressed: 'bad', unsubscribed: 'bad', unsubscribe: 'bad', not_interested: 'bad', lost_not_interested: 'bad', lost_timing: 'bad', lost_competitor: 'bad', blocked: 'bad',
};

/** A state: one colour and always the word (colour is never the only signal). */
export function Pill({ state, label }: { state: string; label?: string }) {
  return <span class={`pill tone-${TONE[state] ?? 'neutral'}`}>{label ?? state.replace(/_/g, ' ')}</span>;
}

/** A mailbox's health in one word and colour everywhere: active green, needs reauth amber, not connected grey. */
export function MailPill({ state }: { state: string }) {
  return <Pill state={state} label={state === 'disconnected' ? 'not connected' : undefined} />;
}

/** "3 minutes ago" with the exact time on hover. */
export function Ago({ at, empty = '—' }: { at: string | null | undefined; empty?: string }) {
  if (!at) return <span class="muted">{empty}</span>;
  const exact = new Date(at).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  return (
    <time dateTime={at} title={exact}>
      {relative(at)}
    </time>
  );
}

export function ErrorNote({ error, prefix }: { error: unknown; prefix?: string }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {prefix ? `${prefix}: ` : ''}
      {describeError(error)}
    </p>
  );
}

export function Pager({ total, limit, offset, onChange, label }: { total: number; limit: number; offset: number; onChange: (offset: number) => void; label: string }) {
  // Past the end (the last page's rows removed, moved out of a filter; an old link): the last page instead of an empty one.
  const last = total > 0 ? Math.floor((total - 1) / limit) * limit : 0;
  useEffect(() => {
    if (offset > last) onChange(last);
  }, [offset, last]);
  const from = total === 0 ? 0 : offset + 1;
  const to = Math.min(offset + limit, total);
  return (
    <nav class="pager" aria-label={`${label} pages`}>
      <span>
        {from}–{to} of {total.toLocaleString('en')}
      </span>
      <button type="button" disabled={offset === 0} onClick={() => onChange(Math.max(0, offset - limit))}>
        Previous
      </button>
      <button type="button" disabled={offset + limit >= total} onClick={() => onChange(offset + limit)}>
        Next
      </button>
    </nav>
  );
}

export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** A secret shown once: set apart, with a copy button and the warning that it will not come back. */
export function SecretOnce({ label, value, onDone }: { label: string; value: string; onDone?: () => void }) {
  useFocusBackOnClose();
  const [copied, setCopied] = useState<'' | 'yes' | 'no'>('');
  return (
    <section class="secret" aria-label={label}>
      <h2>{label}</h2>
      <p>Copy it now: mailgate keeps only a hash and will not show it again.</p>
      <div class="secret-row">
        <code class="secret-value" data-testid="secret-value">
          {value}
        </code>
        <button type="button" onClick={async () => setCopied((await copyText(value)) ? 'yes' : 'no')}>
          Copy
        </button>
        {onDone && (
          <button type="button" class="secondary" onClick={onDone}>
            Done
          </button>
        )}
      </div>
      <p aria-live="polite" class="muted">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'no' ? 'The browser refused the clipboard: select the text and copy it.' : ''}
      </p>
    </section>
  );
}

type Report = (id: string, error: unknown, name?: string) => void;

/** Where the Actions inside a container report their failures (see useActionErrors). */
const ErrorSlot = createContext<Report | null>(null);

/**
 * The failures of the Actions rendered inside `Provider`, shown together wherever `errors` is
 * placed (below a toolbar, a header or a row of buttons): a failing button keeps its size and
 * place, and nothing beside it moves. An Action's error goes when it succeeds, when it is
 * reset (its `resetOn` changes) or when the Action goes away.
 */
export function useActionErrors(): { Provider: (p: { children: ComponentChildren }) => VNode; errors: VNode } {
  const [list, setList] = useState<{ id: string; error: unknown; name?: string }[]>([]);
  const report = useCallback<Report>(
    (id, error, name) =>
      setList((cur) => {
        const rest = cur.filter((x) => x.id !== id);
        if (error === undefined) return rest.length === cur.length ? cur : rest;
        return [...rest, { id, error, name }];
      }),
    [],
  );
  const Provider = useCallback(({ children }: { children: ComponentChildren }) => <ErrorSlot.Provider value={report}>{children}</ErrorSlot.Provider>, [report]);
  const errors = (
    <div class="action-errors">
      {list.map((x) => (
        <ErrorNote key={x.id} error={x.error} prefix={x.name} />
      ))}
    </div>
  );
  return { Provider, errors };
}

/** A row of buttons whose failures are shown below the row, not inside it. */
export function ActionRow({ children, class: cls = 'row' }: { children: ComponentChildren; class?: string }) {
  const { Provider, errors } = useActionErrors();
  return (
    <Provider>
      <div class={cls}>{children}</div>
      {errors}
    </Provider>
  );
}

/**
 * A button that runs an async action, marks itself busy meanwhile and reports the failure: to
 * the surrounding ActionRow / PageHead when there is one, else below itself. `confirm` asks once
 * first (destructive actions): what it is and what it changes. The button stays the same element
 * (busy is aria-disabled, not disabled), so keyboard focus stays on it through the action.
 */
export function Action(props: {
  run: () => Promise<unknown>;
  children: ComponentChildren;
  confirm?: { title: string; body: string; yes: string };
  class?: string;
  disabled?: boolean;
  label?: string;
  /** Names the action in its error message; default: the label or the button's text. */
  name?: string;
  /** When this changes (the failure's cause may be gone), the shown error is cleared. */
  resetOn?: unknown;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const dialog = useRef<HTMLDialogElement>(null);
  const slot = useContext(ErrorSlot);
  const id = useId();
  const name = props.name ?? props.label ?? (typeof props.children === 'string' ? props.children : undefined);
  useEffect(() => setError(undefined), [props.resetOn]);
  useEffect(() => slot?.(id, error, name), [error, name]);
  useEffect(() => () => slot?.(id, undefined), []);
  const go = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await props.run();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="action">
      <button
        type="button"
        class={props.class}
        aria-label={props.label}
        aria-disabled={busy || undefined}
        disabled={props.disabled}
        onClick={() => {
          if (busy) return;
          if (props.confirm) dialog.current?.showModal();
          else void go();
        }}
      >
        {props.children}
      </button>
      {props.confirm && (
        <dialog ref={dialog} aria-label={props.confirm.title}>
          <h2>{props.confirm.title}</h2>
          <p>{props.confirm.body}</p>
          <div class="row">
            <button
              type="button"
              class="danger"
              onClick={() => {
                dialog.current?.close();
                void go();
              }}
            >
              {props.confirm.yes}
            </button>
            <button type="button" class="secondary" onClick={() => dialog.current?.close()}>
              Cancel
            </button>
          </div>
        </dialog>
      )}
      {!slot && error !== undefined && <ErrorNote error={error} />}
    </span>
  );
}

/**
 * A labelled control: the label names it through for/id (not by wrapping it, which would put a
 * select's chosen option into its accessible name), the hint describes it. `error` marks it
 * invalid (aria-invalid) and says why next to it.
 */
export function Field({ label, hint, error, children }: { label: string; hint?: string; error?: string; children: VNode<any> }) {
  const id = useId();
  const describedBy = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  const control = cloneElement(children, { id, 'aria-describedby': describedBy, 'aria-invalid': error ? 'true' : undefined });
  return (
    <div class="field">
      <label class="field-label" for={id}>
        {label}
      </label>
      {control}
      {hint && (
        <span class="hint" id={`${id}-hint`}>
          {hint}
        </span>
      )}
      {error && (
        <span class="field-error" id={`${id}-error`}>
          {error}
        </span>
      )}
    </div>
  );
}

/**
 * What an action did, said in a status line. `show` after an action that takes its own row (and
 * the button pressed) away: the text is set and the line takes the focus, instead of <body>.
 */
export function useResultNote(): { note: VNode; set: (text: string) => void; show: (text: string) => void } {
  const [text, setText] = useState('');
  const ref = useRef<HTMLParagraphElement>(null);
  const note = (
    <p role="status" class={text ? 'ok' : ''} tabIndex={-1} ref={ref}>
      {text}
    </p>
  );
  return {
    note,
    set: setText,
    show: (t: string) => {
      setText(t);
      ref.current?.focus();
    },
  };
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

let titleFocusPending = false;

/**
 * A new page: focus its heading so keyboard and screen-reader users start there. A page that
 * loads first (a campaign) has no heading yet: its PageHead takes the focus when it appears.
 */
export function focusPageTitle() {
  const h = document.getElementById('page-title');
  titleFocusPending = !h;
  h?.focus({ preventScroll: true });
}

/**
 * For a section that closes itself (a form's Cancel or Done, a secret's Done): when it goes
 * and takes the focus with it, the focus goes back to what opened it (the button pressed), or
 * to the page's heading when that is gone too. Without it the browser put the focus on the
 * page's body, and a keyboard user started again from the top.
 */
export function useFocusBackOnClose() {
  // A layout effect: it runs as the section is put on the page, while the focus is still on
  // what opened it. A plain effect waits for the next frame, and a focus moved by then (a quick
  // Tab, a test pressing the section's own Cancel) was taken for the opener.
  useLayoutEffect(() => {
    const opener = document.activeElement instanceof HTMLElement && document.activeElement !== document.body ? document.activeElement : null;
    return () => {
      // After the section's elements are gone from the page.
      setTimeout(() => {
        if (document.activeElement && document.activeElement !== document.body) return;
        if (opener?.isConnected) opener.focus({ preventScroll: true });
        else document.getElementById('page-title')?.focus({ preventScroll: true });
      });
    };
  }, []);
}

export function PageHead({ title, children }: { title: string; children?: ComponentChildren }) {
  const { Provider, errors } = useActionErrors();
  useEffect(() => {
    document.title = `${title} · mailgate`;
  }, [title]);
  useEffect(() => {
    if (!titleFocusPending) return;
    titleFocusPending = false;
    // Unless the person already moved on (a click or Tab while the page loaded).
    if (!document.activeElement || document.activeElement === document.body) document.getElementById('page-title')?.focus({ preventScroll: true });
  }, []);
  return (
    <Provider>
      <header class="page-head">
        <h1 tabIndex={-1} id="page-title">
          {title}
        </h1>
        <div class="page-actions">{children}</div>
      </header>
      {errors}
    </Provider>
  );
}

export function Num({ n }: { n: number | null | undefined }) {
  return <>{n === null || n === undefined ? '—' : n.toLocaleString('en')}</>;
}

export function pct(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}

export type FormEvent = TargetedEvent<HTMLFormElement, Event>;

/** Reads a form's named fields as strings. */
export function formValues(e: FormEvent): Record<string, string> {
  e.preventDefault();
  const out: Record<string, string> = {};
  new FormData(e.currentTarget).forEach((v, k) => {
    out[k] = typeof v === 'string' ? v : '';
  });
  return out;
}

const UNSENT = 'mailgate.unsent.';

/**
 * Text being written (a reply, an edited draft) kept in this tab's sessionStorage until it is
 * sent, so an ended session or a reload does not lose it. `clear` forgets it (sent, discarded).
 */
export function useUnsentText(key: string, initial: string): [string, (v: string) => void, () => void] {
  const [text, setText] = useState(() => {
    try {
      return sessionStorage.getItem(UNSENT + key) ?? initial;
    } catch {
      return initial;
    }
  });
  const set = useCallback(
    (v: string) => {
      setText(v);
      try {
        if (v === initial || v === '') sessionStorage.removeItem(UNSENT + key);
        else sessionStorage.setItem(UNSENT + key, v);
      } catch {
        // Storage full or refused: the text stays on screen, only not kept.
      }
    },
    [key, initial],
  );
  const clear = useCallback(() => forgetUnsentText(key), [key]);
  return [text, set, clear];
}

/** The text useUnsentText keeps for `key` in this tab, or null. */
export function keptUnsentText(key: string): string | null {
  try {
    return sessionStorage.getItem(UNSENT + key);
  } catch {
    return null;
  }
}

/** Forgets the text kept for `key` (what useUnsentText's `clear` does). */
export function forgetUnsentText(key: string) {
  try {
    sessionStorage.removeItem(UNSENT + key);
  } catch {
    // Nothing kept.
  }
}

/** Signing out on purpose forgets every unsent text of the tab. */
export function forgetUnsentTexts() {
  try {
    for (const k of Object.keys(sessionStorage)) if (k.startsWith(UNSENT)) sessionStorage.removeItem(k);
  } catch {
    // Nothing kept.
  }
}

export function hasUnsentTexts(): boolean {
  try {
    return Object.keys(sessionStorage).some((k) => k.startsWith(UNSENT));
  } catch {
    return false;
  }
}
