// npm run bench:classify [-- DIR] — throughput of analyzeMessage (what `mailgate classify` and the
// IMAP watcher run per message) over every .eml under DIR (default fixtures/mail), in process,
// after one warm-up pass. Prints messages per second of wall time and of this process's CPU time
// (the CPU figure is the one to compare on a shared, busy machine).
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { analyzeMessage } from '../src/modules/inbound/analyze.ts';

const dir = path.resolve(process.argv[2] ?? fileURLToPath(new URL('../fixtures/mail/', import.meta.url)));
const files = (await readdir(dir, { recursive: true })).filter((f) => f.endsWith('.eml')).sort();
const raws = await Promise.all(files.map((f) => readFile(path.join(dir, f))));
for (const raw of raws) await analyzeMessage(raw);
const rounds = Number(process.env.ROUNDS ?? 5);
const cpu0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
for (let i = 0; i < rounds; i++) for (const raw of raws) await analyzeMessage(raw);
const wall = Number(process.hrtime.bigint() - t0) / 1e9;
const cpu = process.cpuUsage(cpu0);
const n = raws.length * rounds;
process.stdout.write(`${n} messages (${raws.length} files x ${rounds}): ${(n / wall).toFixed(0)} msg/s wall, ${(n / ((cpu.user + cpu.system) / 1e6)).toFixed(0)} msg/s CPU\n`);
