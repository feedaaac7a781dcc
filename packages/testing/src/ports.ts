import { createServer } from 'node:net';

/** A TCP port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        reject(new Error('no port'));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

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
 * A port in [20000, 32000) that was free a moment ago, with `port + offset` free too: below Linux's
 * ephemeral range (32768–60999), so that while a server there is stopped, clients reconnecting to it
 * cannot connect to themselves (TCP self-connect) and hold the port.
 */
export async function freeLowPort(offset = 0): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * (12_000 - offset));
    if ((await isPortFree(port)) && (offset === 0 || (await isPortFree(port + offset)))) return port;
  }
  throw new Error('no free port pair below 32000');
}
