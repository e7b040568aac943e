// A TCP port on 127.0.0.1 that refuses connections for as long as a test needs it.
//
// A port bound with listen(0) and closed again is not that: it lies in the kernel's ephemeral
// range, so the next listen(0) of any process on the machine (another test file, another
// checkout's suite) or an outgoing connection's source port may take it a moment later, and the
// test then meets a server instead of a refusal ("Connection terminated unexpectedly"). A port
// below the ephemeral range is never handed out that way; only a service configured for that
// exact port could listen there, and the candidate is checked to refuse before it is returned.
import { readFileSync } from 'node:fs';
import net from 'node:net';

function ephemeralLow(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && low > 2048) return low;
  } catch {
    // not Linux: IANA's dynamic range starts at 49152
  }
  return 49152;
}

function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

let found: number | undefined;

/** A port below the ephemeral range that nothing listens on (checked), the same for the run. */
export async function refusedPort(): Promise<number> {
  if (found !== undefined && (await refuses(found))) return found;
  // Counting down from just below the ephemeral range: well above the fixed ports services use.
  for (let port = ephemeralLow() - 1; port > 1024; port--) {
    if (await refuses(port)) return (found = port);
  }
  throw new Error('no refusing port below the ephemeral range on 127.0.0.1');
}

/**
 * A port below the ephemeral range that nothing listens on (checked), picked at random: for a
 * test that starts a server there later ("the server comes back"). Random, so that two suites
 * running side by side do not both pick it (refusedPort's is the same in every process).
 */
export async function laterPort(): Promise<number> {
  const high = ephemeralLow() - 1;
  const low = Math.max(10_000, high - 20_000);
  for (let tries = 0; tries < 100; tries++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (port !== found && (await refuses(port))) return port;
  }
  throw new Error('no refusing port below the ephemeral range on 127.0.0.1');
}
