// The bounce corpus part of npm run eval:classify: detection, hard/soft agreement and matching
// per family, for the tuned and the held-out families separately (fixtures/mail/bounces/labels.json,
// written by scripts/bounce-corpus/generate.ts).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { analyzeMessage } from '../src/modules/inbound/analyze.ts';
import type { CorpusLabel } from './bounce-corpus/common.ts';

export interface FamilyRow {
  family: string;
  set: 'holdout' | 'tuned';
  total: number;
  /** Bounces found as bounces, ignored reports as ignored. */
  detected: number;
  /** Among the detected bounces: hard/soft as labeled. */
  typeChecked: number;
  typeAgreed: number;
  /** Among the detected bounces: the original found (its Message-ID among the candidates, else the recipient). */
  matched: number;
  /** Among bounces: shown as a human reply (the worst outcome). */
  asHuman: number;
}

export interface BounceCorpusReport {
  rows: FamilyRow[];
  sets: Record<'holdout' | 'tuned', FamilyRow>;
  misses: string[];
}

const HUMAN = new Set(['interested', 'not_interested', 'unsubscribe']);

export async function evaluateBounceCorpus(dir: string): Promise<BounceCorpusReport | null> {
  let labels: CorpusLabel[];
  try {
    labels = (JSON.parse(await readFile(path.join(dir, 'bounces', 'labels.json'), 'utf8')) as { messages: CorpusLabel[] }).messages;
  } catch {
    return null;
  }
  const rows = new Map<string, FamilyRow>();
  const sets: BounceCorpusReport['sets'] = {
    holdout: { family: 'all held-out', set: 'holdout', total: 0, detected: 0, typeChecked: 0, typeAgreed: 0, matched: 0, asHuman: 0 },
    tuned: { family: 'all tuned', set: 'tuned', total: 0, detected: 0, typeChecked: 0, typeAgreed: 0, matched: 0, asHuman: 0 },
  };
  const misses: string[] = [];
  for (const l of labels) {
    const key = `${l.set}/${l.family}`;
    const row = rows.get(key) ?? rows.set(key, { family: l.family, set: l.set, total: 0, detected: 0, typeChecked: 0, typeAgreed: 0, matched: 0, asHuman: 0 }).get(key)!;
    const a = await analyzeMessage(await readFile(path.join(dir, l.file)));
    const got = a.kind === 'reply' ? a.classification : a.kind;
    const problems: string[] = [];
    for (const r of [row, sets[l.set]]) r.total++;
    if (got === l.class) for (const r of [row, sets[l.set]]) r.detected++;
    else problems.push(`got ${got}`);
    if (l.class === 'bounce' && HUMAN.has(got)) for (const r of [row, sets[l.set]]) r.asHuman++;
    if (l.class === 'bounce' && a.bounce) {
      for (const r of [row, sets[l.set]]) r.typeChecked++;
      if (a.bounce.type === l.bounceType) for (const r of [row, sets[l.set]]) r.typeAgreed++;
      else problems.push(`type ${a.bounce.type}`);
      const matched = l.originalMessageId ? a.bounce.originalMessageIds.includes(l.originalMessageId) : a.bounce.recipient === l.recipient;
      if (matched) for (const r of [row, sets[l.set]]) r.matched++;
      else problems.push(l.originalMessageId ? `message-ids ${a.bounce.originalMessageIds.join(' ') || '(none)'}` : `recipient ${a.bounce.recipient}`);
    }
    if (problems.length) misses.push(`  ${l.file}: ${problems.join(', ')} [${a.decidedBy}]`);
  }
  return { rows: [...rows.values()].sort((a, b) => a.set.localeCompare(b.set) || a.family.localeCompare(b.family)), sets, misses };
}

const pct = (n: number, d: number) => (d ? `${((n / d) * 100).toFixed(0)}%` : '-').padStart(5);

export function formatBounceCorpus(r: BounceCorpusReport): string {
  const lines = ['bounce corpus (fixtures/mail/bounces/labels.json): per family', ''];
  const line = (x: FamilyRow) =>
    `${x.family.padEnd(20)} ${String(x.total).padStart(4)}  ${String(x.detected).padStart(4)} ${pct(x.detected, x.total)}  ${String(x.typeAgreed).padStart(4)}/${String(x.typeChecked).padEnd(4)}${pct(x.typeAgreed, x.typeChecked)}  ${String(x.matched).padStart(4)} ${pct(x.matched, x.typeChecked)}  ${String(x.asHuman).padStart(5)}`;
  for (const set of ['tuned', 'holdout'] as const) {
    lines.push(`${set === 'tuned' ? 'TUNED (used to tune the rules)' : 'HELD OUT (never used to tune the rules)'}`);
    lines.push(`${'family'.padEnd(20)} ${'n'.padStart(4)}  ${'detected'.padStart(10)}  ${'hard/soft agreed'.padStart(14)}  ${'matched'.padStart(10)}  human`);
    for (const x of r.rows.filter((x) => x.set === set)) lines.push(line(x));
    lines.push(line(r.sets[set]), '');
  }
  if (r.misses.length) lines.push('bounce corpus misses:', ...r.misses, '');
  return lines.join('\n');
}

/** Targets on the tuned families (the held-out ones are reported, not targeted), and safety on both. */
export function bounceCorpusTargets(r: BounceCorpusReport): Array<{ name: string; value: number; target: number; met: boolean }> {
  const t = (name: string, value: number, target: number) => ({ name, value, target, met: value >= target });
  const { tuned, holdout } = r.sets;
  return [
    t('corpus detection (tuned families)', tuned.total ? tuned.detected / tuned.total : 1, 0.97),
    t('corpus hard/soft agreement (tuned families)', tuned.typeChecked ? tuned.typeAgreed / tuned.typeChecked : 1, 0.97),
    t('corpus original found (tuned families)', tuned.typeChecked ? tuned.matched / tuned.typeChecked : 1, 0.97),
    t('no bounce shown as a human reply (both sets)', tuned.asHuman + holdout.asHuman === 0 ? 1 : 0, 1),
  ];
}
