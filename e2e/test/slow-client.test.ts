import { randomUUID } from 'node:crypto';
import type { ListReply, NotificationEvent } from '@herald/protocol';
import { type AppProcess, redisUrl, scrapeMetrics } from '@herald/testing';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomId, Stack, waitFor } from './support/stack.js';

/** A payload of ~14 KB (the gateway takes up to 16 KB). */
const BIG = { text: 'x'.repeat(14_000) };

async function health(app: AppProcess): Promise<{ rssBytes: number; connections: number }> {
  return (await (await fetch(`${app.url}/healthz`)).json()) as { rssBytes: number; connections: number };
}

async function metric(app: AppProcess, name: string): Promise<number> {
  const family = (await scrapeMetrics(`${app.url}/metrics`)).get(name);
  return family ? family.metrics.reduce((sum, sample) => sum + Number(sample.value ?? 0), 0) : Number.NaN;
}

/**
 * A client that stops reading its socket: its TCP socket paused (the kernel's buffers fill, then the
 * server's), as a tab frozen by the browser, a phone on a dead network or an attacker would.
 */
function pause(socket: Socket): () => void {
  const tcp = (
    socket.io.engine.transport as unknown as { ws: { _socket: { pause(): void; resume(): void } } }
  ).ws._socket;
  tcp.pause();
  return () => tcp.resume();
}

async function connected(socket: Socket): Promise<void> {
  if (socket.connected) return;
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
}

/**
 * A socket.io-client of `userId` on `realtime`, from `lastOffset` when given, connected; the
 * notifications it receives go to `received`, and `state.synced` says when its replay is done.
 */
async function openSocket(
  stack: Stack,
  realtime: AppProcess,
  userId: string,
  received: NotificationEvent[] = [],
  lastOffset?: string,
): Promise<{ socket: Socket; state: { synced: boolean } }> {
  const socket = io(realtime.url, {
    auth: { token: await stack.token(userId), ...(lastOffset ? { lastOffset } : {}) },
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
  });
  stack.clients.push({ disconnect: () => socket.disconnect() } as never);
  const state = { synced: false };
  socket.on('notification', (event: NotificationEvent) => received.push(event));
  socket.on('synced', () => {
    state.synced = true;
  });
  await connected(socket);
  return { socket, state };
}

// One realtime process; a user's inbox of ~1,200 notifications of 14 KB (~17 MB) written to Redis
// directly. What the server holds for a client that does not read is bounded: pages are read from the
// inbox only while the socket has room (about 1 MiB waiting), and a socket with over 8 MiB waiting is
// disconnected; the client resumes from its lastOffset as after any disconnect.
describe('a client that stops reading', () => {
  let stack: Stack;
  let realtime: AppProcess;
  let user: string;
  let offsets: string[];
  let ids: string[];

  beforeAll(async () => {
    stack = new Stack(redisUrl());
    realtime = await stack.start('realtime', 'rt-slow');
    user = randomId('slow');
    offsets = [];
    ids = [];
    for (let n = 0; n < 1200; n++) {
      const id = randomUUID();
      const appended = await stack.inbox.append({
        id,
        userId: user,
        payload: { ...BIG, n },
        createdAt: new Date().toISOString(),
      });
      if (appended.outcome !== 'appended') throw new Error(`append ${n}: ${appended.outcome}`);
      ids.push(id);
      offsets.push(appended.offset);
    }
  }, 120_000);
  afterAll(async () => {
    await stack.dispose();
  });

  it('asks for 50 pages of ~1 MiB (a page of 1,000 costs 20 events: the burst of a socket) without reading: the server reads a page only once the last ones were read; every answer arrives once it reads again', async () => {
    const { socket } = await openSocket(stack, realtime, user);
    const rssBefore = (await health(realtime)).rssBytes;
    const resume = pause(socket);
    const answers: ListReply[] = [];
    for (let n = 0; n < 50; n++)
      socket.emit('list', { limit: 1000 }, (page: ListReply) => answers.push(page));
    // Before: the 50 pages were read from Redis at once and queued for the socket, +160 MB of the
    // server's memory within a second (an authenticated user took an instance down with a few sockets).
    const deadline = Date.now() + 5000;
    let backlog = 0;
    while (Date.now() < deadline) {
      const { rssBytes } = await health(realtime);
      expect(rssBytes - rssBefore).toBeLessThan(64 * 1024 * 1024);
      backlog = Math.max(backlog, await metric(realtime, 'herald_realtime_socket_backlog_bytes'));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(backlog).toBeGreaterThan(0);
    expect(backlog).toBeLessThan(4 * 1024 * 1024);
    resume();
    await waitFor(() => answers.length === 50, { timeoutMs: 60_000, what: 'the 50 answers' });
    for (const page of answers) {
      expect(page.ok ? 'ok' : JSON.stringify(page)).toBe('ok');
      if (page.ok) expect(page.items.length).toBeGreaterThan(50);
    }
    socket.disconnect();
  }, 120_000);

  it('a replay of ~17 MB to a client that does not read: read page by page as the client reads; every notification once, in order', async () => {
    const received: NotificationEvent[] = [];
    const { socket, state } = await openSocket(stack, realtime, user, received, offsets[0]);
    const dropped = await metric(realtime, 'herald_realtime_slow_clients_disconnected_total');
    const resume = pause(socket);
    const deadline = Date.now() + 3000;
    while (Date.now() < deadline) {
      expect(await metric(realtime, 'herald_realtime_socket_backlog_bytes')).toBeLessThan(4 * 1024 * 1024);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await metric(realtime, 'herald_realtime_slow_clients_disconnected_total')).toBe(dropped);
    resume();
    await waitFor(() => state.synced, { timeoutMs: 60_000, what: 'synced' });
    expect(received.map((event) => event.id)).toEqual(ids.slice(1));
    socket.disconnect();
  }, 120_000);

  it('live notifications to a client that does not read: past 8 MiB waiting it is disconnected, and its reconnect with lastOffset gets the rest, each once, in order', async () => {
    await stack.start('worker', 'worker-slow');
    const liveUser = randomId('slow-live');
    const received: NotificationEvent[] = [];
    const open = async (lastOffset?: string) => {
      const { socket, state } = await openSocket(stack, realtime, liveUser, received, lastOffset);
      await waitFor(() => state.synced, { timeoutMs: 30_000, what: 'synced' });
      return socket;
    };
    const first = await open();
    const dropped = await metric(realtime, 'herald_realtime_slow_clients_disconnected_total');
    const resume = pause(first);
    const sent = await stack.send(liveUser, 1500, { payload: BIG });
    await waitFor(
      async () => (await metric(realtime, 'herald_realtime_slow_clients_disconnected_total')) > dropped,
      { timeoutMs: 60_000, what: 'the slow client to be disconnected' },
    );
    let reason = '';
    first.on('disconnect', (why) => {
      reason = why;
    });
    resume();
    await waitFor(() => reason !== '', { timeoutMs: 30_000, what: 'the client to see the disconnect' });
    expect(reason).toMatch(/transport (close|error)/);
    const before = received.length;
    expect(before).toBeLessThan(1500);
    const second = await open(received.at(-1)?.offset);
    await waitFor(() => received.length >= 1500, { timeoutMs: 60_000, what: 'the rest of the 1,500' });
    // Each once, in the inbox's order (offsets gapless), every one sent.
    const stored = await stack.inboxIds(liveUser);
    expect(received.map((event) => event.id)).toEqual(stored);
    expect(new Set(stored)).toEqual(new Set(sent));
    second.disconnect();
  }, 180_000);
});
