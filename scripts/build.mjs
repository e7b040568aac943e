// `npm run build` (and `npm ci`, through `prepare`): the daemon and the CLI as one ES module
// bundle in dist/cli/ (main.js and the chunks its lazy imports load), made by esbuild.
//
// Why a bundle and not tsc's one-file-per-module output: a command's start-up is its whole cost,
// and on Node 20 most of it is resolving and loading modules one file at a time (zod alone is
// 224 modules). One bundle with code splitting loads a few files;
// `mailgate sender list --json` spends a quarter less CPU (0.24 -> 0.18 s; median wall time
// 0.325 -> 0.224 s in the same sitting; docs/benchmarks.md).
//
// What is bundled: our sources and the small pure-JS libraries the CLI loads at every start
// (BUNDLED below). Everything else stays an external import from node_modules, loaded only by
// the command that needs it: the ORM (which looks up drivers and entities at run time), mail
// parsing, the PostgreSQL binaries, pino (which starts worker threads from files of its own).
//
// Every file lands in dist/cli/, two levels below the repository root as src/cli/ is, so the two
// paths our code resolves from its own location (config/ and package.json, two levels up) are
// the same from the sources and from the bundle. Type checking is `npm test`'s job (tsc --noEmit).
import { build } from 'esbuild';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// `--outdir DIR` builds elsewhere (test/cli/dist.test.ts builds a fresh one in a temp dir).
const i = process.argv.indexOf('--outdir');
const outRoot = i > 0 ? path.resolve(process.argv[i + 1]) : path.join(root, 'dist');

const BUNDLED = new Set(['commander', 'zod', 'pg']);
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const external = Object.keys(pkg.dependencies)
  .filter((name) => !BUNDLED.has(name))
  .flatMap((name) => [name, `${name}/*`]);

// Only our own output: dist/dashboard/ (the front end's build) lives beside it.
rmSync(path.join(outRoot, 'cli'), { recursive: true, force: true });
await build({
  entryPoints: [path.join(root, 'src', 'cli', 'main.ts')],
  outdir: path.join(outRoot, 'cli'),
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // pg's optional native binding and tsx (used only with MAILGATE_FROM_SOURCE) are never bundled.
  external: [...external, 'pg-native', 'tsx', 'tsx/*'],
  // MikroORM and the logs name things by their class and function names.
  keepNames: true,
  sourcemap: 'linked',
  // Bundled CommonJS libraries (commander, pg) call require() for Node's own modules.
  banner: { js: "import { createRequire as __mailgateRequire } from 'node:module'; const require = __mailgateRequire(import.meta.url);" },
  logLevel: 'warning',
});
