import { inboxKeys, notificationIndexKey } from '@herald/inbox';
import { type NotificationEvent, signUserToken } from '@herald/protocol';
import { type AppProcess, randomId, redisUrl, testRedis, waitFor } from '@herald/testing';
import type { Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, SECRET, stackEnv, TestApps } from './support/stack.js';

describe('end to end: POST /notify → BullMQ → worker → Redis pub/sub → two realtime instances', () => {
  const apps = new TestApps();
  let gateway: AppProcess;
  let realtimeA: AppProcess;
  let realtimeB: AppProcess;

  let env: Record<string, string>;

  beforeAll(async () => {
    env = stackEnv(redisUrl());
    ({
      gateway,
      'realtime-a': realtimeA,
      'realtime-b': realtimeB,
    } = await apps.start(env, {
      gateway: 'gateway',
      'realtime-a': 'realtime',
      'realtime-b': 'realtime',
      worker: 'worker',
    }));
  });

  afterAll(() => apps.stop());

  const connect = (url: string, auth: Record<string, unknown>): Socket => apps.socket(url, { auth });

  async function tokenFor(userId: string): Promise<string> {
    const response = await fetch(`${gateway.url}/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId }),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { token: string }).token;
  }

  async function connected(socket: Socket): Promise<void> {
    // The socket may have connected already, while the test awaited something else.
    if (socket.connected) return;
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('connect_error', reject);
    });
  }

  async function notify(userId: string, payload: Record<string, unknown>): Promise<string> {
    const response = await fetch(`${gateway.url}/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId, payload }),
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  }

  it('delivers one notification to both of a user’s clients, on different instances, exactly once', async () => {
    const alice = randomId('alice');
    const mallory = randomId('mallory');
    const onA = connect(realtimeA.url, { token: await tokenFor(alice) });
    const onB = connect(realtimeB.url, { token: await tokenFor(alice) });
    const other = connect(realtimeA.url, { token: await tokenFor(mallory) });
    const received = new Map<Socket, NotificationEvent[]>([
      [onA, []],
      [onB, []],
      [other, []],
    ]);
    for (const [socket, list] of received) socket.on('notification', (event) => list.push(event));
    await Promise.all([connected(onA), connected(onB), connected(other)]);

    const id = await notify(alice, { text: 'hello', n: 1 });
    await waitFor(() => received.get(onA)?.length === 1 && received.get(onB)?.length === 1, {
      what: 'the notification on both instances',
    });

    // A second notification is a fence: once it has arrived, a duplicate of the first would have too.
    const fence = await notify(alice, { fence: true });
    await waitFor(
      () => received.get(onA)?.some((e) => e.id === fence) && received.get(onB)?.some((e) => e.id === fence),
      {
        what: 'the fence notification',
      },
    );

    for (const socket of [onA, onB]) {
      const events = received.get(socket) ?? [];
      expect(events.map((event) => event.id)).toEqual([id, fence]);
      expect(events[0]).toMatchObject({ id, userId: alice, payload: { text: 'hello', n: 1 } });
      expect(Number.isNaN(Date.parse(events[0]?.createdAt ?? ''))).toBe(false);
    }
    expect(received.get(other)).toEqual([]);
  });

  it('an ack makes the gateway report `delivered`; a read through the REST API pushes the unread count to every tab', async () => {
    const bob = randomId('bob');
    const tabA = connect(realtimeA.url, { token: await tokenFor(bob) });
    const tabB = connect(realtimeB.url, { token: await tokenFor(bob) });
    const received: NotificationEvent[] = [];
    const unreadSeen = new Map<Socket, number[]>([
      [tabA, []],
      [tabB, []],
    ]);
    tabA.on('notification', (event) => received.push(event));
    for (const [tab, counts] of unreadSeen)
      tab.on('unread', (event: { count: number }) => counts.push(event.count));
    await Promise.all([connected(tabA), connected(tabB)]);

    const id = await notify(bob, { text: 'ack me' });
    await waitFor(() => received.some((event) => event.id === id), { what: 'the notification' });
    const status = async () => {
      const response = await fetch(`${gateway.url}/notifications/${id}`, {
        headers: { authorization: `Bearer ${API_KEY}` },
      });
      return (await response.json()) as { status: string; deliveredAt?: string; createdAt?: string };
    };
    // Received, so stored: its job is gone from the queue, and the status still says when it was sent.
    const stored = await status();
    expect(stored.status).toBe('queued');
    expect(stored.createdAt).toBe(received.find((event) => event.id === id)?.createdAt);

    const answer = await tabA.emitWithAck('ack', { ids: [id] });
    expect(answer).toMatchObject({ ok: true });
    const delivered = await waitFor(
      async () => {
        const current = await status();
        return current.status === 'delivered' ? current : undefined;
      },
      { what: 'status delivered' },
    );
    expect(Number.isNaN(Date.parse(delivered.deliveredAt ?? ''))).toBe(false);
    expect(delivered.createdAt).toBe(stored.createdAt);
    // Its id is routed to bob's inbox slot: found by id alone, so no id → user index key was written.
    const prefix = env.HERALD_INBOX_PREFIX ?? 'herald:inbox:';
    expect(inboxKeys(prefix, bob).routes(id)).toBe(true);
    const redis = testRedis();
    try {
      expect(await redis.hget(inboxKeys(prefix, bob).marker(id), 'user')).toBe(bob);
      expect(await redis.exists(notificationIndexKey(prefix, id))).toBe(0);
    } finally {
      redis.disconnect();
    }

    const listing = await fetch(`${gateway.url}/users/${bob}/notifications`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    const page = (await listing.json()) as {
      items: { id: string; read: boolean }[];
      unread: { count: number };
    };
    expect(page.items.map((item) => item.id)).toEqual([id]);
    expect(page.unread.count).toBe(1);

    const read = await fetch(`${gateway.url}/users/${bob}/notifications/read`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ all: true }),
    });
    expect(await read.json()).toMatchObject({ changed: 1, unread: { count: 0 } });
    await waitFor(() => [...unreadSeen.values()].every((counts) => counts.at(-1) === 0), {
      what: 'unread 0 on both tabs',
    });
  });

  it('refuses a forged, an expired and a missing token with connect_error', async () => {
    const forged = (
      await signUserToken({
        tenantId: 'default',
        keyId: 'test-key',
        userId: 'alice',
        secret: 'not-the-secret-0123456789',
        ttlSeconds: 60,
      })
    ).token;
    const expired = (
      await signUserToken({
        tenantId: 'default',
        keyId: 'test-key',
        userId: 'alice',
        secret: SECRET,
        ttlSeconds: 60,
        now: new Date(Date.now() - 3_600_000),
      })
    ).token;
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ token: forged }, 'HERALD_ERR_TOKEN_INVALID', /invalid/i],
      [{ token: expired }, 'HERALD_ERR_TOKEN_EXPIRED', /expired/i],
      [{}, 'HERALD_ERR_TOKEN_MISSING', /no token/i],
    ];
    for (const [auth, code, message] of cases) {
      const socket = connect(realtimeB.url, auth);
      const error = await new Promise<Error & { data?: { code?: string } }>((resolve, reject) => {
        socket.once('connect', () => reject(new Error('connected with a bad token')));
        socket.once('connect_error', resolve);
      });
      expect(error.message).toMatch(message);
      expect(error.data?.code).toBe(code);
      expect(socket.connected).toBe(false);
    }
  });
});
