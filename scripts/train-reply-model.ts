// Trains the reply model (src/modules/inbound/model.ts) from the tuning replies only: the
// labeled replies of fixtures/mail/labels.json not marked `set: "holdout"`, and
// fixtures/mail/replies/tuning-labels.json. The held-out sets are never read here.
//
//   npx tsx scripts/train-reply-model.ts          writes src/modules/inbound/reply-model.json
//   npx tsx scripts/train-reply-model.ts --cv [--misses]  5-fold cross-validation on the tuning replies:
//                                                 rules, model and their combinations compared
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { analyzeMessage } from '../src/modules/inbound/analyze.ts';
import { RuleClassifier, type ClassifierInput, type ClassifierResult, type ReplyClassification } from '../src/modules/inbound/classifier.ts';
import { combine } from '../src/modules/inbound/classifier.ts';
import { featuresOf, predict, train, type Example } from '../src/modules/inbound/model.ts';

const FIXTURES = fileURLToPath(new URL('../fixtures/mail/', import.meta.url));
const OUT = fileURLToPath(new URL('../src/modules/inbound/reply-model.json', import.meta.url));
const CLASSES = new Set(['interested', 'not_interested', 'unsubscribe', 'out_of_office']);

interface Row extends Example { file: string; rule: ClassifierResult; input: ClassifierInput }

async function load(): Promise<Row[]> {
  const rows: Row[] = [];
  for (const file of ['labels.json', 'replies/tuning-labels.json']) {
    const { messages } = JSON.parse(await readFile(path.join(FIXTURES, file), 'utf8')) as { messages: Array<{ file: string; class: string; set?: string }> };
    for (const m of messages) {
      if (!CLASSES.has(m.class) || m.set === 'holdout') continue;
      let input: ClassifierInput | undefined;
      let rule: ClassifierResult | undefined;
      const rules = new RuleClassifier();
      await analyzeMessage(await readFile(path.join(FIXTURES, m.file)), {
        classifier: { classify: async (i) => ((input = i), (rule = rules.classifySync(i))) },
      });
      if (!input || !rule) continue; // a fixture the bounce parser takes first
      rows.push({ file: m.file, classification: m.class as ReplyClassification, features: featuresOf(input), rule, input });
    }
  }
  return rows;
}

const rows = await load();
if (process.argv.includes('--cv')) {
  const K = 5;
  const right = { rules: 0, model: 0, combined: 0 };
  const r7 = { rules: 0, model: 0, combined: 0, n: 0 };
  for (let k = 0; k < K; k++) {
    const test = rows.filter((_, i) => i % K === k);
    const model = train(rows.filter((_, i) => i % K !== k));
    for (const r of test) {
      const got = { rules: r.rule.classification, model: predict(model, r.features).classification, combined: combine(r.rule, model, r.input).classification };
      const fresh = r.file.startsWith('replies/tuning/');
      if (fresh) r7.n++;
      if (got.combined !== r.classification && process.argv.includes('--misses')) console.log(`  ${r.file}: expected ${r.classification}, got ${got.combined} (rule ${r.rule.decidedBy})`);
      for (const k of ['rules', 'model', 'combined'] as const) {
        if (got[k] !== r.classification) continue;
        right[k]++;
        if (fresh) r7[k]++;
      }
    }
  }
  const pct = (n: number, d: number) => `${n}/${d} (${((100 * n) / d).toFixed(1)}%)`;
  console.log('5-fold cross-validation on the tuning replies (all; round 7 alone)');
  for (const k of ['rules', 'model', 'combined'] as const) console.log(`${k.padEnd(9)} ${pct(right[k], rows.length).padEnd(16)} ${pct(r7[k], r7.n)}`);
} else {
  const model = train(rows);
  await writeFile(OUT, JSON.stringify(model) + '\n');
  console.log(`${rows.length} tuning replies, ${Object.keys(model.features).length} features -> ${path.relative(process.cwd(), OUT)}`);
}
