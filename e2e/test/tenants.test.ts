import { Inbox } from '@herald/inbox';
import {
  NOTIFY_JOB_NAME,
  type NotificationEvent,
  type NotificationJob,
  notificationJobOptions,
  type SyncedEvent,
} from '@herald/protocol';
import {
  type AppProcess,
  deleteMatching,
  keysMatching,
  queueConnection,
  randomId,
  redisUrl,
  startApp,
  testRedis,
  waitFor,
} from '@herald/testing';
import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CreatedKey, createKey, herald } from './support/cli.js';
import { API_KEY, entries, gatewayCall, stackEnv, TestApps, TRIO } from './support/stack.js';

/** The stack's `HERALD_API_KEYS` key: it belongs to the tenant `default`. */
const DEFAULT_KEY = API_KEY;

describe('tenants are a wall: tenant B against tenant A’s user alice (separate processes, real clients)', () => {
  const env = stackEnv(redisUrl(), {
    HERALD_RATE_LIMIT_BURST: '5',
    HERALD_RATE_LIMIT_PER_SECOND: '0.01',
    HERALD_MAX_CONNECTIONS_PER_USER: '2',
    HERALD_REVOCATION_CHECK_MS: '300',
  });
  const apps = new TestApps();
  let gateway: AppProcess;
  let realtime: AppProcess;
  let redis: Redis | Cluster;
  let a: CreatedKey;
  let b: CreatedKey;

  beforeAll(async () => {
    redis = testRedis();
    [a, b] = await Promise.all([createKey(env, 'tenant-a'), createKey(env, 'tenant-b')]);
    ({ gateway, realtime } = await apps.start(env, TRIO));
  });

  afterAll(async () => {
    await apps.stop();
    for (const prefix of [env.HERALD_KEY_PREFIX, env.HERALD_INBOX_PREFIX, env.HERALD_RATE_LIMIT_PREFIX]) {
      await deleteMatching(redis, `${prefix}*`);
    }
    redis.disconnect();
  });

  async function call(key: string, method: string, path: string, body?: unknown) {
    const { status, body: answer } = await gatewayCall(gateway.url, key, method, path, { body });
    return { status, body: answer };
  }

  async function send(key: string, userId: string, payload: Record<string, unknown>, extra = {}) {
    const answer = await call(key, 'POST', '/notify', { userId, payload, ...extra });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    return answer.body.id as string;
  }

  async function inboxOf(key: string, userId: string) {
    const answer = await call(key, 'GET', `/users/${encodeURIComponent(userId)}/notifications?limit=1000`);
    expect(answer.status).toBe(200);
    return answer.body as {
      items: { id: string; payload: Record<string, unknown> }[];
      unread: { count: number };
    };
  }

  /** Waits until `key`'s `userId` has `id` in its inbox (the worker stored it). */
  async function stored(key: string, userId: string, id: string): Promise<void> {
    await waitFor(async () => (await inboxOf(key, userId)).items.some((item) => item.id === id), {
      what: `${id} in the inbox`,
    });
  }

  async function token(key: string, userId: string): Promise<string> {
    const answer = await call(key, 'POST', '/tokens', { userId });
    expect(answer.status).toBe(200);
    return answer.body.token as string;
  }

  /** A real socket.io-client; resolves once `synced` arrived (or rejects with the connect_error). */
  async function connect(
    tokenValue: string,
    lastOffset?: string,
  ): Promise<{ socket: Socket; received: NotificationEvent[]; synced: SyncedEvent }> {
    const received: NotificationEvent[] = [];
    const socket = apps.socket(realtime.url, {
      auth: { token: tokenValue, ...(lastOffset ? { lastOffset } : {}) },
    });
    socket.on('notification', (event: NotificationEvent) => received.push(event));
    const synced = await new Promise<SyncedEvent>((resolve, reject) => {
      socket.once('connect_error', reject);
      socket.once('synced', resolve);
    });
    return { socket, received, synced };
  }

  it('read: B lists "alice" and sees nothing of A’s alice, payloads included', async () => {
    const alice = randomId('alice');
    const id = await send(a.key, alice, { secret: 'for A only' });
    await stored(a.key, alice, id);
    const fromB = await inboxOf(b.key, alice);
    expect(fromB.items).toEqual([]);
    expect(fromB.unread.count).toBe(0);
    expect(JSON.stringify(fromB)).not.toContain('for A only');
    const fromA = await inboxOf(a.key, alice);
    expect(fromA.items.map((item) => item.payload)).toEqual([{ secret: 'for A only' }]);
  });

  it('mark read: B marking alice’s inbox read (all, or A’s ids) changes nothing of A’s', async () => {
    const alice = randomId('alice');
    const id = await send(a.key, alice, { n: 1 });
    await stored(a.key, alice, id);
    const all = await call(b.key, 'POST', `/users/${alice}/notifications/read`, { all: true });
    const ids = await call(b.key, 'POST', `/users/${alice}/notifications/read`, { ids: [id] });
    expect([all.body.changed, ids.body.changed]).toEqual([0, 0]);
    expect((await inboxOf(a.key, alice)).unread.count).toBe(1);
  });

  it('write: B’s notifications to "alice" land in B’s alice, never in A’s inbox, count or room', async () => {
    const alice = randomId('alice');
    const fromA = await send(a.key, alice, { from: 'a' });
    const fromB = await send(b.key, alice, { from: 'b' });
    await stored(b.key, alice, fromB);
    await stored(a.key, alice, fromA);
    expect((await inboxOf(a.key, alice)).items.map((item) => item.id)).toEqual([fromA]);
    expect((await inboxOf(b.key, alice)).items.map((item) => item.id)).toEqual([fromB]);
    expect((await inboxOf(a.key, alice)).unread.count).toBe(1);
  });

  it('mint token + live: B’s token for "alice" never receives A’s notifications live', async () => {
    const alice = randomId('alice');
    const [asA, asB] = await Promise.all([
      connect(await token(a.key, alice)),
      connect(await token(b.key, alice)),
    ]);
    const forA = await send(a.key, alice, { to: 'a' });
    await waitFor(() => asA.received.length === 1, { what: 'A’s alice gets A’s notification' });
    // A marker B is entitled to, sent after: once it is there, A's would have been too.
    const forB = await send(b.key, alice, { to: 'b' });
    await waitFor(() => asB.received.length >= 1, { what: 'B’s alice gets B’s notification' });
    expect(asA.received.map((event) => event.id)).toEqual([forA]);
    expect(asB.received.map((event) => event.id)).toEqual([forB]);
  });

  it('mint token + replay: B’s token for "alice" with lastOffset 0-0 replays only B’s alice', async () => {
    const alice = randomId('alice');
    const ids = [await send(a.key, alice, { n: 1 }), await send(a.key, alice, { n: 2 })];
    await stored(a.key, alice, ids[1] as string);
    const asB = await connect(await token(b.key, alice), '0-0');
    expect(asB.synced.replayed).toBe(0);
    expect(asB.received).toEqual([]);
    expect(asB.synced.unread.count).toBe(0);
    const asA = await connect(await token(a.key, alice), '0-0');
    expect(asA.received.map((event) => event.id)).toEqual(ids);
  });

  it('dedupe collision: B’s dedupeKey does not swallow A’s notification with the same key', async () => {
    const alice = randomId('alice');
    const dedupeKey = randomId('same-key');
    const fromB = await send(b.key, alice, { from: 'b' }, { dedupeKey });
    await stored(b.key, alice, fromB);
    const fromA = await send(a.key, alice, { from: 'a' }, { dedupeKey });
    await stored(a.key, alice, fromA);
    const status = await call(a.key, 'GET', `/notifications/${fromA}`);
    expect(status.status).toBe(200);
    expect(status.body.duplicateOf).toBeUndefined();
  });

  it('statuses: B cannot see A’s notification by id (404, as if it did not exist)', async () => {
    const alice = randomId('alice');
    const id = await send(a.key, alice, { n: 1 });
    await stored(a.key, alice, id);
    expect((await call(a.key, 'GET', `/notifications/${id}`)).status).toBe(200);
    const fromB = await call(b.key, 'GET', `/notifications/${id}`);
    expect(fromB.status).toBe(404);
  });

  it('bucket exhaustion: B draining "alice"’s recipient bucket leaves A’s alice untouched', async () => {
    const alice = randomId('alice');
    // Recipient burst 5, refill every 100 s: B takes all of its alice's tokens.
    for (let n = 0; n < 5; n++) await send(b.key, alice, { n });
    const refused = await call(b.key, 'POST', '/notify', { userId: alice, payload: {} });
    expect(refused.status).toBe(429);
    expect(refused.body.policy).toBe('recipient');
    await send(a.key, alice, { n: 'still fine' });
  });

  it('connection slots: B holding every slot of "alice" does not lock out A’s alice', async () => {
    const alice = randomId('alice');
    const bToken = await token(b.key, alice);
    await connect(bToken);
    await connect(bToken);
    await expect(connect(bToken)).rejects.toMatchObject({
      data: { code: 'HERALD_ERR_TOO_MANY_CONNECTIONS' },
    });
    const asA = await connect(await token(a.key, alice));
    expect(asA.socket.connected).toBe(true);
  });

  it('a token minted by a key revoked later: its live sockets get goodbye, its next handshake is refused', async () => {
    const doomed = await createKey(env, 'tenant-a');
    const alice = randomId('alice');
    const doomedToken = await token(doomed.key, alice);
    const live = await connect(doomedToken);
    const goodbyes: unknown[] = [];
    live.socket.on('goodbye', (event) => goodbyes.push(event));
    expect((await herald(['keys', 'revoke', doomed.id], env)).code).toBe(0);
    // Bounded: HERALD_REVOCATION_CHECK_MS (300 ms here, 2 s by default).
    await waitFor(() => goodbyes.length === 1 && !live.socket.connected, {
      timeoutMs: 10_000,
      what: 'goodbye to the revoked key’s socket',
    });
    expect(goodbyes[0]).toMatchObject({ code: 'HERALD_ERR_TOKEN_REVOKED', reconnect: false });
    await expect(connect(doomedToken)).rejects.toMatchObject({ data: { code: 'HERALD_ERR_TOKEN_REVOKED' } });
    // Another key of the same tenant is unaffected.
    expect((await connect(await token(a.key, alice))).socket.connected).toBe(true);
  });

  it('per-key inbox bounds: a key with --inbox-max-length 3 keeps 3 per user (oldest trimmed), others keep theirs', async () => {
    const small = await createKey(env, 'tenant-small', [
      '--inbox-max-length',
      '3',
      '--recipient-burst',
      '100',
    ]);
    const bob = randomId('bob');
    const ids: string[] = [];
    // One at a time, each stored before the next is sent: the worker runs jobs concurrently, so five
    // sent at once may be appended in another order (and "the oldest" trimmed be another one).
    for (let n = 0; n < 5; n++) {
      ids.push(await send(small.key, bob, { n }));
      await stored(small.key, bob, ids[n] as string);
    }
    expect((await inboxOf(small.key, bob)).items.map((item) => item.id)).toEqual(ids.slice(2));
    for (let n = 0; n < 5; n++) await send(a.key, bob, { n });
    await waitFor(async () => (await inboxOf(a.key, bob)).items.length === 5, { what: 'A’s bob keeps 5' });
  });

  it('data written before tenants: tenant default reads it as it was; a job without a tenant is default’s', async () => {
    const carol = randomId('carol');
    // What a pre-tenant worker wrote: the layout `<prefix>{<user>}:s`, unchanged for tenant default.
    const legacy = new Inbox(redis, { prefix: env.HERALD_INBOX_PREFIX as string });
    await legacy.append({
      id: randomId('old'),
      userId: carol,
      payload: { old: true },
      createdAt: new Date().toISOString(),
    });
    expect(await redis.exists(`${env.HERALD_INBOX_PREFIX}{${carol}}:s`)).toBe(1);
    // A pre-tenant job still in the queue: no tenantId.
    const queue = new Queue<NotificationJob>(env.HERALD_QUEUE_NAME as string, {
      prefix: '{herald}',
      connection: queueConnection(),
    });
    const job: NotificationJob = {
      id: randomId('queued-before'),
      userId: carol,
      payload: { queued: 'before the upgrade' },
      createdAt: new Date().toISOString(),
    };
    await queue.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
    await queue.close();
    await stored(DEFAULT_KEY, carol, job.id);
    expect((await inboxOf(DEFAULT_KEY, carol)).items.map((item) => item.payload)).toEqual([
      { old: true },
      { queued: 'before the upgrade' },
    ]);
    expect((await inboxOf(a.key, carol)).items).toEqual([]);
  });
});

describe('herald inbox migrate: a deployment whose one tenant was not `default`', () => {
  it('moves the inboxes written before tenants to that tenant, whole (offsets, unread, markers), and is safe to run again', async () => {
    const redis = testRedis();
    const env = stackEnv(redisUrl(), { HERALD_API_KEYS: 'none' });
    const legacy = new Inbox(redis, { prefix: env.HERALD_INBOX_PREFIX as string });
    const users = [randomId('dave'), `${randomId('org')}/erin`];
    const written: Record<string, string[]> = {};
    for (const user of users) {
      written[user] = [];
      for (let n = 0; n < 3; n++) {
        const id = randomId('n');
        await legacy.append({ id, userId: user, payload: { n }, createdAt: new Date().toISOString() });
        written[user]?.push(id);
      }
      await legacy.markRead(user, { ids: [written[user]?.[0] as string] });
    }
    const acme = await createKey(env, 'acme');
    const migrated = await herald(['inbox', 'migrate', '--tenant', 'acme'], env);
    expect(migrated.code, migrated.out).toBe(0);
    expect(migrated.out).toMatch(/moved \d+ keys to tenant acme/);
    const again = await herald(['inbox', 'migrate', '--tenant', 'acme'], env);
    expect(again.out).toContain('moved 0 keys');

    const gateway = await startApp({ name: 'gateway', entry: entries.gateway, env });
    try {
      for (const user of users) {
        const response = await fetch(`${gateway.url}/users/${encodeURIComponent(user)}/notifications`, {
          headers: { authorization: `Bearer ${acme.key}` },
        });
        const page = (await response.json()) as {
          items: { id: string; read: boolean }[];
          unread: { count: number };
        };
        expect(page.items.map((item) => item.id)).toEqual(written[user]);
        expect(page.items.map((item) => item.read)).toEqual([true, false, false]);
        expect(page.unread.count).toBe(2);
        const status = await fetch(`${gateway.url}/notifications/${written[user]?.[1]}`, {
          headers: { authorization: `Bearer ${acme.key}` },
        });
        expect(status.status).toBe(200);
      }
      // Nothing left in the old layout.
      expect(await keysMatching(redis, `${env.HERALD_INBOX_PREFIX}{*`)).toEqual([]);
    } finally {
      await gateway.stop();
      const keys = [
        ...(await keysMatching(redis, `${env.HERALD_INBOX_PREFIX}*`)),
        ...(await keysMatching(redis, `${env.HERALD_KEY_PREFIX}*`)),
      ];
      await Promise.all(keys.map((key) => redis.unlink(key)));
      redis.disconnect();
    }
  });
});
