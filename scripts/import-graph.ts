// The import graph of src/: file-level cycles (strongly connected components) and the
// dependencies between feature modules (src/modules/<name>). Used to show that module
// dependencies point one way (docs/architecture.md); no package needed, the imports are read
// as text. `import type` counts as an edge too (it still couples the files); `--runtime`
// leaves type-only imports out. Dynamic `import()` counts unless `--static`.
//
//   npx tsx scripts/import-graph.ts [--runtime] [--static] [--modules] [DIR]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const args = process.argv.slice(2);
const runtimeOnly = args.includes('--runtime');
const staticOnly = args.includes('--static');
const showModules = args.includes('--modules');
const root = resolve(args.find((a) => !a.startsWith('--')) ?? 'src');

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const all = files(root).sort();
const known = new Set(all);
const edges = new Map<string, Set<string>>();

// `import x from './a.ts'`, `import type {...} from`, `export {...} from`, `import('./a.ts')`.
const staticRe = /^\s*(import|export)\s+(type\s+)?[^'";]*?\s+from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]/gm;
const dynamicRe = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

for (const file of all) {
  const text = readFileSync(file, 'utf8');
  const targets = new Set<string>();
  const add = (spec: string) => {
    if (!spec.startsWith('.')) return;
    const target = resolve(dirname(file), spec);
    if (known.has(target)) targets.add(target);
  };
  for (const m of text.matchAll(staticRe)) {
    if (m[4]) { add(m[4]); continue; }
    const typeOnly = Boolean(m[2]) || /^\s*import\s+\{\s*(type\s+[^,}]+\s*,?\s*)+\}/.test(m[0]);
    if (runtimeOnly && typeOnly) continue;
    add(m[3]!);
  }
  if (!staticOnly) for (const m of text.matchAll(dynamicRe)) add(m[1]!);
  edges.set(file, targets);
}

/** Tarjan's strongly connected components of size > 1 (or a self-loop). */
function sccsOf(nodes: string[], next: (n: string) => string[]): string[][] {
  let i = 0;
  const index = new Map<string, number>();
  const lowlink = new Map<string, number>();
  const st: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, i); lowlink.set(v, i); i++;
    st.push(v); on.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) { visit(w); lowlink.set(v, Math.min(lowlink.get(v)!, lowlink.get(w)!)); }
      else if (on.has(w)) lowlink.set(v, Math.min(lowlink.get(v)!, index.get(w)!));
    }
    if (lowlink.get(v) === index.get(v)) {
      const comp: string[] = [];
      let w: string;
      do { w = st.pop()!; on.delete(w); comp.push(w); } while (w !== v);
      if (comp.length > 1 || next(v).includes(v)) out.push(comp.sort());
    }
  };
  for (const n of nodes) if (!index.has(n)) visit(n);
  return out;
}

// Tarjan's strongly connected components.
let index = 0;
const idx = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
const sccs: string[][] = [];
function strong(v: string): void {
  idx.set(v, index); low.set(v, index); index++;
  stack.push(v); onStack.add(v);
  for (const w of edges.get(v) ?? []) {
    if (!idx.has(w)) { strong(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); }
    else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
  }
  if (low.get(v) === idx.get(v)) {
    const comp: string[] = [];
    let w: string;
    do { w = stack.pop()!; onStack.delete(w); comp.push(w); } while (w !== v);
    if (comp.length > 1 || edges.get(v)!.has(v)) sccs.push(comp.sort());
  }
}
for (const f of all) if (!idx.has(f)) strong(f);

const rel = (f: string) => relative(root, f);
const edgeCount = [...edges.values()].reduce((n, s) => n + s.size, 0);
console.log(`${all.length} files, ${edgeCount} imports${runtimeOnly ? ' (runtime only)' : ''}${staticOnly ? ' (static only)' : ''}`);
console.log(`${sccs.length} import cycle(s) (strongly connected groups of files)`);
for (const comp of sccs) {
  console.log(`- ${comp.length} files: ${comp.map(rel).join(', ')}`);
}

// Module level: src/modules/<a> -> src/modules/<b>; a pair both ways is a two-way dependency.
const moduleOf = (f: string) => {
  const r = rel(f).split('/');
  return r[0] === 'modules' ? r[1]! : null;
};
const modEdges = new Map<string, Map<string, string[]>>();
for (const [from, tos] of edges) {
  const a = moduleOf(from);
  if (!a) continue;
  for (const to of tos) {
    const b = moduleOf(to);
    if (!b || a === b) continue;
    const m = modEdges.get(a) ?? new Map<string, string[]>();
    modEdges.set(a, m);
    const list = m.get(b) ?? [];
    list.push(`${rel(from)} -> ${rel(to)}`);
    m.set(b, list);
  }
}
// Cycles among modules (strongly connected groups), whatever their length.
const modSccs = sccsOf([...new Set([...modEdges.keys(), ...[...modEdges.values()].flatMap((m) => [...m.keys()])])], (m) => [...(modEdges.get(m)?.keys() ?? [])]);
console.log(`${modSccs.length} cycle(s) among modules${modSccs.length ? ': ' + modSccs.map((c) => c.join(' -> ')).join('; ') : ''}`);
const twoWay: string[] = [];
for (const [a, m] of modEdges) for (const b of m.keys()) {
  if (a < b && modEdges.get(b)?.has(a)) twoWay.push(`${a} <-> ${b}`);
}
console.log(`${twoWay.length} pair(s) of modules that import each other${twoWay.length ? ': ' + twoWay.join(', ') : ''}`);
if (showModules) {
  for (const a of [...modEdges.keys()].sort()) {
    console.log(`${a} -> ${[...modEdges.get(a)!.keys()].sort().join(', ')}`);
    if (args.includes('--why')) for (const [, list] of modEdges.get(a)!) for (const l of list) console.log(`    ${l}`);
  }
}
