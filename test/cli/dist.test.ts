// The built output, as `npm ci` leaves it and the daemon, the CLI and the image run it: src/
// bundled by scripts/build.mjs into a fresh dist/ beside a copy of bin/, run with plain node
// (no tsx, no MAILGATE_FROM_SOURCE). Other tests run the sources; this one proves what ships.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { createTestDatabase } from '../support/harness.ts';

const run = promisify(execFile);
const root = process.cwd();

describe('the compiled dist/ (npm run build)', function () {
  this.timeout(180_000);
  let dir: string;
  let db: { url: string; drop(): Promise<void> };
  let env: NodeJS.ProcessEnv;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-dist-'));
    mkdirSync(path.join(dir, 'bin'));
    copyFileSync(path.join(root, 'bin', 'mailgate.js'), path.join(dir, 'bin', 'mailgate.js'));
    copyFileSync(path.join(root, 'package.json'), path.join(dir, 'package.json'));
    cpSync(path.join(root, 'config'), path.join(dir, 'config'), { recursive: true });
    symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
    await run(process.execPath, [path.join(root, 'scripts', 'build.mjs'), '--outdir', path.join(dir, 'dist')], { cwd: root });
    db = await createTestDatabase();
    const { MAILGATE_FROM_SOURCE: _source, NODE_OPTIONS: _opts, ...parent } = process.env;
    env = { ...parent, DATABASE_URL: db.url, MAILGATE_SECRET_KEY: randomBytes(32).toString('hex'), LOG_LEVEL: 'warn' };
  });
  after(async () => {
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const mailgate = (...argv: string[]) => run(process.execPath, [path.join(dir, 'bin', 'mailgate.js'), ...argv], { env, cwd: dir });

  it('runs without TypeScript: version from package.json, config from config/, migrations, commands', async () => {
    assert.equal((await mailgate('--version')).stdout, `${JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version}\n`);
    const migrated = JSON.parse((await mailgate('migrate', '--json')).stdout);
    assert.deepEqual(migrated, { applied: [] }, 'the test database is cloned from a migrated template');
    const ws = JSON.parse((await mailgate('workspace', 'create', '--name', 'built', '--json')).stdout);
    await mailgate('sender', 'add', '--workspace', 'built', '--email', 'b@send.example', '--name', 'B', '--smtp', 'smtp://u:p@127.0.0.1:2525', '--json');
    const list = JSON.parse((await mailgate('sender', 'list', '--workspace', ws.id, '--json')).stdout);
    assert.deepEqual(list.data.map((s: { email: string }) => s.email), ['b@send.example']);
    // A bad setting is reported through config/ (two levels up from dist/cli/).
    await assert.rejects(run(process.execPath, [path.join(dir, 'bin', 'mailgate.js'), 'workspace', 'list'], { env: { ...env, PORT: 'eighty' } }), (e: { code: number; stderr: string }) => {
      assert.equal(e.code, 1);
      assert.match(e.stderr, /invalid setting PORT/);
      return true;
    });
  });

  it('without dist/ the bin says in one line how to build it', async () => {
    rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
    await assert.rejects(mailgate('--version'), (e: { code: number; stdout: string; stderr: string }) => {
      assert.equal(e.code, 1);
      assert.equal(e.stdout, '');
      assert.equal(e.stderr, 'mailgate: dist/ is not built: run `npm run build` (npm ci runs it) first\n');
      return true;
    });
  });
});
