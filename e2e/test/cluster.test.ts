import { partitionOf, ReplicaWaitError, ReplicaWaiter } from '@herald/config';
import { Preferences, Topics } from '@herald/inbox';
import { FANOUT_JOB_NAME, type FanoutJob, fanoutQueueName, notificationJobOptions } from '@herald/protocol';
import { type RedisClusterHandle, startRedisCluster } from '@herald/testing';
import { Queue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, randomId, Stack, topicFanoutJob, waitFor } from './support/stack.js';

const ADMIN_KEY = 'e2e-admin-key-0123456789abcdef0123456789';

// Every app on a 3-master Redis Cluster with a replica each, sharded pub/sub: inbox keys hash-tagged
// per user, the notification queue in 3 partitions (one per master, each under its own tag), one sharded
// live channel per user, the gateway's limiter keys under their tenant's tag.
describe('on Redis Cluster (HERALD_REDIS_CLUSTER_NODES, sharded pub/sub)', () => {
  let cluster: RedisClusterHandle;
  const stacks: Stack[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1 });
  }, 120_000);
  afterAll(async () => {
    for (const stack of stacks) await stack.dispose().catch(() => undefined);
    await cluster?.dispose();
  });

  const clusterStack = (extra: Record<string, string> = {}): Stack => {
    const nodes = cluster.nodes;
    const stack = new Stack(
      `redis://${nodes[0]?.host}:${nodes[0]?.port}`,
      {
        HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv,
        HERALD_PUBSUB_MODE: 'sharded',
        // A queue partition per master: every test below runs on partitioned queues.
        HERALD_QUEUE_PARTITIONS: '3',
        ...extra,
      },
      () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } }),
    );
    stacks.push(stack);
    return stack;
  };

  it('replays and delivers live, exactly once and in order, to users spread over the slots', async () => {
    const stack = clusterStack();
    const { a, b } = await stack.startDelivery();
    const users = Array.from({ length: 6 }, (_, i) => randomId(`cl${i}`));
    const early = new Map<string, string[]>();
    for (const user of users) early.set(user, await stack.send(user, 5));
    const clients = users.map((user) => stack.client(user));
    await waitFor(
      async () => (await Promise.all(users.map((u) => stack.inboxIds(u)))).every((ids) => ids.length === 5),
      {
        timeoutMs: 30_000,
        what: 'early ones in the inboxes',
      },
    );
    await Promise.all(clients.map((client, i) => client.connect(i % 2 === 0 ? a.url : b.url, '0-0')));
    const late = new Map<string, string[]>();
    for (const user of users) late.set(user, await stack.send(user, 10));
    await waitFor(() => clients.every((client) => client.received.length === 15), {
      timeoutMs: 30_000,
      what: 'all 90',
    });
    for (const client of clients)
      client.check([...(early.get(client.userId) ?? []), ...(late.get(client.userId) ?? [])]);
  }, 120_000);

  it('the gateway too: /notify, a batch over every slot, idempotent replay, status, inbox, 429, admin', async () => {
    // A recipient may take 3 at once: the 4th to one user is refused by the recipient policy.
    const stack = clusterStack({
      HERALD_RATE_LIMIT_BURST: '3',
      HERALD_RATE_LIMIT_PER_SECOND: '0.1',
      HERALD_ADMIN_KEY: ADMIN_KEY,
      HERALD_REDIS_WAIT_REPLICAS: '1',
    });
    const [gateway, { a }] = await Promise.all([stack.start('gateway', 'gw'), stack.startDelivery()]);
    const post = (path: string, body: unknown, key?: string) =>
      fetch(`${gateway.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${API_KEY}`,
          'content-type': 'application/json',
          ...(key ? { 'idempotency-key': key } : {}),
        },
        body: JSON.stringify(body),
      });
    const get = (path: string, key = API_KEY) =>
      fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${key}` } });

    expect((await get('/readyz')).status).toBe(200);
    const alice = randomId('alice');
    const client = stack.client(alice);
    await client.connect(a.url, '0-0');

    const key = randomId('idem');
    const first = await post('/notify', { userId: alice, payload: { n: 1 } }, key);
    expect(first.status).toBe(202);
    const { id } = (await first.json()) as { id: string };
    // The same key again: the stored answer, nothing enqueued twice.
    const replay = await post('/notify', { userId: alice, payload: { n: 1 } }, key);
    expect(replay.status).toBe(202);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(((await replay.json()) as { id: string }).id).toBe(id);

    // Six recipients, their inboxes on every master, in one limiter decision (one slot: the tenant's).
    const users = Array.from({ length: 6 }, (_, i) => randomId(`batch${i}`));
    const batch = await post('/notify/batch', {
      notifications: users.map((userId) => ({ userId, payload: { batch: true } })),
    });
    expect(batch.status).toBe(202);

    await waitFor(() => client.received.length === 1, { timeoutMs: 20_000, what: 'alice shown hers' });
    client.check([id]);
    const status = async () =>
      ((await (await get(`/notifications/${id}`)).json()) as { status: string }).status;
    expect(await status()).toBe('queued');
    expect(await client.socket?.emitWithAck('ack', { ids: [id] })).toMatchObject({ ok: true });
    await waitFor(async () => (await status()) === 'delivered', {
      timeoutMs: 20_000,
      what: 'status delivered',
    });
    await waitFor(
      async () => (await Promise.all(users.map((u) => stack.inboxIds(u)))).every((ids) => ids.length === 1),
      {
        timeoutMs: 20_000,
        what: 'the batch in every inbox',
      },
    );
    const listing = (await (await get(`/users/${alice}/notifications`)).json()) as {
      items: { id: string }[];
    };
    expect(listing.items.map((item) => item.id)).toEqual([id]);

    // A hot recipient: alice has 1 of her 3; two more pass, the next is refused.
    expect((await post('/notify', { userId: alice, payload: { n: 2 } })).status).toBe(202);
    expect((await post('/notify', { userId: alice, payload: { n: 3 } })).status).toBe(202);
    const refused = await post('/notify', { userId: alice, payload: { n: 4 } });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ policy: 'recipient' });

    // The dashboard: the tally is written once per second; alice's bucket peeked in her tenant's slot.
    await waitFor(
      async () => {
        const snapshot = (await (await get('/admin/snapshot', ADMIN_KEY)).json()) as {
          hotUsers: { userId: string; denied: number; tokens: { remaining: number } | null }[];
        };
        const hot = snapshot.hotUsers.find((user) => user.userId === alice);
        return hot?.denied === 1 && hot.tokens?.remaining === 0;
      },
      { timeoutMs: 10_000, what: 'alice on the dashboard, denied once, her bucket empty' },
    );
    expect((await get('/metrics')).status).toBe(200);
  }, 120_000);

  it('queue partitions: two on each master, every user in one, delivered in order; status, cancel and the dashboard counts see them all', async () => {
    const stack = clusterStack({ HERALD_QUEUE_PARTITIONS: '6', HERALD_ADMIN_KEY: ADMIN_KEY });
    // Partitions 0-2 on one worker, 3-5 on another: each consumes its share only.
    const [gateway, realtime] = await Promise.all([
      stack.start('gateway', 'gw-parts'),
      stack.start('realtime', 'rt-parts'),
      stack.start('worker', 'worker-low', { HERALD_WORKER_PARTITIONS: '0-2' }),
      stack.start('worker', 'worker-high', { HERALD_WORKER_PARTITIONS: '3-5' }),
    ]);
    const masters = await Promise.all(
      stack.queues.map((queue) => cluster.masterOf(`${queue.opts.prefix}:x`)),
    );
    const perMaster = new Map<number, number>();
    for (const master of masters) perMaster.set(master.port, (perMaster.get(master.port) ?? 0) + 1);
    expect([...perMaster.values()]).toEqual([2, 2, 2]);

    const call = (method: string, path: string, body?: unknown, key = API_KEY) =>
      fetch(`${gateway.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    // 24 users, 4 in each of the 6 partitions (random ones could leave a partition empty: ~8 % of runs).
    const users: string[] = [];
    const inPartition = new Map<number, number>();
    for (let i = 0; users.length < 24; i++) {
      const user = randomId(`part${i}`);
      const partition = partitionOf('default', user, stack.queues.length);
      if ((inPartition.get(partition) ?? 0) >= 4) continue;
      inPartition.set(partition, (inPartition.get(partition) ?? 0) + 1);
      users.push(user);
    }
    const clients = users.map((user) => stack.client(user));
    await Promise.all(clients.map((client) => client.connect(realtime.url, '0-0')));
    // Four rounds, each a batch to every user and a single send to each: 8 per user, in this order.
    const sent = new Map<string, string[]>(users.map((user) => [user, []]));
    for (let round = 0; round < 4; round++) {
      const batch = await call('POST', '/notify/batch', {
        notifications: users.map((userId) => ({ userId, payload: { round, via: 'batch' } })),
      });
      expect(batch.status).toBe(202);
      const { results } = (await batch.json()) as { results: { index: number; id: string }[] };
      for (const result of results) sent.get(users[result.index] ?? '')?.push(result.id);
      for (const user of users) {
        const single = await call('POST', '/notify', { userId: user, payload: { round, via: 'single' } });
        expect(single.status).toBe(202);
        sent.get(user)?.push(((await single.json()) as { id: string }).id);
      }
    }
    await waitFor(() => clients.every((client) => client.received.length === 8), {
      timeoutMs: 30_000,
      what: 'every user shown all 8',
    });
    for (const client of clients) client.check(sent.get(client.userId) ?? []);
    // Every partition carried its 4 users' notifications, on its own master.
    const completed = await Promise.all(stack.queues.map((queue) => queue.getCompletedCount()));
    expect(completed.every((count) => count > 0)).toBe(true);

    // Delayed notifications wait in their users' partitions: status finds each, cancel takes one out.
    const delayed = await Promise.all(
      users.slice(0, 6).map(async (userId) => {
        const response = await call('POST', '/notify', {
          userId,
          payload: { later: true },
          delayMs: 600_000,
        });
        return ((await response.json()) as { id: string }).id;
      }),
    );
    const holders = await Promise.all(
      delayed.map(async (id) =>
        (await Promise.all(stack.queues.map((queue) => queue.getJob(id)))).findIndex(Boolean),
      ),
    );
    expect(new Set(holders).size).toBeGreaterThan(1);
    for (const id of delayed) {
      expect(await (await call('GET', `/notifications/${id}`)).json()).toMatchObject({
        id,
        status: 'queued',
      });
    }
    const far = delayed[holders.findIndex((holder) => holder > 0)] ?? '';
    const cancelled = await call('DELETE', `/notifications/${far}`);
    expect(await cancelled.json()).toMatchObject({ id: far, status: 'cancelled' });

    // The dashboard counts every partition: 6 delayed, one of them cancelled (removed).
    const snapshot = (await (await call('GET', '/admin/snapshot', undefined, ADMIN_KEY)).json()) as {
      queue: Record<string, number>;
    };
    expect(snapshot.queue.delayed).toBe(5);
    expect(snapshot.queue.completed).toBe(completed.reduce((sum, count) => sum + count, 0));
  }, 120_000);

  it('delivery webhooks: set, shown, listed by the operator, rotated and deleted (their index in its own slot)', async () => {
    const stack = clusterStack({ HERALD_ADMIN_KEY: ADMIN_KEY, HERALD_WEBHOOK_ALLOW_PRIVATE: 'true' });
    const gateway = await stack.start('gateway', 'gw-hooks');
    const call = async (method: string, path: string, body?: unknown, key = API_KEY) => {
      const response = await fetch(`${gateway.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return {
        status: response.status,
        body: (await response.json().catch(() => null)) as Record<string, unknown>,
      };
    };
    const url = 'http://127.0.0.1:9/hooks';
    const created = await call('PUT', '/webhook', { url });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ url, tenantId: 'default' });
    expect(typeof created.body.secret).toBe('string');
    expect((await call('GET', '/webhook')).body).toMatchObject({ url, state: 'active' });
    const listed = await call('GET', '/admin/webhooks', undefined, ADMIN_KEY);
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body)).toContain(url);
    const rotated = await call('POST', '/webhook/rotate-secret');
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).not.toBe(created.body.secret);
    expect((await call('DELETE', '/webhook')).status).toBe(204);
    expect((await call('GET', '/webhook')).status).toBe(404);
    expect(JSON.stringify((await call('GET', '/admin/webhooks', undefined, ADMIN_KEY)).body)).not.toContain(
      url,
    );
  }, 120_000);

  it('ReplicaWaiter: the writes of one turn share one WAIT on their master; too few replicas fail at once', async () => {
    const client = new Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
    try {
      const tag = randomId('{wait}');
      await client.set(`${tag}:warm`, '1');
      const master = await cluster.masterOf(tag);
      const probe = new Redis(master.url);
      const waits = async () =>
        Number(/cmdstat_wait:calls=(\d+)/.exec(await probe.info('commandstats'))?.[1] ?? 0);
      const before = await waits();
      const waiter = new ReplicaWaiter(client, 1, 2000);
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          await client.set(`${tag}:${i}`, String(i));
          await waiter.wait(tag);
        }),
      );
      // 20 writes acknowledged by the replica in fewer WAITs than writes (one per turn that had some).
      expect(await waits()).toBeLessThan(before + 20);
      // Two replicas asked, one there: refused before anything is written, not after a 2 s WAIT.
      expect(() => new ReplicaWaiter(client, 2, 2000).check(tag)).toThrow(ReplicaWaitError);
      probe.disconnect();
    } finally {
      client.disconnect();
    }
  }, 60_000);

  it('HERALD_REDIS_WAIT_REPLICAS above the replicas there are: 503, nothing enqueued, never a 202', async () => {
    const stack = clusterStack({ HERALD_REDIS_WAIT_REPLICAS: '2', HERALD_REDIS_TIMEOUT_MS: '300' });
    const gateway = await stack.start('gateway', 'gw-wait-2');
    const response = await fetch(`${gateway.url}/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId: randomId('nobody'), payload: {} }),
    });
    expect(response.status).toBe(503);
    const body = (await response.json()) as Record<string, unknown>;
    // The queue's master has 1 replica of the 2 asked: refused before the add, so nothing is "maybe" in.
    expect(body).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
    expect(body.maybeAccepted).toBeUndefined();
    for (const queue of stack.queues) expect(await queue.count()).toBe(0);
  }, 60_000);

  it('fans a topic send out over the slots: subscriber set tagged per topic, inboxes per user, mutes per user', async () => {
    const nodes = cluster.nodes;
    const connect = () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } });
    const own = new Stack(
      `redis://${nodes[0]?.host}:${nodes[0]?.port}`,
      {
        HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv,
        HERALD_PUBSUB_MODE: 'sharded',
        HERALD_WORKER_FANOUT_CHUNK: '7',
      },
      connect,
    );
    const bullConnection = connect();
    const queue = new Queue<FanoutJob>(fanoutQueueName(own.env.HERALD_QUEUE_NAME ?? ''), {
      prefix: '{herald}',
      connection: bullConnection,
    });
    try {
      const [realtime] = await Promise.all([own.start('realtime', 'rt'), own.start('worker', 'worker')]);
      const users = Array.from({ length: 40 }, (_, i) => randomId(`fan${i}`));
      const topics = new Topics(own.redis, { prefix: own.env.HERALD_INBOX_PREFIX ?? '' });
      await topics.subscribe('news', users);
      // Every fifth mutes the topic: the append script reads each one's mutes in that user's slot.
      const muted = users.filter((_, i) => i % 5 === 1);
      const preferences = new Preferences(own.redis, { prefix: own.env.HERALD_INBOX_PREFIX ?? '' });
      for (const user of muted) await preferences.mute(user, { topics: ['news'] });
      const reached = users.filter((user) => !muted.includes(user));
      const watcher = own.client(users[3] ?? '');
      await watcher.connect(realtime.url, '0-0');
      const job = topicFanoutJob('news', { hello: 'cluster' });
      await queue.add(FANOUT_JOB_NAME, job, notificationJobOptions(job));
      await waitFor(async () => (await topics.fanout(job.id))?.state === 'sent', {
        timeoutMs: 30_000,
        what: 'the fan-out over the slots to be sent',
      });
      expect(await topics.fanout(job.id)).toMatchObject({ total: 40, reached: 32, muted: 8 });
      for (const user of reached) expect(await own.inboxIds(user)).toEqual([job.id]);
      for (const user of muted) expect(await own.inboxIds(user)).toEqual([]);
      await waitFor(() => watcher.received.some((event) => event.id === job.id), { what: 'the live push' });
      watcher.check([job.id]);
    } finally {
      await queue.close();
      bullConnection.disconnect();
      await own.dispose();
    }
  }, 120_000);
});
