import { type RedisClusterHandle, startRedisCluster } from '@herald/testing';
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
});
