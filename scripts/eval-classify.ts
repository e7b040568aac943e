// npm run eval:classify — runs the inbound analysis (bounce parser + rule classifier) over the
// labeled fixtures in fixtures/mail and prints accuracy per class, a confusion matrix, bounce
// detail accuracy and return-date accuracy. Exits 1 when a target is missed.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { analyzeMessage, type InboundAnalysis } from '../src/modules/inbound/analyze.ts';
import { bounceCorpusTargets, evaluateBounceCorpus, formatBounceCorpus } from './eval-bounces.ts';
import { compareClassifiers, evaluateReplies, formatReplies } from './eval-replies.ts';

export const CLASSES = ['interested', 'not_interested', 'unsubscribe', 'out_of_office', 'bounce', 'ignored'] as const;
export type EvalClass = (typeof CLASSES)[number];

export interface LabeledMessage {
  file: string;
  class: EvalClass;
  bounceType?: 'hard' | 'soft';
  bounceStatus?: string | null;
  originalMessageId?: string;
  recipient?: string;
  oooReturnDate?: string | null;
  /** "holdout": written after the rules were tuned and never used to tune them. */
  set?: 'holdout';
}

export interface ClassStat {
  name: EvalClass;
  total: number;
  correct: number;
  /** correct / total (recall) */
  accuracy: number;
  /** correct / predicted as this class */
  precision: number;
}

export interface Target {
  name: string;
  value: number;
  target: number;
  met: boolean;
}

export interface EvalReport {
  total: number;
  correct: number;
  accuracy: number;
  classes: ClassStat[];
  confusion: Record<EvalClass, Record<EvalClass, number>>;
  bounceDetails: { checked: number; correct: number; accuracy: number };
  returnDates: { checked: number; correct: number; accuracy: number };
  /** Class accuracy of the messages the rules were tuned on, and of the held-out ones. */
  sets: Record<'tuned' | 'holdout', { total: number; correct: number; accuracy: number }>;
  misses: Array<{ file: string; expected: string; got: string; decidedBy: string }>;
  targets: Target[];
}

export const FIXTURES_DIR = fileURLToPath(new URL('../fixtures/mail/', import.meta.url));

export function classOf(a: InboundAnalysis): EvalClass {
  if (a.kind === 'bounce') return 'bounce';
  if (a.kind === 'ignored') return 'ignored';
  return a.classification as EvalClass;
}

const ymd = (d: Date | null) => (d ? d.toISOString().slice(0, 10) : null);

export async function evaluate(dir = FIXTURES_DIR): Promise<EvalReport> {
  const labels = JSON.parse(await readFile(path.join(dir, 'labels.json'), 'utf8')) as { messages: LabeledMessage[] };
  const confusion = Object.fromEntries(CLASSES.map((c) => [c, Object.fromEntries(CLASSES.map((p) => [p, 0]))])) as EvalReport['confusion'];
  const misses: EvalReport['misses'] = [];
  const details = { checked: 0, correct: 0, accuracy: 0 };
  const dates = { checked: 0, correct: 0, accuracy: 0 };
  const sets: EvalReport['sets'] = { tuned: { total: 0, correct: 0, accuracy: 0 }, holdout: { total: 0, correct: 0, accuracy: 0 } };

  for (const label of labels.messages) {
    const analysis = await analyzeMessage(await readFile(path.join(dir, label.file)));
    const got = classOf(analysis);
    confusion[label.class][got]++;
    const set = sets[label.set ?? 'tuned'];
    set.total++;
    if (got === label.class) set.correct++;
    const problems: string[] = [];
    if (got !== label.class) problems.push(`class ${got}`);

    if (label.class === 'bounce' && got === 'bounce' && analysis.bounce) {
      details.checked++;
      const b = analysis.bounce;
      if (b.type !== label.bounceType) problems.push(`bounceType ${b.type}`);
      if (b.status !== (label.bounceStatus ?? null)) problems.push(`bounceStatus ${b.status}`);
      if (b.originalMessageId !== label.originalMessageId) problems.push(`originalMessageId ${b.originalMessageId}`);
      if (b.recipient !== label.recipient) problems.push(`recipient ${b.recipient}`);
      if (problems.length === 0) details.correct++;
    }
    if (label.class === 'out_of_office' && got === 'out_of_office' && label.oooReturnDate !== undefined) {
      dates.checked++;
      if (ymd(analysis.oooReturnDate) === label.oooReturnDate) dates.correct++;
      else problems.push(`oooReturnDate ${ymd(analysis.oooReturnDate)} (want ${label.oooReturnDate})`);
    }
    if (problems.length) misses.push({ file: label.file, expected: label.class, got: problems.join(', '), decidedBy: analysis.decidedBy });
  }

  const classes = CLASSES.map((name): ClassStat => {
    const total = CLASSES.reduce((n, p) => n + confusion[name][p], 0);
    const predicted = CLASSES.reduce((n, e) => n + confusion[e][name], 0);
    const correct = confusion[name][name];
    return { name, total, correct, accuracy: total ? correct / total : 1, precision: predicted ? correct / predicted : 1 };
  });
  const total = labels.messages.length;
  const correct = classes.reduce((n, c) => n + c.correct, 0);
  details.accuracy = details.checked ? details.correct / details.checked : 1;
  dates.accuracy = dates.checked ? dates.correct / dates.checked : 1;
  for (const s of Object.values(sets)) s.accuracy = s.total ? s.correct / s.total : 1;

  const stat = (n: EvalClass) => classes.find((c) => c.name === n)!;
  const target = (name: string, value: number, min: number): Target => ({ name, value, target: min, met: value >= min });
  const targets = [
    target('bounce detection (bounce)', stat('bounce').accuracy, 0.97),
    target('bounce detection (ignored: delays, receipts)', stat('ignored').accuracy, 0.97),
    target('bounce details (type, status, Message-ID, recipient)', details.accuracy, 0.97),
    target('out-of-office detection', stat('out_of_office').accuracy, 0.97),
    target('interested', stat('interested').accuracy, 0.9),
    target('not_interested', stat('not_interested').accuracy, 0.9),
    target('unsubscribe', stat('unsubscribe').accuracy, 0.9),
  ];
  return { total, correct, accuracy: total ? correct / total : 1, classes, confusion, bounceDetails: details, returnDates: dates, sets, misses, targets };
}

const pct = (n: number) => `${(n * 100).toFixed(1)}%`;

export function formatReport(r: EvalReport): string {
  const lines: string[] = [];
  lines.push(`mailgate classify evaluation: ${r.total} labeled messages`, '');
  lines.push('class            n  correct  accuracy  precision');
  for (const c of r.classes) {
    lines.push(`${c.name.padEnd(15)} ${String(c.total).padStart(3)}  ${String(c.correct).padStart(7)}  ${pct(c.accuracy).padStart(8)}  ${pct(c.precision).padStart(9)}`);
  }
  lines.push(`${'overall'.padEnd(15)} ${String(r.total).padStart(3)}  ${String(r.correct).padStart(7)}  ${pct(r.accuracy).padStart(8)}`);
  lines.push(`  tuned on       ${String(r.sets.tuned.total).padStart(3)}  ${String(r.sets.tuned.correct).padStart(7)}  ${pct(r.sets.tuned.accuracy).padStart(8)}`);
  lines.push(`  held out       ${String(r.sets.holdout.total).padStart(3)}  ${String(r.sets.holdout.correct).padStart(7)}  ${pct(r.sets.holdout.accuracy).padStart(8)}`, '');
  const short: Record<EvalClass, string> = { interested: 'int', not_interested: 'not', unsubscribe: 'uns', out_of_office: 'ooo', bounce: 'bnc', ignored: 'ign' };
  lines.push('confusion (rows: expected, columns: got)');
  lines.push(`${''.padEnd(15)} ${CLASSES.map((c) => short[c].padStart(4)).join('')}`);
  for (const e of CLASSES) lines.push(`${e.padEnd(15)} ${CLASSES.map((p) => String(r.confusion[e][p]).padStart(4)).join('')}`);
  lines.push('');
  lines.push(`bounce details right: ${r.bounceDetails.correct}/${r.bounceDetails.checked} (${pct(r.bounceDetails.accuracy)})`);
  lines.push(`out-of-office return dates right: ${r.returnDates.correct}/${r.returnDates.checked} (${pct(r.returnDates.accuracy)}, best effort, no target)`);
  if (r.misses.length) {
    lines.push('', 'misses:');
    for (const m of r.misses) lines.push(`  ${m.file}: expected ${m.expected}; got ${m.got} [${m.decidedBy}]`);
  }
  lines.push('', 'targets:');
  for (const t of r.targets) lines.push(`  ${t.met ? 'ok  ' : 'MISS'} ${t.name}: ${pct(t.value)} (target ${pct(t.target)})`);
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  const dirArg = args.find((a) => !a.startsWith('--'));
  const dir = dirArg ? path.resolve(dirArg) : FIXTURES_DIR;
  const report = await evaluate(dir);
  process.stdout.write(formatReport(report) + '\n');
  const corpus = await evaluateBounceCorpus(dir);
  const corpusTargets = corpus ? bounceCorpusTargets(corpus) : [];
  if (corpus) {
    process.stdout.write('\n' + formatBounceCorpus(corpus) + 'bounce corpus targets:\n');
    for (const t of corpusTargets) process.stdout.write(`  ${t.met ? 'ok  ' : 'MISS'} ${t.name}: ${pct(t.value)} (target ${pct(t.target)})\n`);
  }
  const replies = await evaluateReplies(dir);
  process.stdout.write('\n' + formatReplies(replies, args.includes('--holdout-misses')) + '\n');
  process.stdout.write('\n' + (await compareClassifiers(dir)) + '\n');
  process.exitCode = [...report.targets, ...corpusTargets].every((t) => t.met) && replies.target.met ? 0 : 1;
}
