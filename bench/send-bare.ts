// The bare side of bench/send.ts: the campaign's messages as mailgate renders them, and the bare
// nodemailer pooled-transport loop that sends them. bench/send.ts runs the loop in its own
// process and, as the ratio's baseline since session 41, in a new process for each run (this
// file, with BENCH_SEND_BARE set): the worker is a process of its own timed from its first
// message, and so is the baseline (or, with BENCH_WARM=1, both run once untimed first). In the
// benchmark's process, which also holds the app and the benchmark's data, the loop ran about
// 1.3x slower (docs/benchmarks.md, "Session 41").
import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import pg from 'pg';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { renderHtml, renderSubject, htmlToText, withOpenPixel } from '../src/modules/sending/render.ts';
import { Semaphore } from '../src/modules/sending/in-flight.ts';

/** Which loop a new process runs: the baseline pool, or the raw and bound references of the crash bound. */
export type BareMode = 'pool' | 'raw' | 'bound';

export const steps = [
  {
    subject: 'Quick question, {{firstName|there}}',
    bodyHtml:
      '<html><body><p>Hi {{firstName|there}},</p><p>I noticed {{company}} is growing its {{team|sales}} team. Would a short call next week make sense?</p><p><a href="{{unsubscribeUrl}}">Unsubscribe</a></p></body></html>',
  },
];

export function benchLeads(count: number) {
  return Array.from({ length: count }, (_, i) => ({ email: `lead${i}@bench.example`, firstName: `First${i}`, company: `Company ${i}`, team: i % 2 ? 'sales' : 'growth' }));
}

/** The leads' messages rendered as mailgate renders them (its own render functions), for the bare loop. */
export function renderedMessages(leads: ReturnType<typeof benchLeads>): Mail.Options[] {
  return leads.map((l, i) => {
    const lead = { email: l.email, firstName: l.firstName, lastName: null, company: l.company, jobTitle: null, custom: { team: l.team } };
    const extra = { unsubscribeUrl: `http://127.0.0.1:8080/u/token${i}` };
    const html = renderHtml(steps[0].bodyHtml, lead, extra);
    return {
      from: { name: 'Bench Sender', address: 'sender@bench.example' },
      to: l.email,
      subject: renderSubject(steps[0].subject, lead, extra),
      html: withOpenPixel(html, `http://127.0.0.1:8080/t/o/token${i}`),
      text: htmlToText(html),
      messageId: `<bench${i}@bench.example>`,
      headers: { 'List-Unsubscribe': `<${extra.unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
    };
  });
}

/** The bare loop: every message through one pooled transport at once; the wall time until the last is accepted. */
export async function bareSend(port: number, connections: number, messages: Mail.Options[]): Promise<number> {
  const transport = nodemailer.createTransport({ pool: true, host: '127.0.0.1', port, secure: false, ignoreTLS: true, maxConnections: connections, maxMessages: Infinity, auth: { user: 'u', pass: 'p' } });
  const started = performance.now();
  await Promise.all(messages.map((m) => transport.sendMail(m)));
  const ms = performance.now() - started;
  transport.close();
  return ms;
}

type Composed = { envelope: ReturnType<ReturnType<MailComposer['compile']>['getEnvelope']>; messageId?: string; bytes: Buffer };

/** The messages composed to their bytes before any clock starts (as mailgate's worker sends finished bytes). */
export function composeAll(messages: Mail.Options[]): Promise<Composed[]> {
  return Promise.all(
    messages.map(async (m) => {
      const c = new MailComposer(m).compile();
      return { envelope: c.getEnvelope(), messageId: m.messageId, bytes: await c.build() };
    }),
  );
}

/**
 * The crash bound's references (contract: after a crash at most the messages in flight on the
 * open connections can repeat), on composed bytes so neither pays for composing:
 *  - raw (no `db`): the bytes through the same pooled transport, nothing else;
 *  - bound: the same, but each message's end of data (after which the server may accept it)
 *    waits for an acceptance place, one per connection, and a place is freed once the message's
 *    acceptance is committed to PostgreSQL: one single-row insert into bench_bound in its own
 *    transaction, on a pool of one client per connection (no batching, no queueing behind
 *    another write). No guard, no state, no other statement: the cheapest way to keep the bound.
 * Returns the wall time until the last message is accepted (and, bound, recorded).
 */
export async function rawSend(port: number, connections: number, composed: Composed[], db: pg.Pool | null): Promise<number> {
  const transport = nodemailer.createTransport({ pool: true, host: '127.0.0.1', port, secure: false, ignoreTLS: true, maxConnections: connections, maxMessages: Infinity, auth: { user: 'u', pass: 'p' } });
  // The acceptance places: the dispatcher's own semaphore.
  const places = new Semaphore(connections);
  const started = performance.now();
  await Promise.all(
    composed.map(async (m, n) => {
      if (!db) return transport.sendMail({ envelope: m.envelope, messageId: m.messageId, raw: m.bytes });
      let held = false;
      let pushed = false;
      const raw = new Readable({
        read() {
          if (pushed) return;
          pushed = true;
          this.push(m.bytes);
          void places.acquire().then(() => ((held = true), this.push(null)));
        },
      });
      try {
        await transport.sendMail({ envelope: m.envelope, messageId: m.messageId, raw });
        await db.query('insert into bench_bound (n) values ($1)', [n]);
      } finally {
        if (held) places.release();
      }
    }),
  );
  const ms = performance.now() - started;
  transport.close();
  return ms;
}

if (process.env.BENCH_SEND_BARE) {
  // A new process for one timed run of one loop: the parent says `warm` (BENCH_WARM=1) and `go`,
  // and reads this process's CPU and thread times from /proc around `go`.
  const { port, connections, count, mode, url } = JSON.parse(process.env.BENCH_SEND_BARE) as { port: number; connections: number; count: number; mode: BareMode; url: string };
  const messages = renderedMessages(benchLeads(count));
  let loop: () => Promise<number>;
  if (mode === 'pool') loop = () => bareSend(port, connections, messages);
  else {
    const composed = await composeAll(messages);
    let db: pg.Pool | null = null;
    if (mode === 'bound') {
      db = new pg.Pool({ connectionString: url, max: connections });
      await Promise.all(Array.from({ length: connections }, () => db!.query('select 1')));
    }
    loop = () => rawSend(port, connections, composed, db);
  }
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'exit') process.exit(0);
    void loop().then((ms) => process.send!({ done: m.cmd, ms }));
  });
  process.send!({ ready: true });
}
