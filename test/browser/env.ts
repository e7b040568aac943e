// The world the browser tests walk through: the dashboard built once per run, a real
// `mailgate serve` process (role all: API, dashboard, sending, IMAP polling, webhooks) on a fresh
// database, the SMTP sink, Dovecot, an HTTPS webhook receiver, and Debian's Chromium. An
// in-process app on the same database seeds data and reads it back (the harness's request()
// checks every answer against the OpenAPI document).
import assert from 'node:assert/strict';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createTestDatabase, startTestApp, type TestApp } from '../support/harness.ts';
import { SmtpSink } from '../support/smtp.ts';
import { ImapTestServer } from '../support/dovecot.ts';
import { HttpsReceiver, testCertificates } from '../support/https.ts';
import { axe, launchChromium, watchedPage, type AxeViolation, type PageProblems } from '../support/chromium.ts';

const repo = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);

let built: Promise<string> | undefined;

/** `vite build` of web/ into a directory of this run (never the checkout's dist/). */
export function buildDashboard(): Promise<string> {
  built ??= (async () => {
    const out = path.join(repo, '.tmp', `dashboard-test-${process.pid}`);
    mkdirSync(path.dirname(out), { recursive: true });
    process.once('exit', () => rmSync(out, { recursive: true, force: true }));
    await run(process.execPath, [path.join(repo, 'node_modules/vite/bin/vite.js'), 'build', '--config', path.join(repo, 'web/vite.config.ts')], { cwd: repo, env: { ...process.env, MAILGATE_DASHBOARD_OUT: out } });
    return out;
  })();
  return built;
}

export interface Daemon {
  url: string;
  proc: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** `mailgate serve` as a real process; resolves once it logs that it is up, with its port. */
export async function startDaemon(env: NodeJS.ProcessEnv): Promise<Daemon> {
  const proc = spawn(process.execPath, ['bin/mailgate.js', 'serve'], { cwd: repo, env: { ...process.env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (c) => (out += c));
  proc.stderr!.on('data', (c) => (out += c));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`mailgate serve did not start:\n${out}`)), 60_000);
    const check = () => {
      const m = /"port":(\d+)[^\n]*"msg":"mailgate is up"/.exec(out);
      if (m) {
        clearTimeout(timer);
        proc.stdout!.off('data', check);
        resolve(Number(m[1]));
      }
    };
    proc.stdout!.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mailgate serve exited with ${code}:\n${out}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    proc,
    output: () => out,
    stop: () =>
      new Promise((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.removeAllListeners('exit');
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
      }),
  };
}

/** Every page checked: its name and axe's violations of any impact. */
/** The focused element: its id, its text and its aria-label. */
export async function activeElement(p: Page): Promise<{ id: string; text: string; label: string }> {
  return p.evaluate(() => {
    const e = document.activeElement as HTMLElement | null;
    return { id: e?.id ?? '', text: e?.innerText?.trim() ?? '', label: e?.getAttribute('aria-label') ?? '' };
  });
}

export const axeLog: { page: string; violations: AxeViolation[] }[] = [];

/** One line for the run's record: the checks made since `from` (an index into axeLog) and what axe found. */
export function axeSummary(from: number): string {
  const log = axeLog.slice(from);
  const all = log.flatMap((l) => l.violations);
  const bad = all.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const kinds = [...new Set(all.map((v) => `${v.id}/${v.impact}`))].join(', ') || 'none';
  return `axe: ${log.length} page checks, ${all.length} violations (${bad.length} serious/critical): ${kinds}`;
}

/** Console messages Chromium writes for a fetch answered 4xx (a 401 before sign-in, a 422 the page explains). */
const EXPECTED_HTTP = /^Failed to load resource: the server responded with a status of 4\d\d/;

export class World {
  readonly secret = randomBytes(32);
  readonly sink = new SmtpSink();
  readonly imap = new ImapTestServer();
  readonly receiver = new HttpsReceiver();
  app!: TestApp;
  daemon!: Daemon;
  browser!: Browser;
  dataDir = '';

  async start(extraEnv: NodeJS.ProcessEnv = {}): Promise<void> {
    const [dir] = await Promise.all([buildDashboard(), this.sink.start(), this.imap.start(), this.receiver.start()]);
    const database = await createTestDatabase();
    this.app = await startTestApp({ database, secretKey: this.secret, config: { webhookAllowPrivate: true } });
    this.dataDir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-browser-'));
    this.daemon = await startDaemon({
      MAILGATE_FROM_SOURCE: '1',
      DATABASE_URL: this.app.databaseUrl,
      MAILGATE_SECRET_KEY: this.secret.toString('hex'),
      MAILGATE_DATA_DIR: this.dataDir,
      MAILGATE_DASHBOARD_DIR: dir,
      MAILGATE_IMAP_POLL_INTERVAL: '1s',
      MAILGATE_WEBHOOK_ALLOW_PRIVATE: 'true',
      MAILGATE_WEBHOOK_RETRY_DELAYS: '1h',
      NODE_EXTRA_CA_CERTS: testCertificates().caPath,
      ...extraEnv,
    });
    this.browser = await launchChromium();
  }

  async stop(): Promise<void> {
    await this.browser?.close();
    await this.daemon?.stop();
    await this.app?.close();
    await Promise.all([this.imap.stop(), this.sink.stop(), this.receiver.stop()]);
    if (this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** A fresh browser profile state (cookies, storage) at 1280 px, clipboard allowed. */
  async context(opts: { colorScheme?: 'light' | 'dark' } = {}): Promise<BrowserContext> {
    const ctx = await this.browser.newContext({ baseURL: this.daemon.url, viewport: { width: 1280, height: 860 }, colorScheme: opts.colorScheme ?? 'light', acceptDownloads: true });
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: this.daemon.url });
    return ctx;
  }

  async page(ctx: BrowserContext): Promise<UserPage> {
    const { page, problems } = await watchedPage(ctx);
    page.setDefaultTimeout(15_000);
    return new UserPage(page, problems);
  }
}

/** A page a test drives as a user, checked on demand for axe, console errors and CSP. */
export class UserPage {
  constructor(
    readonly page: Page,
    readonly problems: PageProblems,
  ) {}

  /** axe (no serious or critical violation), no console error, no uncaught exception, no CSP report. */
  async check(name: string): Promise<void> {
    const violations = await axe(this.page);
    axeLog.push({ page: name, violations });
    const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(bad, [], `${name}: axe found serious/critical violations:\n${JSON.stringify(bad, null, 2)}`);
    this.assertClean(name);
  }

  assertClean(name: string): void {
    const errors = this.problems.consoleErrors.filter((e) => !EXPECTED_HTTP.test(e));
    assert.deepEqual(errors, [], `${name}: console errors`);
    assert.deepEqual(this.problems.pageErrors, [], `${name}: uncaught exceptions`);
    assert.deepEqual(this.problems.cspViolations, [], `${name}: Content-Security-Policy violations`);
  }

  /**
   * No page-level horizontal scrolling (at 390 px, or 1280 px at 200% zoom): the document is no
   * wider than the window. On failure, names the elements that stick out.
   */
  async assertNoHorizontalScroll(name: string): Promise<void> {
    const r = await this.page.evaluate(() => {
      const width = window.innerWidth;
      const wide = [...document.querySelectorAll('body *')]
        .filter((e) => e.getBoundingClientRect().right > width + 1 && !e.closest('.table-wrap'))
        .slice(0, 8)
        .map((e) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${e.className && typeof e.className === 'string' ? `.${e.className.split(' ').join('.')}` : ''} right=${Math.round(e.getBoundingClientRect().right)}`);
      return { scrollWidth: document.documentElement.scrollWidth, width, wide };
    });
    assert.ok(r.scrollWidth <= r.width, `${name}: the page scrolls sideways (${r.scrollWidth} px wide in a ${r.width} px window): ${r.wide.join(', ')}`);
  }

  /** Follows a link of the main navigation. */
  async nav(name: string): Promise<void> {
    await this.page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  }

  /** Signs in by pasting the key, as a person would. */
  async signIn(key: string): Promise<void> {
    await this.page.goto('/');
    await this.page.getByLabel('API key').fill(key);
    await this.page.getByRole('button', { name: 'Sign in' }).click();
    await this.page.getByRole('button', { name: 'Sign out' }).waitFor();
  }

  /** After a failed test: what the page showed, in .tmp/browser-failures/ (not committed). */
  async dump(name: string): Promise<void> {
    const dir = path.join(repo, '.tmp', 'browser-failures');
    mkdirSync(dir, { recursive: true });
    const base = path.join(dir, name.replace(/[^a-z0-9]+/gi, '-').slice(0, 80));
    try {
      writeFileSync(`${base}.png`, await this.page.screenshot({ fullPage: true }));
      writeFileSync(`${base}.txt`, `${this.page.url()}\n\n${await this.page.locator('body').innerText()}\n\n${JSON.stringify(this.problems, null, 2)}`);
    } catch {
      // The page may be gone; the assertion's message is what matters.
    }
  }

  /** The viewport as docs/screenshots/`file` (MAILGATE_SCREENSHOTS=1); `top`: scrolled to the page's top first. */
  async screenshot(file: string, opts: { top?: boolean } = {}): Promise<void> {
    if (process.env.MAILGATE_SCREENSHOTS !== '1') return;
    const to = path.join(repo, 'docs/screenshots', file);
    mkdirSync(path.dirname(to), { recursive: true });
    if (opts.top) await this.page.evaluate(() => window.scrollTo(0, 0));
    writeFileSync(to, await this.page.screenshot({ fullPage: false }));
  }
}
