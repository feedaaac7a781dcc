import { type GoodbyeEvent, signUserToken } from '@herald/protocol';
import type { AppProcess } from '@herald/testing';
import { redisUrl } from '@herald/testing';
import { io, type Socket } from 'socket.io-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectAndDrop, RawClient } from './support/raw-client.js';
import { randomId, SECRET, Stack, waitFor } from './support/stack.js';

const MAX = 3;

async function tokenFor(userId: string): Promise<string> {
  return (
    await signUserToken({ tenantId: 'default', keyId: 'test-key', userId, secret: SECRET, ttlSeconds: 3600 })
  ).token;
}

async function openConnections(app: AppProcess): Promise<number> {
  const health = (await (await fetch(`${app.url}/healthz`)).json()) as { connections: number };
  return health.connections;
}

// One realtime process with HERALD_MAX_CONNECTIONS_PER_USER=3, driven by raw Engine.IO clients.
describe('per-user connection slots: taken only by a connected socket, always given back', () => {
  let stack: Stack;
  let realtime: AppProcess;

  beforeAll(async () => {
    stack = new Stack(redisUrl());
    realtime = await stack.start('realtime', 'rt-slots', {
      HERALD_MAX_CONNECTIONS_PER_USER: String(MAX),
    });
  });
  afterEach(async () => {
    for (const client of stack.clients) client.disconnect();
    await waitFor(async () => (await openConnections(realtime)) === 0, { what: 'every connection closed' });
  });
  afterAll(async () => {
    await stack.dispose();
  });

  it('CONNECT with auth, then the TCP socket dropped at once, 10× the limit: the user still connects', async () => {
    const user = randomId('drop');
    const token = await tokenFor(user);
    for (let n = 0; n < MAX * 10; n++) await connectAndDrop(realtime.url, { token });
    // Every dropped connection is gone on the server: no socket of this user is open.
    await waitFor(async () => (await openConnections(realtime)) === 0, { what: 'no open connection' });

    const tabs = Array.from({ length: MAX }, () => stack.client(user));
    for (const tab of tabs) await tab.connect(realtime.url);
    expect(tabs.every((tab) => tab.socket?.connected)).toBe(true);
    // The limit still holds for connected sockets.
    const extra = stack.client(user);
    await expect(extra.connect(realtime.url)).rejects.toMatchObject({
      data: { code: 'HERALD_ERR_TOO_MANY_CONNECTIONS' },
    });
  });

  it('the namespace connected and disconnected 10× on one open connection: each socket gives its slot back', async () => {
    const user = randomId('cycle');
    const token = await tokenFor(user);
    const raw = new RawClient(realtime.url);
    await raw.opened();
    for (let n = 0; n < MAX * 10; n++) {
      const before = raw.frames.length;
      await raw.connect({ token });
      await waitFor(() => raw.frames.slice(before).some((frame) => frame.startsWith('40{"sid"')), {
        what: `CONNECT ${n} answered`,
      });
      await raw.send('41');
      // A CONNECT to an unknown namespace is answered once the server has read everything before it,
      // DISCONNECT included (a CONNECT while still connected would close the connection).
      const probe = raw.frames.length;
      await raw.send('40/nope,');
      await waitFor(() => raw.frames.slice(probe).some((frame) => frame.startsWith('44/nope,')), {
        what: 'probe answered',
      });
    }
    const tabs = Array.from({ length: MAX }, () => stack.client(user));
    for (const tab of tabs) await tab.connect(realtime.url);
    expect(tabs.every((tab) => tab.socket?.connected)).toBe(true);
    raw.drop();
  });

  it('sockets closed by the client and by dropped TCP connections give their slots back', async () => {
    const user = randomId('close');
    for (let round = 0; round < 3; round++) {
      const tabs = Array.from({ length: MAX }, () => stack.client(user));
      for (const tab of tabs) await tab.connect(realtime.url);
      tabs[0]?.disconnect(); // a client-side close
      for (const tab of tabs.slice(1)) tab.socket?.io.engine.close(); // the transport closed under it
      await waitFor(async () => (await openConnections(realtime)) === 0, { what: 'tabs closed' });
    }
    const last = stack.client(user);
    await last.connect(realtime.url);
    expect(last.socket?.connected).toBe(true);
  });

  it('4× the limit handshaking at once: never more than the limit connected, every other one told why', async () => {
    const user = randomId('burst');
    const token = await tokenFor(user);
    const outcomes = await Promise.all(
      Array.from({ length: MAX * 4 }, () => {
        const socket = io(realtime.url, {
          auth: { token },
          transports: ['websocket'],
          reconnection: false,
          forceNew: true,
        });
        return new Promise<{ socket: Socket; refused?: string | undefined }>((resolve) => {
          socket.once('connect_error', (error: Error & { data?: { code?: string } }) =>
            resolve({ socket, refused: error.data?.code }),
          );
          socket.once('goodbye', (event: GoodbyeEvent) => resolve({ socket, refused: event.code }));
          socket.once('synced', () => resolve({ socket }));
        });
      }),
    );
    try {
      const connected = outcomes.filter((outcome) => outcome.refused === undefined);
      expect(connected).toHaveLength(MAX);
      for (const outcome of outcomes.filter((o) => o.refused !== undefined))
        expect(outcome.refused).toBe('HERALD_ERR_TOO_MANY_CONNECTIONS');
    } finally {
      for (const { socket } of outcomes) socket.disconnect();
    }
  });
});
