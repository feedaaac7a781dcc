import { Topics } from '@herald/inbox';
import { FANOUT_JOB_NAME, type FanoutJob, fanoutQueueName, notificationJobOptions } from '@herald/protocol';
import { type RedisClusterHandle, startRedisCluster } from '@herald/testing';
import { Queue } from 'bullmq';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { randomId, Stack, waitFor } from './support/stack.js';

// Realtime and worker on a 3-master Redis Cluster, sharded pub/sub: inbox keys hash-tagged per user,
// BullMQ under the `{herald}` tag, one sharded live channel per user.
describe('on Redis Cluster (HERALD_REDIS_CLUSTER_NODES, sharded pub/sub)', () => {
  let cluster: RedisClusterHandle;
  let stack: Stack;

  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 120_000);
  afterAll(async () => {
    await stack?.dispose().catch(() => undefined);
    await cluster?.dispose();
  });

  it('replays and delivers live, exactly once and in order, to users spread over the slots', async () => {
    const nodes = cluster.nodes;
    stack = new Stack(
      `redis://${nodes[0]?.host}:${nodes[0]?.port}`,
      {
        HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv,
        HERALD_PUBSUB_MODE: 'sharded',
      },
      () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } }),
    );
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

  it('fans a topic send out over the slots: subscriber set tagged per topic, inboxes per user', async () => {
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
      await new Topics(own.redis, { prefix: own.env.HERALD_INBOX_PREFIX ?? '' }).subscribe('news', users);
      const watcher = own.client(users[3] ?? '');
      await watcher.connect(realtime.url, '0-0');
      const job: FanoutJob = {
        id: randomId('fan'),
        tenantId: 'default',
        payload: { hello: 'cluster' },
        createdAt: new Date().toISOString(),
        audience: { topic: 'news' },
        charge: {
          keyPrefix: `${randomId('rl')}:sender:`,
          senderId: 'k',
          capacity: 1000,
          ratePerSecond: 1000,
          prepaid: 1,
        },
      };
      await queue.add(FANOUT_JOB_NAME, job, notificationJobOptions(job));
      await waitFor(
        async () =>
          (await Promise.all(users.map((u) => own.inboxIds(u)))).every((ids) => ids.includes(job.id)),
        { timeoutMs: 30_000, what: 'every subscriber, over the slots, to have it' },
      );
      await waitFor(() => watcher.received.some((event) => event.id === job.id), { what: 'the live push' });
      watcher.check([job.id]);
    } finally {
      await queue.close();
      bullConnection.disconnect();
      await own.dispose();
    }
  }, 120_000);
});
