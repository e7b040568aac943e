// Debian packages the tests need (Dovecot, Chromium, systemd's analyzer), installed on first use
// as root. One install at a time on this machine: two test runs side by side (two checkouts'
// suites, say) would otherwise race for apt's locks and one of them fail; the second run waits
// for the first and then finds the package there. apt's own locks (another apt run, unattended
// upgrades) are waited for too.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const LOCK = '/tmp/mailgate-test-apt.lock';
const WAIT = ['-o', 'DPkg::Lock::Timeout=600'];

/** Installs `packages` unless `present` (a file the package provides) exists; as root only. */
export function aptInstall(present: string, packages: string[]): void {
  if (existsSync(present)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Under the lock, look again: the run that held it may have installed the package meanwhile.
  const script = `test -e "$1" && exit 0; shift; apt-get ${WAIT.join(' ')} update -qq && apt-get ${WAIT.join(' ')} install -y -qq "$@"`;
  execFileSync('flock', ['-w', '900', LOCK, 'sh', '-c', script, 'sh', present, ...packages], { env, stdio: 'ignore' });
}
