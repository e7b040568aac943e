// The bare side of bench/send.ts: the campaign's messages as mailgate renders them, and the bare
// nodemailer pooled-transport loop that sends them. bench/send.ts runs the loop in its own
// process and, as the ratio's baseline since session 41, in a new process for each run (this
// file, with BENCH_SEND_BARE set): the worker is a process of its own timed from its first
// message, and so is the baseline (or, with BENCH_WARM=1, both run once untimed first). In the
// benchmark's process, which also holds the app and the benchmark's data, the loop ran about
// 1.3x slower (docs/benchmarks.md, "Session 41").
import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { performance } from 'node:perf_hooks';
import { renderHtml, renderSubject, htmlToText, withOpenPixel } from '../src/modules/sending/render.ts';

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

if (process.env.BENCH_SEND_BARE) {
  // A new process for one timed run: the parent says `warm` (BENCH_WARM=1) and `go`, and reads
  // this process's CPU and thread times from /proc around `go`.
  const { port, connections, count } = JSON.parse(process.env.BENCH_SEND_BARE) as { port: number; connections: number; count: number };
  const messages = renderedMessages(benchLeads(count));
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'exit') process.exit(0);
    void bareSend(port, connections, messages).then((ms) => process.send!({ done: m.cmd, ms }));
  });
  process.send!({ ready: true });
}
