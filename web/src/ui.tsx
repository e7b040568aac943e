// Small shared pieces: loading with polling, status pills, relative times, paging, secrets shown
// once, confirmations, action buttons that report their errors.
import { cloneElement, type ComponentChildren, type TargetedEvent, type VNode } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { describeError } from './api.ts';

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
  paused: 'muted', draft: 'muted', disabled: 'muted', revoked: 'muted', superseded: 'muted', discarded: 'muted', archived: 'muted', unknown: 'muted', skipped: 'muted', cancelled: 'muted', inactive: 'muted', disconnected: 'muted',
  needs_reauth: 'warn', rate_limited: 'warn', pending: 'warn', out_of_office: 'warn', needs_followup: 'warn', generated: 'info', edited: 'info', new: 'info', awaiting_reply: 'info',
  failed: 'bad', bounced: 'bad', bounce: 'bad', auth_failed: 'bad', unreachable: 'bad', suppressed: 'bad', unsubscribed: 'bad', unsubscribe: 'bad', not_interested: 'bad', lost_not_interested: 'bad', lost_timing: 'bad', lost_competitor: 'bad', blocked: 'bad',
};

/** A state: one colour and always the word (colour is never the only signal). */
export function Pill({ state, label }: { state: string; label?: string }) {
  return <span class={`pill tone-${TONE[state] ?? 'neutral'}`}>{label ?? state.replace(/_/g, ' ')}</span>;
}

export function relative(iso: string, now = Date.now()): string {
  const s = Math.round((new Date(iso).getTime() - now) / 1000);
  const a = Math.abs(s);
  const [n, unit] = a < 45 ? [s, 'second'] : a < 2700 ? [Math.round(s / 60), 'minute'] : a < 64800 ? [Math.round(s / 3600), 'hour'] : [Math.round(s / 86400), 'day'];
  if (unit === 'second') return s > 0 ? 'in a few seconds' : 'just now';
  return new Intl.RelativeTimeFormat('en', { numeric: 'auto' }).format(n as number, unit as Intl.RelativeTimeFormatUnit);
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

/**
 * A button that runs an async action, disables itself meanwhile and shows the failure next to
 * itself. `confirm` asks once first (destructive actions): what it is and what it changes.
 */
export function Action(props: {
  run: () => Promise<unknown>;
  children: ComponentChildren;
  confirm?: { title: string; body: string; yes: string };
  class?: string;
  disabled?: boolean;
  label?: string;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const dialog = useRef<HTMLDialogElement>(null);
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
      <button type="button" class={props.class} aria-label={props.label} disabled={busy || props.disabled} onClick={() => (props.confirm ? dialog.current?.showModal() : go())}>
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
      {error !== undefined && <ErrorNote error={error} />}
    </span>
  );
}

/**
 * A labelled control: the label names it through for/id (not by wrapping it, which would put a
 * select's chosen option into its accessible name), the hint describes it.
 */
export function Field({ label, hint, children }: { label: string; hint?: string; children: VNode<any> }) {
  const id = useId();
  const control = cloneElement(children, { id, 'aria-describedby': hint ? `${id}-hint` : undefined });
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
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

export function PageHead({ title, children }: { title: string; children?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · mailgate`;
  }, [title]);
  return (
    <header class="page-head">
      <h1 tabIndex={-1} id="page-title">
        {title}
      </h1>
      <div class="page-actions">{children}</div>
    </header>
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
