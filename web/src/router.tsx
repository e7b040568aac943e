// Client-side routing on the History API: the daemon answers index.html for every dashboard
// path, and this module maps the path to a page.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

type Listener = () => void;
const listeners = new Set<Listener>();

export function navigate(to: string, opts: { replace?: boolean } = {}) {
  const hash = to.includes('#') ? to.slice(to.indexOf('#')) : '';
  if (to === location.pathname + location.search + location.hash) return void (hash && scrollToHash(hash));
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  listeners.forEach((l) => l());
  if (hash) scrollToHash(hash);
}

window.addEventListener('popstate', () => listeners.forEach((l) => l()));

let pendingHash: { stop: () => void } | undefined;

/**
 * Scrolls to the element a `#hash` names, as a browser does for a page it loads. The target
 * may appear only once its page has loaded its data (a campaign's #leads), so it is waited for,
 * for a few seconds at most; scrolling or typing meanwhile cancels it.
 */
export function scrollToHash(hash: string) {
  pendingHash?.stop();
  let id = hash.replace(/^#/, '');
  try {
    id = decodeURIComponent(id);
  } catch {
    // Not percent-encoded UTF-8: the id as written.
  }
  if (!id) return;
  const find = () => {
    const el = document.getElementById(id);
    if (!el) return false;
    el.scrollIntoView({ block: 'start' });
    return true;
  };
  if (find()) return;
  const observer = new MutationObserver(() => find() && stop());
  const timer = setTimeout(() => stop(), 5000);
  const stop = () => {
    observer.disconnect();
    clearTimeout(timer);
    window.removeEventListener('wheel', stop);
    window.removeEventListener('keydown', stop);
    pendingHash = undefined;
  };
  observer.observe(document.body, { childList: true, subtree: true });
  window.addEventListener('wheel', stop, { passive: true });
  window.addEventListener('keydown', stop);
  pendingHash = { stop };
}

/** The current path and query, re-rendering on navigation. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const [, setTick] = useState(0);
  useEffect(() => {
    const l = () => setTick((t) => t + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

/**
 * Matches `/campaigns/:id` style patterns; returns the named parts or null. A named part is an
 * id, which the pages put into API paths (`/v1/webhooks/${id}`): one that decodes to a path of
 * its own (`..%2F..%2Fdashboard%2Fapi%2Fsession`), a query or a fragment matches nothing, or a
 * crafted link would turn a page's buttons into requests, with the CSRF token, to other paths.
 */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/').filter(Boolean);
  const a = path.split('/').filter(Boolean);
  if (p.length !== a.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(':')) {
      let part: string;
      try {
        part = decodeURIComponent(a[i]);
      } catch {
        return null;
      }
      if (!/^[A-Za-z0-9_-]+$/.test(part)) return null;
      out[p[i].slice(1)] = part;
    } else if (p[i] !== a[i]) return null;
  }
  return out;
}

/** Updates the query string in place (filters, paging) without a new history entry. */
export function setQuery(changes: Record<string, string | number | null | undefined>) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === '') q.delete(k);
    else q.set(k, String(v));
  }
  const s = q.toString();
  navigate(location.pathname + (s ? `?${s}` : ''), { replace: true });
}

export function Link(props: { href: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' | 'true' }) {
  const { href, children, ...rest } = props;
  return (
    <a
      {...rest}
      href={href}
      onClick={(e) => {
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}
