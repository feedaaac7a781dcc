import {
  monitorRedis,
  type RedisClusterHandle,
  randomId,
  redisUrl,
  startRedisCluster,
} from '@herald/testing';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Inbox, type InboxNotification, notificationIdFor, offsetSeq } from '../src/index.js';

function notification(userId: string, n: number): InboxNotification {
  return { id: `n-${n}`, userId, payload: { n }, createdAt: new Date().toISOString() };
}

/** The script calls (EVALSHA; EVAL the first time, when the script is not loaded) Redis ran for keys under `prefix` while `work` ran (MONITOR). */
async function scriptCalls(url: string, prefix: string, work: () => Promise<unknown>): Promise<number> {
  const [calls] = await scriptCallsOn([url], prefix, work);
  return calls ?? 0;
}

/** {@link scriptCalls} on each of several servers (a Cluster's masters), in the order given. */
async function scriptCallsOn(
  urls: string[],
  prefix: string,
  work: () => Promise<unknown>,
): Promise<number[]> {
  const monitors = await Promise.all(urls.map((url) => monitorRedis(url)));
  const calls = urls.map(() => 0);
  for (const [i, monitor] of monitors.entries()) {
    monitor.onCommand((args) => {
      if (/^eval(sha)?$/i.test(args[0] ?? '') && args.some((arg) => arg.startsWith(prefix)))
        calls[i] = (calls[i] ?? 0) + 1;
    });
  }
  try {
    await work();
    // MONITOR lines arrive after the replies: wait for the last one (an ECHO through the same server).
    await Promise.all(
      urls.map(async (url, i) => {
        const marker = randomId('marker');
        const seen = new Promise<void>((resolve) =>
          monitors[i]?.onCommand((args) => {
            if (args.includes(marker)) resolve();
          }),
        );
        const client = new Redis(url);
        await client.echo(marker);
        await seen;
        client.disconnect();
      }),
    );
  } finally {
    for (const monitor of monitors) monitor.close();
  }
  return calls;
}

describe('appends of one event-loop turn', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(redisUrl());
  });
  afterAll(() => redis.disconnect());

  it('go to Redis in one script call, each answered its own offset, index and unread count', async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(redis, { prefix });
    const users = Array.from({ length: 20 }, (_, i) => randomId(`u${i}`));
    let results: Awaited<ReturnType<Inbox['append']>>[] = [];
    const calls = await scriptCalls(redisUrl(), prefix, async () => {
      results = await Promise.all(users.map((user, i) => inbox.append(notification(user, i))));
    });
    expect(calls).toBe(1);
    expect(results.map((r) => r.outcome)).toEqual(users.map(() => 'appended'));
    for (const [i, user] of users.entries()) {
      expect(results[i]).toMatchObject({ unread: { count: 1 } });
      expect(await inbox.locate(`n-${i}`)).toBe(user);
      expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual([`n-${i}`]);
    }
  });

  it("keep one user's order within the call, and more than 64 take more calls", async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(redis, { prefix });
    const user = randomId('u');
    let results: Awaited<ReturnType<Inbox['append']>>[] = [];
    const calls = await scriptCalls(redisUrl(), prefix, async () => {
      results = await Promise.all(Array.from({ length: 100 }, (_, n) => inbox.append(notification(user, n))));
    });
    expect(calls).toBe(2);
    expect(results.map((r) => (r.outcome === 'appended' ? offsetSeq(r.offset) : r.outcome))).toEqual(
      Array.from({ length: 100 }, (_, n) => n + 1),
    );
    expect((await inbox.read(user, { limit: 100 })).entries.map((e) => e.payload.n)).toEqual(
      Array.from({ length: 100 }, (_, n) => n),
    );
  });

  it('a notification Redis refuses fails alone; the others of its call are stored once', async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(redis, { prefix });
    const [good, broken, later] = [randomId('good'), randomId('broken'), randomId('later')];
    // The broken user's stream key holds a string: XREVRANGE on it is a WRONGTYPE error.
    await redis.set(inbox.keys(broken).stream, 'not a stream');
    const results = await Promise.allSettled([
      inbox.append(notification(good, 1)),
      inbox.append(notification(broken, 2)),
      inbox.append(notification(later, 3)),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // The first was stored by the failed call, then answered by its own: once, with its offset.
    expect(results[0]).toMatchObject({ value: { outcome: 'already-appended' } });
    expect(results[2]).toMatchObject({ value: { outcome: 'appended' } });
    expect((await inbox.read(good)).entries.map((e) => e.id)).toEqual(['n-1']);
    expect((await inbox.read(later)).entries.map((e) => e.id)).toEqual(['n-3']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
  });

  it('a call that fails after storing some of a user’s notifications leaves that user’s meta and TTLs written', async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(redis, { prefix });
    const [user, broken] = [randomId('user'), randomId('broken')];
    await redis.set(inbox.keys(broken).stream, 'not a stream');
    // One call: user's n-1, then broken's (fails on XLEN), then user's n-3 (never reached by that call).
    const results = await Promise.allSettled([
      inbox.append(notification(user, 1)),
      inbox.append(notification(broken, 2)),
      inbox.append(notification(user, 3)),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // The version a new inbox starts from is Redis's time (ms × 1000): one more per change from there.
    const start =
      (results[0] as PromiseFulfilledResult<{ unread: { version: number } }>).value.unread.version - 1;
    expect(results[0]).toMatchObject({
      value: { outcome: 'already-appended', unread: { count: 1, version: start + 1 } },
    });
    expect(results[2]).toMatchObject({
      value: { outcome: 'appended', unread: { count: 2, version: start + 2 } },
    });
    const keys = inbox.keys(user);
    for (const key of [keys.stream, keys.meta, keys.unread, keys.marker('n-1'), keys.marker('n-3')]) {
      expect(await redis.pttl(key), key).toBeGreaterThan(0);
    }
    const next = await inbox.append(notification(user, 4));
    expect(next).toMatchObject({ outcome: 'appended', unread: { count: 3, version: start + 3 } });
    expect((await inbox.read(user)).entries.map((e) => offsetSeq(e.offset))).toEqual([1, 2, 3]);
  });
});

describe('appends of one turn on Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 0 });
    client = new Cluster(cluster.nodes);
  }, 120_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.dispose();
  });

  it('take one call per master whatever the slots of its users, each notification stored once', async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(client, { prefix });
    const users = Array.from({ length: 30 }, (_, i) => randomId(`u${i}`));
    // Routed ids (no index), two per user in send order, all in one event-loop turn.
    const ids = users.map((user) => [notificationIdFor(user), notificationIdFor(user)] as const);
    // The client has read the slot table (a worker's has: it waits for its Cluster client to be ready).
    await client.ping();
    let results: { outcome: string }[] = [];
    const calls = await scriptCallsOn(
      cluster.nodes.map(({ host, port }) => `redis://${host}:${port}`),
      prefix,
      async () => {
        results = await Promise.all(
          users.flatMap((userId, i) =>
            (ids[i] ?? []).map((id, n) =>
              inbox.append({ id, userId, payload: { n }, createdAt: new Date().toISOString() }),
            ),
          ),
        );
      },
    );
    expect(results.map((r) => r.outcome)).toEqual(results.map(() => 'appended'));
    // 30 users are in 30 slots spread over the 3 masters: one call each (it was one per slot).
    expect(calls).toEqual([1, 1, 1]);
    for (const [i, user] of users.entries()) {
      expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual(ids[i]);
      expect(await inbox.statusById(ids[i]?.[1] ?? '')).toMatchObject({ userId: user, state: 'inbox' });
    }
  });

  it('a slot that moved to another master since the client read its table: that call fails, each notification then goes alone, stored once', async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(client, { prefix });
    await client.ping();
    const users = Array.from({ length: 12 }, (_, i) => randomId(`m${i}`));
    // The client believes the first user's slot is on the master of another user's slot (a table from
    // before a resharding): the call it sends there reaches keys that master does not serve.
    const slotOf = (user: string) => calculateSlot(inbox.keys(user).stream);
    const real = client.slots[slotOf(users[0] ?? '')]?.[0];
    const other = users.find((user) => client.slots[slotOf(user)]?.[0] !== real);
    if (real === undefined || other === undefined) throw new Error('users all on one master');
    client.slots[slotOf(users[0] ?? '')] = [...(client.slots[slotOf(other)] ?? [])];
    const results = await Promise.all(users.map((user, i) => inbox.append(notification(user, i))));
    expect(results.map((r) => r.outcome).every((o) => o === 'appended' || o === 'already-appended')).toBe(
      true,
    );
    for (const [i, user] of users.entries()) {
      expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual([`n-${i}`]);
    }
    // Then, for a while, one call per slot (a Redis that refuses keys it was not given would otherwise
    // fail a call every turn): the 12 users' next notifications are one call per slot.
    const calls = await scriptCallsOn(
      cluster.nodes.map(({ host, port }) => `redis://${host}:${port}`),
      prefix,
      () => Promise.all(users.map((user, i) => inbox.append(notification(user, 100 + i)))),
    );
    expect(calls.reduce((a, b) => a + b, 0)).toBe(new Set(users.map(slotOf)).size);
  });

  it('a user whose notifications fall in two calls of one master keeps send order when the first fails (for another user’s moved slot)', async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(client, { prefix });
    await client.ping();
    const slotOf = (user: string) => calculateSlot(inbox.keys(user).stream);
    const masterOf = (user: string) => client.slots[slotOf(user)]?.[0];
    const pool = Array.from({ length: 400 }, (_, i) => randomId(`p${i}`));
    const master = masterOf(pool[0] ?? '');
    const onMaster = pool.filter((user) => masterOf(user) === master);
    const elsewhere = pool.find((user) => masterOf(user) !== master) ?? '';
    // The client believes `elsewhere`'s slot is on `master` (a table from before a resharding).
    client.slots[slotOf(elsewhere)] = [master ?? ''];
    const user = onMaster[1] ?? '';
    const sends: [string, string][] = [
      [onMaster[0] ?? '', notificationIdFor(onMaster[0] ?? '')],
      [elsewhere, notificationIdFor(elsewhere)], // the first call fails here: a key its master does not serve
      [user, `first-${randomId('n')}`],
    ];
    for (let i = 2; sends.length < 64; i++)
      sends.push([onMaster[i] ?? '', notificationIdFor(onMaster[i] ?? '')]);
    sends.push([user, `second-${randomId('n')}`]); // the 65th: the second call
    const results = await Promise.all(
      sends.map(([userId, id], n) =>
        inbox.append({ id, userId, payload: { n }, createdAt: new Date().toISOString() }),
      ),
    );
    expect(results.every((r) => r.outcome === 'appended' || r.outcome === 'already-appended')).toBe(true);
    expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual(
      sends.filter(([userId]) => userId === user).map(([, id]) => id),
    );
  });

  it('take one call per slot, and write each index beside it', async () => {
    const prefix = `${randomId('batch')}:`;
    const inbox = new Inbox(client, { prefix });
    const users = Array.from({ length: 30 }, (_, i) => randomId(`u${i}`));
    const results = await Promise.all(users.map((user, i) => inbox.append(notification(user, i))));
    expect(results.map((r) => r.outcome)).toEqual(users.map(() => 'appended'));
    for (const [i, user] of users.entries()) {
      expect(await inbox.locate(`n-${i}`)).toBe(user);
      expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual([`n-${i}`]);
    }
  });
});
