#!/usr/bin/env node
// mailgate runs the JavaScript compiled into dist/ (`npm run build`; `npm ci` builds it through
// `prepare`), so no start pays for compiling TypeScript. MAILGATE_FROM_SOURCE=1 runs the
// TypeScript sources through tsx instead (a dev dependency): the test suite sets it so that the
// processes it spawns always run the code under test, never a dist/ built before an edit.
import { existsSync } from 'node:fs';

if (process.env.MAILGATE_FROM_SOURCE === '1') {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
} else {
  const entry = new URL('../dist/cli/main.js', import.meta.url);
  if (!existsSync(entry)) {
    process.stderr.write('mailgate: dist/ is not built: run `npm run build` (npm ci runs it) first\n');
    process.exit(1);
  }
  await import(entry.href);
}
