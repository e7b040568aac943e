// A real browser for the dashboard tests: Debian's `chromium`, installed on first use (as root,
// through apt-get, like Dovecot in dovecot.ts), driven by playwright-core pointed at that
// executable (playwright never downloads a browser). Every page a test opens reports console
// errors, uncaught exceptions and Content-Security-Policy violations, and is checked with
// axe-core on request.
import { aptInstall } from './apt.ts';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** The contract's flags; playwright adds a fresh temporary --user-data-dir for every launch. */
export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export function ensureChromium(): string {
  if (existsSync(CHROMIUM)) return CHROMIUM;
  if (process.getuid?.() !== 0) throw new Error('the browser tests need Chromium: run as root once, or `apt-get install chromium`');
  aptInstall(CHROMIUM, ['--no-install-recommends', 'chromium', 'fonts-liberation']);
  if (!existsSync(CHROMIUM)) throw new Error('apt-get installed chromium, but /usr/bin/chromium is missing');
  return CHROMIUM;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: ensureChromium(), headless: true, args: CHROMIUM_FLAGS, timeout: 60_000 });
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: number;
  targets: string[];
}

/** What one page did wrong while a test used it. */
export interface PageProblems {
  consoleErrors: string[];
  pageErrors: string[];
  cspViolations: string[];
}

/**
 * A page that records console errors, uncaught exceptions and CSP violations (from the
 * `securitypolicyviolation` event, registered before any page script runs).
 */
export async function watchedPage(context: BrowserContext): Promise<{ page: Page; problems: PageProblems }> {
  const page = await context.newPage();
  const problems: PageProblems = { consoleErrors: [], pageErrors: [], cspViolations: [] };
  await page.exposeBinding('__mailgateCsp', (_src, v: string) => void problems.cspViolations.push(v));
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      (window as unknown as { __mailgateCsp(v: string): void }).__mailgateCsp(`${e.violatedDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.consoleErrors.push(`${m.text()} (${m.location().url}:${m.location().lineNumber})`);
  });
  page.on('pageerror', (e) => problems.pageErrors.push(e.stack ?? e.message));
  return { page, problems };
}

/** axe-core over the page as it is now; the sandboxed preview frame (mail HTML) is left out. */
export async function axe(page: Page): Promise<AxeViolation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    const r = await (window as any).axe.run(document, { iframes: false, resultTypes: ['violations'] });
    return r.violations.map((v: any) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length, targets: v.nodes.slice(0, 5).map((n: any) => String(n.target)) }));
  });
  return result as AxeViolation[];
}
