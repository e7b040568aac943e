// The held end of a message's data (adapters/smtp.ts heldEnd), two ways in one process,
// alternated: each message's bytes written before its end may go and the end written on its
// own (wholeWriteMaxBytes 0, as until session 42), against the message held whole and written
// with its end in one write (the default). Messages of bench:send's size go through mailgate's
// messenger to the counting sink in a process of its own, 3 connections; the end of each
// message waits for a `beforeEnd` answered on a later turn of the event loop, as the worker's
// guard is answered by a database reply. Prints CPU per message of this process (the sender)
// and of the sink, and the rate, medians of the rounds.
// Run: npx tsx bench/held-end.ts (BENCH_COUNT, default 3000; BENCH_ROUNDS, default 5)
import { fork } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { SmtpMessenger, WHOLE_WRITE_MAX_BYTES, type OutgoingMail } from '../src/adapters/smtp.ts';
import { cpuOf, median } from './support.ts';

const COUNT = Number(process.env.BENCH_COUNT ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = 3;

const sink = fork(new URL('./sink.ts', import.meta.url).pathname, [], { execArgv: ['--import', 'tsx'] });
const port = await new Promise<number>((resolve) => sink.once('message', (m) => resolve((m as { port: number }).port)));
const ask = (cmd: string) =>
  new Promise<{ count: number }>((resolve) => {
    sink.once('message', (m) => resolve(m as { count: number }));
    sink.send({ cmd });
  });

const body = (i: number) =>
  `<html><body><p>Hi First${i},</p><p>I noticed Company ${i} is growing its sales team. Would a short call next week make sense?</p>` +
  `<p>${'We help teams like yours send and follow up without losing a reply. '.repeat(12)}</p><p><a href="https://acme.example/u/${i}">Unsubscribe</a></p></body></html>`;
const mails: OutgoingMail[] = Array.from({ length: COUNT }, (_, i) => ({
  from: { name: 'Sender', address: 'sender@bench.example' },
  to: `lead${i}@bench.example`,
  subject: `Quick question, First${i}`,
  html: body(i),
  text: body(i).replace(/<[^>]+>/g, ''),
  messageId: `<msg_${i}.held@bench.example>`,
  headers: { 'List-Unsubscribe': `<https://acme.example/u/${i}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
}));

/** The guard's answer: a later turn of the event loop, as a database reply is. */
const beforeEnd = () => new Promise<void>((resolve) => setImmediate(resolve));

async function run(wholeWriteMaxBytes: number, timed: boolean) {
  await ask('reset');
  const messenger = new SmtpMessenger({ maxConnections: CONNECTIONS, wholeWriteMaxBytes });
  const account = { id: 'snd_bench', smtpUrl: `smtp://127.0.0.1:${port}` };
  const cpu0 = process.cpuUsage();
  const sink0 = cpuOf(sink.pid!);
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < COUNT) {
        const outcome = await messenger.send(account, mails[next++], beforeEnd);
        if (outcome.kind !== 'accepted') throw new Error(`not accepted: ${JSON.stringify(outcome)}`);
      }
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const sinkCpu = cpuOf(sink.pid!) - sink0;
  await messenger.close();
  if ((await ask('count')).count !== COUNT) throw new Error('the sink did not count every message');
  if (!timed) return null;
  return { rate: COUNT / (ms / 1000), sender: ((cpu.user + cpu.system) / 1000 / COUNT) * 1000, sink: (sinkCpu * 1e6) / COUNT };
}

const size = Buffer.byteLength(mails[0].html) * 2;
console.log(`${COUNT} messages of about ${(size / 1024).toFixed(1)} KiB (html and text), ${CONNECTIONS} connections, ${ROUNDS} alternated rounds`);
await run(0, false);
await run(WHOLE_WRITE_MAX_BYTES, false);
const split: Array<NonNullable<Awaited<ReturnType<typeof run>>>> = [];
const whole: typeof split = [];
for (let r = 0; r < ROUNDS; r++) {
  split.push((await run(0, true))!);
  whole.push((await run(WHOLE_WRITE_MAX_BYTES, true))!);
}
const show = (name: string, xs: typeof split) =>
  `${name}: ${median(xs.map((x) => x.rate)).toFixed(0)} msg/s (${xs.map((x) => x.rate.toFixed(0)).join(', ')}); CPU per message: sender ${median(xs.map((x) => x.sender)).toFixed(0)} us (${xs.map((x) => x.sender.toFixed(0)).join(', ')}), sink ${median(xs.map((x) => x.sink)).toFixed(0)} us (${xs.map((x) => x.sink.toFixed(0)).join(', ')})`;
console.log(show('bytes, then the end in a write of its own', split));
console.log(show('bytes and end in one write (default)', whole));
const both = (xs: typeof split) => median(xs.map((x) => x.sender + x.sink));
console.log(`sender and sink together: ${both(split).toFixed(0)} -> ${both(whole).toFixed(0)} us per message (${((both(whole) / both(split) - 1) * 100).toFixed(1)}%)`);
sink.send({ cmd: 'exit' });
