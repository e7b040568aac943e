import net from 'node:net';

/**
 * A TCP proxy that can freeze the connections open at a moment: their bytes stop flowing both
 * ways and nothing closes them (what a failover that moves the address, a dropped NAT entry or
 * a hung server does). Connections opened later flow.
 */
export async function freezingProxy(target: { hostname: string; port: string | number }) {
  const open = new Set<{ client: net.Socket; upstream: net.Socket; frozen: boolean }>();
  let down = false;
  // Set by freezeOn: the first client bytes matching it freeze their connection, unforwarded.
  let trigger: RegExp | undefined;
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    // Down: every new connection is cut at once (as by a server that is not there).
    if (down) return void client.destroy();
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair = { client, upstream, frozen: false };
    open.add(pair);
    client.on('data', (d) => {
      if (trigger?.test(d.toString('latin1'))) {
        trigger = undefined;
        pair.frozen = true;
      }
      if (!pair.frozen) upstream.write(d);
    });
    upstream.on('data', (d) => !pair.frozen && client.write(d));
    const close = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    /** How many connections the proxy has taken so far (cut ones too). */
    get accepted() {
      return accepted;
    },
    /** How many proxied connections are open now. */
    get connections() {
      return open.size;
    },
    freeze: () => open.forEach((p) => (p.frozen = true)),
    /**
     * The server goes silent under a command: the first client bytes from now on that match
     * `command` are not forwarded, and their connection freezes (the others flow).
     */
    freezeOn: (command: RegExp) => {
      trigger = command;
    },
    /** The server goes away: open connections are cut and new ones cut at once, until `up`. */
    down: () => {
      down = true;
      open.forEach((p) => (p.client.destroy(), p.upstream.destroy()));
    },
    up: () => {
      down = false;
    },
    close: async () => {
      open.forEach((p) => (p.client.destroy(), p.upstream.destroy()));
      await new Promise((r) => server.close(r));
    },
  };
}
