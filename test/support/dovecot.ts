// A real IMAP server for the tests: Dovecot from Debian's packages, installed on first use
// (as root, through apt-get: apt.ts) and started from a config written into a temp dir. Users live in
// a passwd-file; mail in Maildirs; no TLS.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync, chmodSync, chownSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { ImapFlow } from 'imapflow';
import { freePort } from '../../src/db/embedded.ts';
import { aptInstall } from './apt.ts';

function ensureInstalled(): string {
  const found = ['/usr/sbin/dovecot', '/usr/local/sbin/dovecot'].find((p) => existsSync(p));
  if (found) return found;
  if (process.getuid?.() !== 0) throw new Error('the IMAP tests need Dovecot: run as root once, or `apt-get install dovecot-imapd`');
  aptInstall('/usr/sbin/dovecot', ['dovecot-imapd']);
  // The package may have started a system instance; ours runs from its own config.
  return '/usr/sbin/dovecot';
}

async function waitForPort(port: number, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.end();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`IMAP server did not open port ${port}`);
}

export class ImapTestServer {
  readonly dir: string;
  port = 0;
  private proc?: ChildProcess;
  private binary = '';
  private users = new Set<string>();

  constructor() {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'mailgate-imap-'));
  }

  async start(): Promise<void> {
    this.binary = ensureInstalled();
    this.port = await freePort();
    chmodSync(this.dir, 0o755);
    for (const d of ['run', 'home']) mkdirSync(path.join(this.dir, d), { recursive: true, mode: 0o755 });
    mkdirSync(path.join(this.dir, 'users'), { recursive: true, mode: 0o755 });
    const root = process.getuid?.() === 0;
    const mailUser = root ? 'dovecot' : os.userInfo().username;
    const conf = `
base_dir = ${this.dir}/run
state_dir = ${this.dir}/run
log_path = ${this.dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = 1
first_valid_gid = 1
${root ? '' : `default_internal_user = ${mailUser}\ndefault_login_user = ${mailUser}\n`}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u ${this.dir}/users/%u
}
userdb {
  driver = static
  args = uid=${mailUser} gid=${mailUser} home=${this.dir}/home/%u
}
mail_location = maildir:~/Maildir
service imap-login {
  inet_listener imap {
    port = ${this.port}
  }
}
service stats {
  unix_listener stats-reader {
    mode = 0666
  }
  unix_listener stats-writer {
    mode = 0666
  }
}
`;
    writeFileSync(path.join(this.dir, 'dovecot.conf'), conf);
    await this.launch();
  }

  private async launch(): Promise<void> {
    this.proc = spawn(this.binary, ['-F', '-c', path.join(this.dir, 'dovecot.conf')], { stdio: 'ignore' });
    await waitForPort(this.port);
  }

  /** Stops the server (dropping every connection) and starts it again on the same port. */
  async restart(): Promise<void> {
    await this.kill();
    await this.launch();
  }

  private async kill(): Promise<void> {
    const p = this.proc;
    if (p && p.exitCode === null && p.signalCode === null) {
      await new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill('SIGTERM');
      });
    }
  }

  /** Delivers a raw message into a user's INBOX over IMAP (APPEND). */
  async append(user: string, password: string, raw: string | Buffer, date?: Date): Promise<void> {
    const client = new ImapFlow({ host: '127.0.0.1', port: this.port, secure: false, auth: { user, pass: password }, logger: false });
    client.on('error', () => {});
    await client.connect();
    try {
      await client.append('INBOX', raw, [], date);
    } finally {
      await client.logout();
    }
  }

  /** The UID of the newest message in the user's INBOX (0 when it is empty). */
  async lastUid(user: string, password: string): Promise<number> {
    const client = new ImapFlow({ host: '127.0.0.1', port: this.port, secure: false, auth: { user, pass: password }, logger: false });
    client.on('error', () => {});
    await client.connect();
    try {
      const status = await client.status('INBOX', { uidNext: true });
      if (!status) throw new Error('STATUS INBOX failed');
      return Number(status.uidNext) - 1;
    } finally {
      await client.logout();
    }
  }

  /** Bytes the server sent in each finished IMAP session so far (its "Logged out ... out=N" log lines), oldest first. */
  sessionBytesOut(): number[] {
    const file = path.join(this.dir, 'dovecot.log');
    if (!existsSync(file)) return [];
    return [...readFileSync(file, 'utf8').matchAll(/Logged out in=\d+ out=(\d+)/g)].map((m) => Number(m[1]));
  }

  addUser(user: string, password: string): void {
    if (this.users.has(user)) return;
    // A passwd-file per user: Dovecot looks at a loaded passwd-file for changes at most once a
    // second, so a user appended to one shared file right after a login was refused until the
    // next second (every time, measured); a file it has never read is read at the first login.
    writeFileSync(path.join(this.dir, 'users', user), `${user}:{PLAIN}${password}\n`);
    const home = path.join(this.dir, 'home', user);
    mkdirSync(home, { recursive: true });
    if (process.getuid?.() === 0) {
      const uid = Number(execFileSync('id', ['-u', 'dovecot']).toString());
      const gid = Number(execFileSync('id', ['-g', 'dovecot']).toString());
      chownSync(home, uid, gid);
    }
    this.users.add(user);
  }

  url(user: string, password: string): string {
    return `imap://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
