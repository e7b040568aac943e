// Writes the bounce corpus: fixtures/mail/bounces/{holdout,tuned}/<family>/NN.eml and their
// labels in fixtures/mail/bounces/labels.json (read by npm run eval:classify next to the shared
// fixtures/mail/labels.json). Deterministic: the same files on every run.
//   npx tsx scripts/bounce-corpus/generate.ts
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeCase } from './common.ts';
import { HOLDOUT, type Family } from './holdout.ts';
import { rng } from './mime.ts';
import { TUNED } from './tuned.ts';
import type { CorpusLabel } from './common.ts';

const ROOT = fileURLToPath(new URL('../../fixtures/mail/', import.meta.url));

async function writeSet(set: 'holdout' | 'tuned', families: Family[], perFamily: number, seed: number): Promise<CorpusLabel[]> {
  const labels: CorpusLabel[] = [];
  await rm(path.join(ROOT, 'bounces', set), { recursive: true, force: true });
  let n = seed;
  for (const fam of families) {
    const dir = path.join(ROOT, 'bounces', set, fam.name);
    await mkdir(dir, { recursive: true });
    const count = Math.max(perFamily, fam.diags.length);
    for (let i = 0; i < count; i++) {
      n++;
      const r = rng(n * 7919);
      const c = makeCase(n, r, fam.domain, fam.diags[i % fam.diags.length], (n + i) % 2 === 0 ? '\r\n' : '\n');
      const s = fam.make(c);
      const file = `bounces/${set}/${fam.name}/${String(i + 1).padStart(2, '0')}.eml`;
      await writeFile(path.join(ROOT, file), s.raw);
      const cls = s.class ?? 'bounce';
      labels.push({
        file,
        family: fam.name,
        set,
        class: cls,
        ...(cls === 'bounce' ? { bounceType: s.type ?? c.diag.type, recipient: c.rcpt, ...(s.carriesMessageId ? { originalMessageId: c.origId } : {}) } : {}),
      });
    }
  }
  return labels;
}

const holdout = await writeSet('holdout', HOLDOUT, 2, 1000);
const tuned = await writeSet('tuned', TUNED, 5, 5000);
await writeFile(
  path.join(ROOT, 'bounces', 'labels.json'),
  JSON.stringify(
    {
      description:
        'Bounce corpus written by scripts/bounce-corpus/generate.ts from per-family templates (holdout.ts: written before the rules were changed for it and never used to tune them; tuned.ts: used to tune bounces.ts). class bounce|ignored; bounceType hard|soft; originalMessageId when the report carries the original Message-ID anywhere, else matching goes by recipient.',
      messages: [...holdout, ...tuned],
    },
    null,
    1,
  ) + '\n',
);
process.stdout.write(`wrote ${holdout.length} held-out and ${tuned.length} tuned reports\n`);
