// Inbound benchmarks (issue 5). Run: npm run bench:inbound
//  (a) latency from an IMAP APPEND to the reply being visible through GET /v1/replies, p50/p95
//      over 200 replies, with IDLE, against a real Dovecot;
//  (b) throughput of parsing + classifying 2,000 stored messages (the fixtures, cycled) vs
//      mailparser alone on the same messages.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { simpleParser } from 'mailparser';
import { benchEnvironment, percentile, ms } from './support.ts';
import { SmtpSink } from '../test/support/smtp.ts';
import { ImapTestServer } from '../test/support/dovecot.ts';
import { SmtpMessenger } from '../src/adapters/smtp.ts';
import { SendDispatcher } from '../src/modules/sending/dispatcher.ts';
import { MailboxWatcher } from '../src/modules/inbound/watcher.ts';
import { analyzeMessage } from '../src/modules/inbound/analyze.ts';

const REPLIES = Number(process.env.BENCH_REPLIES ?? 200);
const env = await benchEnvironment();
const sink = new SmtpSink();
await sink.start();
const imap = new ImapTestServer();
await imap.start();
const SENDER = 'bench@acme.example';
imap.addUser(SENDER, 'pw');
sink.users.set(SENDER, 'pw');

const s = env.services();
const account = await s.senders.add({ workspaceId: env.workspaceId, email: SENDER, name: 'Bench', smtpUrl: sink.url(SENDER, 'pw'), imapUrl: imap.url(SENDER, 'pw') });
const pool = await s.senders.createPool(env.workspaceId, 'p', 1_000_000, [account.id]);
const { id: campaignId } = await env.api('POST', '/v1/campaigns', { name: 'inbound bench', senderPoolId: pool.id, sequenceSteps: [{ subject: 'Quick question', bodyHtml: '<p>Hi</p>' }] });
await env.api('POST', `/v1/campaigns/${campaignId}/leads/bulk`, { leads: Array.from({ length: REPLIES }, (_, i) => ({ email: `lead${i}@bench.example` })) });
await env.api('POST', `/v1/campaigns/${campaignId}/start`);
const messenger = new SmtpMessenger({ maxConnections: 3 });
const dispatcher = new SendDispatcher(env.deps, messenger, { maxConnections: 3, retryDelaysMs: [60_000] });
while ((await dispatcher.runRound()).claimed > 0);
const sentIds = new Map(sink.received.map((r) => [r.to[0], r.parsed.messageId!]));

const watcher = new MailboxWatcher(env.deps, () => env.services().inbound, { pollIntervalMs: 60_000, useIdle: true, tickMs: 1_000 });
await watcher.start();
await new Promise((r) => setTimeout(r, 1500));

// (a)
const latencies: number[] = [];
for (let i = 0; i < REPLIES; i++) {
  const raw = [
    `From: lead${i}@bench.example`,
    `To: ${SENDER}`,
    'Subject: Re: Quick question',
    `Date: ${new Date().toUTCString()}`,
    `Message-ID: <reply${i}@bench.example>`,
    `In-Reply-To: ${sentIds.get(`lead${i}@bench.example`)}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Yes, that sounds interesting. Can we talk on Thursday?',
    '',
  ].join('\r\n');
  const t = performance.now();
  await imap.append(SENDER, 'pw', raw);
  for (;;) {
    const res = await fetch(`${env.base}/v1/replies?pageSize=1&campaignId=${campaignId}`, { headers: { authorization: `Bearer ${env.key}` } });
    if (Number(res.headers.get('x-total-count')) > i) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  latencies.push(performance.now() - t);
}
console.log(`(a) IMAP APPEND -> visible in GET /v1/replies over ${REPLIES} replies (IDLE): p50 ${ms(percentile(latencies, 50))}, p95 ${ms(percentile(latencies, 95))} (target p95 < 2 s)`);
await watcher.stop();

// (b)
function emls(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? emls(p) : p.endsWith('.eml') ? [p] : [];
  });
}
const files = emls(new URL('../fixtures/mail', import.meta.url).pathname);
const corpus = Array.from({ length: 2000 }, (_, i) => readFileSync(files[i % files.length]));
let t = performance.now();
for (const raw of corpus) await simpleParser(raw);
const parserMs = performance.now() - t;
t = performance.now();
for (const raw of corpus) await analyzeMessage(raw);
const analyzeMs = performance.now() - t;
console.log(
  `(b) 2,000 messages (${files.length} fixtures cycled): mailparser alone ${ms(parserMs)} (${(2000 / (parserMs / 1000)).toFixed(0)} msg/s), ` +
    `parse + bounce detection + stripping + classification ${ms(analyzeMs)} (${(2000 / (analyzeMs / 1000)).toFixed(0)} msg/s): ratio ${(parserMs / analyzeMs).toFixed(2)}`,
);

await messenger.close();
await dispatcher.close();
await imap.stop();
await sink.stop();
await env.close();
