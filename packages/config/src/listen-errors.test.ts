import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { listenFailure } from './listen-errors.js';

/** What Node answers a real `listen` on `host`:`port`. */
function listenError(port: number, host: string): Promise<unknown> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', resolve);
    server.listen(port, host, () => server.close(() => resolve(undefined)));
  });
}

describe('listenFailure', () => {
  it('names HOST or PORT for what Node answers a listen that cannot be made, keeping its error as the cause', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const inUse = await listenError(port, '127.0.0.1');
      expect(String(listenFailure(inUse, { port, host: '127.0.0.1' }))).toMatch(
        new RegExp(`PORT=${port} is taken on 127.0.0.1`),
      );
      expect((listenFailure(inUse, { port, host: '127.0.0.1' }) as Error).cause).toBe(inUse);
    } finally {
      taken.close();
    }
    const unknownHost = await listenError(0, 'bogus.invalid');
    expect(String(listenFailure(unknownHost, { port: 0, host: 'bogus.invalid' }))).toMatch(
      /HOST=bogus\.invalid is no name this machine can resolve/,
    );
    // TEST-NET-1: an address no machine here has.
    const notHere = await listenError(0, '192.0.2.1');
    expect(String(listenFailure(notHere, { port: 0, host: '192.0.2.1' }))).toMatch(
      /HOST=192\.0\.2\.1 is not an address of this machine/,
    );
    const other = new Error('something else');
    expect(listenFailure(other, { port: 1, host: 'x' })).toBe(other);
  });
});
