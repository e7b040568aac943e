// Dashboard benchmark (issue #17's targets). Run: npm run bench:dashboard
// - the compressed JavaScript of the first page (what the daemon sends with br / gzip);
// - the first load of the overview with 20 campaigns, cold browser cache (a new Chromium
//   context each time), to "interactive": every campaign row with its stats on screen (the
//   page's handlers are attached when Preact renders, so the table showing is the page working);
// - the SDR inbox with 100,000 threads: from the start of the /v1/sdr/inbox request to the page
//   of 50 threads rendered, for the first page, the next pages, a status filter, a search and
//   another order.
// The daemon is the real app serving the built dist/dashboard (npm run build first).
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { benchEnvironment, percentile, ms } from './support.ts';
import { launchChromium } from '../test/support/chromium.ts';
import type { Browser, Page } from 'playwright-core';

const RUNS = 7;
const env = await benchEnvironment();
const browser: Browser = await launchChromium();

async function sessionCookie(apiKey: string): Promise<{ name: string; value: string; url: string }> {
  const res = await fetch(`${env.base}/dashboard/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ apiKey }) });
  if (res.status !== 200) throw new Error(`sign-in: ${res.status} ${await res.text()}`);
  const [pair] = res.headers.getSetCookie()[0].split(';');
  const [name, value] = pair.split('=');
  return { name, value, url: env.base };
}

/** Bytes on the wire of one asset for an Accept-Encoding (node:http: no transparent decompression). */
function wireBytes(p: string, encoding: string): Promise<{ bytes: number; encoding: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(env.base + p, { headers: { 'accept-encoding': encoding } }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ bytes, encoding: String(res.headers['content-encoding'] ?? 'identity') }));
      })
      .on('error', reject);
  });
}

// 1. The first page's JavaScript, compressed as served.
const html = await (await fetch(`${env.base}/`)).text();
const scripts = [...html.matchAll(/<script[^>]+src="([^"]+)"/g)].map((m) => m[1]);
const styles = [...html.matchAll(/<link[^>]+rel="stylesheet"[^>]+href="([^"]+)"/g)].map((m) => m[1]);
let js = { identity: 0, gzip: 0, br: 0 };
for (const s of scripts) {
  js.identity += (await wireBytes(s, 'identity')).bytes;
  js.gzip += (await wireBytes(s, 'gzip')).bytes;
  js.br += (await wireBytes(s, 'br')).bytes;
}
let css = { identity: 0, br: 0 };
for (const s of styles) {
  css.identity += (await wireBytes(s, 'identity')).bytes;
  css.br += (await wireBytes(s, 'br')).bytes;
}
console.log(`first page JavaScript (${scripts.length} file): ${(js.identity / 1024).toFixed(1)} KB raw, ${(js.gzip / 1024).toFixed(1)} KB gzip, ${(js.br / 1024).toFixed(1)} KB brotli (target < 150 KB compressed); CSS ${(css.identity / 1024).toFixed(1)} KB raw, ${(css.br / 1024).toFixed(1)} KB brotli`);

// 2. The overview with 20 campaigns, each with 200 leads and two steps.
let t = performance.now();
for (let i = 1; i <= 20; i++) {
  const c = await env.api('POST', '/v1/campaigns', {
    name: `Campaign ${String(i).padStart(2, '0')}`,
    sequenceSteps: [
      { subject: 'Hi {{firstName}}', bodyHtml: '<p>Hello {{firstName}} at {{company}}</p>' },
      { subject: 'Following up', bodyHtml: '<p>Any thoughts?</p>', delayHours: 72 },
    ],
  });
  await env.api('POST', `/v1/campaigns/${c.id}/leads/bulk`, { leads: Array.from({ length: 200 }, (_, k) => ({ email: `l${k}.c${i}@bench.example`, firstName: `L${k}`, company: `Co ${k}` })) });
}
console.log(`seeded 20 campaigns x 200 leads in ${ms(performance.now() - t)}`);
const adminCookie = await sessionCookie(env.key);

async function coldPage(cookie: { name: string; value: string; url: string }): Promise<{ page: Page; close(): Promise<void> }> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  await ctx.addCookies([cookie]);
  const page = await ctx.newPage();
  return { page, close: () => ctx.close() };
}

// One load to warm the server (its first request compresses the assets once); then cold browsers.
{
  const w = await coldPage(adminCookie);
  await w.page.goto(`${env.base}/`);
  await w.page.waitForSelector('tr[data-campaign] td[data-stat="sent"]:not(:empty)');
  await w.close();
}
const overview: number[] = [];
const dcl: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const { page, close } = await coldPage(adminCookie);
  await page.goto(`${env.base}/`, { waitUntil: 'commit' });
  // Interactive: all 20 rows with their stats (a number, not the placeholder).
  await page.waitForFunction(() => {
    const rows = document.querySelectorAll('tr[data-campaign]');
    return rows.length === 20 && [...rows].every((row) => /\d/.test(row.querySelector('td[data-stat="sent"]')?.textContent ?? ''));
  }, undefined, { polling: 'raf', timeout: 30_000 });
  const [ready, nav] = await page.evaluate(() => [performance.now(), ((performance as any).getEntriesByType('navigation')[0] as { domContentLoadedEventEnd: number }).domContentLoadedEventEnd]);
  overview.push(ready);
  dcl.push(nav);
  await close();
}
console.log(`overview, 20 campaigns, cold cache: interactive p50 ${ms(percentile(overview, 50))}, max ${ms(Math.max(...overview))} (DOMContentLoaded p50 ${ms(percentile(dcl, 50))}) over ${RUNS} loads (target < 1 s)`);

// 3. The inbox with 100,000 threads for one SDR.
const sdr = await env.services().sdrs.add(env.workspaceId, 'Bench Ann', 'ann@bench.example');
const sdrKey = (await env.services().workspaces.createKey({ workspace: env.workspaceId, role: 'sdr', sdrId: sdr.id })).key;
t = performance.now();
await env.pool.query(
  `with g as (select i, abs(hashint4(i)::bigint) as h1, abs(hashint4(i + 7919)::bigint) as h2, abs(hashint4(i + 104729)::bigint) as h3 from generate_series(1, 100000) i)
   insert into prospect_threads (id, workspace_id, sdr_id, contact_email, contact_name, subject, status, category, priority_score, snoozed_until, last_message_at, created_at, updated_at)
   select 'thr_bd' || i, $1, $2,
          (array['anna','ben','carla','dev','elena','farid','greta','hugo','ines','jonas'])[1 + h1 % 10] || i || '@' || (case when h3 % 20 = 0 then 'acme' else 'company' || (h3 % 997) end) || '.example',
          initcap((array['anna','ben','carla','dev','elena','farid','greta','hugo','ines','jonas'])[1 + h1 % 10]) || ' ' || initcap((array['smith','meyer','rossi','novak','garcia'])[1 + h2 % 5]),
          'Re: ' || (array['quick question','pricing for your team','following up','intro call next week','demo request'])[1 + h3 % 5],
          (array['new','new','new','awaiting_reply','awaiting_reply','needs_followup','replied','meeting_booked','won','archived'])[1 + h1 % 10],
          (array['A','B','B','C'])[1 + h2 % 4],
          (h3 % 10000) / 100.0,
          case when h1 % 100 < 5 then now() + ((1 + h2 % 30) || ' days')::interval else null end,
          now() - ((h2 % 15552000) || ' seconds')::interval,
          now() - ((h2 % 15552000) + (h3 % 2592000) || ' seconds')::interval,
          now()
     from g`,
  [env.workspaceId, sdr.id],
);
await env.pool.query('vacuum analyze prospect_threads');
console.log(`seeded 100,000 threads in ${ms(performance.now() - t)}`);
const sdrCookie = await sessionCookie(sdrKey);

/**
 * Runs `act` in the page and measures from the start of the next /v1/sdr/inbox request (resource
 * timing) to the list showing a different first thread (a MutationObserver), in page time.
 */
async function measure(page: Page, act: string): Promise<number> {
  return page.evaluate(async (act) => {
    performance.clearResourceTimings();
    const list = document.querySelector('ul.threads')!;
    const before = list.firstElementChild?.getAttribute('data-thread');
    const rendered = new Promise<number>((resolve) => {
      const mo = new MutationObserver(() => {
        const first = list.firstElementChild?.getAttribute('data-thread');
        if (first && first !== before && list.children.length > 0) {
          mo.disconnect();
          resolve(performance.now());
        }
      });
      mo.observe(list, { childList: true, subtree: true, attributes: true });
    });
    // eslint-disable-next-line no-new-func
    new Function(act)();
    const end = await rendered;
    const req = performance.getEntriesByType('resource').find((e) => e.name.includes('/v1/sdr/inbox?') && !e.name.includes('limit=1&'));
    return end - (req?.startTime ?? end);
  }, act);
}

const inbox: Record<string, number[]> = { 'first load (navigation start → 50 threads)': [], 'next page': [], 'status filter (needs followup)': [], 'search "acme"': [], 'order by last message': [] };
for (let r = 0; r < RUNS; r++) {
  const { page, close } = await coldPage(sdrCookie);
  await page.goto(`${env.base}/inbox`, { waitUntil: 'commit' });
  await page.waitForFunction(() => document.querySelectorAll('ul.threads > li').length === 50, undefined, { polling: 'raf', timeout: 30_000 });
  inbox['first load (navigation start → 50 threads)'].push(await page.evaluate(() => performance.now()));
  await page.waitForTimeout(300);
  inbox['next page'].push(await measure(page, `[...document.querySelectorAll('.pager button')].find((b) => b.textContent === 'Next').click()`));
  inbox['next page'].push(await measure(page, `[...document.querySelectorAll('.pager button')].find((b) => b.textContent === 'Next').click()`));
  inbox['status filter (needs followup)'].push(await measure(page, `document.querySelector('[data-status-count="needs_followup"]').click()`));
  await page.evaluate(() => (document.querySelector('[aria-pressed]') as HTMLButtonElement).click());
  await page.waitForTimeout(300);
  const search = page.getByLabel('Search');
  await search.fill('acme');
  inbox['search "acme"'].push(await measure(page, `document.querySelector('form[role="search"]').requestSubmit()`));
  await search.fill('');
  await page.evaluate(() => (document.querySelector('form[role="search"]') as HTMLFormElement).requestSubmit());
  await page.waitForTimeout(300);
  inbox['order by last message'].push(
    await measure(page, `const s = [...document.querySelectorAll('.field')].find((l) => l.querySelector('.field-label').textContent === 'Order').querySelector('select'); s.value = 'lastMessage'; s.dispatchEvent(new Event('change', { bubbles: true }))`),
  );
  await close();
}
for (const [what, v] of Object.entries(inbox)) {
  if (v.length) console.log(`inbox, 100,000 threads, ${what}: p50 ${ms(percentile(v, 50))}, max ${ms(Math.max(...v))} (${v.length} samples)`);
}
console.log('target: a page of results rendered < 300 ms after the request starts');
await browser.close();
await env.close();
