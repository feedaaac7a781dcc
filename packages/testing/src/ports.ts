import { createServer } from 'node:net';

/** Ports this process has handed out: a port taken a moment ago is not handed out again. */
const handedOut = new Set<number>();

/** True when `port` can be listened on at 127.0.0.1 right now. */
export async function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A port in [20000, 32000) that was free a moment ago, with `port + offset` free too, and not handed
 * out before by this process. Below Linux's ephemeral range (32768–60999) on purpose: between the
 * moment a port is picked and the moment its server listens, any outgoing connection on the machine
 * (an app's Redis client, a health check) may be given an ephemeral port as its own, and a server
 * then fails with EADDRINUSE; and while a server there is stopped, clients reconnecting to it cannot
 * connect to themselves (TCP self-connect) and hold the port.
 */
export async function freeLowPort(offset = 0): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * (12_000 - offset));
    if (handedOut.has(port) || (offset !== 0 && handedOut.has(port + offset))) continue;
    if ((await isPortFree(port)) && (offset === 0 || (await isPortFree(port + offset)))) {
      handedOut.add(port);
      if (offset !== 0) handedOut.add(port + offset);
      return port;
    }
  }
  throw new Error('no free port below 32000');
}

/** A TCP port that was free a moment ago on 127.0.0.1, outside the ephemeral range (see freeLowPort). */
export async function freePort(): Promise<number> {
  return freeLowPort();
}
