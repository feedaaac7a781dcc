import { userKey } from '@herald/protocol';
import { type RedisClusterHandle, startRedisCluster } from '@herald/testing';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { randomId, Stack, waitFor } from './support/stack.js';

// An operator's planned failover (`CLUSTER FAILOVER` on a replica, as before a node's upgrade) under
// sharded pub/sub: the old master, now a replica, drops the shard channels of its slots (Redis 7), and
// nothing else tells ioredis's sharded subscribers (they send no command that would meet a MOVED).
// Open tabs must keep being shown what is sent, without a restart or a reconnect.
describe('a planned Redis Cluster failover (CLUSTER FAILOVER) with sharded pub/sub', () => {
  let cluster: RedisClusterHandle;
  let stack: Stack;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1 });
    const nodes = cluster.nodes;
    stack = new Stack(
      `redis://${nodes[0]?.host}:${nodes[0]?.port}`,
      { HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv, HERALD_PUBSUB_MODE: 'sharded' },
      () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } }),
    );
  }, 90_000);
  afterAll(async () => {
    await stack?.dispose();
    await cluster?.dispose();
  });

  it("a connected user is shown what is sent after the failover of their live channel's master", async () => {
    const [realtime] = await Promise.all([stack.start('realtime', 'rt'), stack.start('worker', 'worker')]);
    const user = randomId('failover');
    const client = stack.client(user);
    await client.connect(realtime.url, '0-0');
    const before = await stack.send(user, 2);
    await waitFor(() => client.received.length === 2, { timeoutMs: 15_000, what: 'the first two shown' });

    // The user's live channel is in the slot of its tag (`<key>:live:{<tenant>/<user>}`).
    const channel = `{${userKey('default', user)}}`;
    const master = await cluster.masterOf(channel);
    const [replica] = await cluster.replicasOf(master);
    const promoted = new Redis(replica?.url ?? '');
    try {
      await promoted.cluster('FAILOVER');
      await waitFor(async () => (await cluster.masterOf(channel)) !== master, {
        timeoutMs: 15_000,
        what: "the replica promoted to master of the channel's slot",
      });
    } finally {
      promoted.disconnect();
    }

    const after = await stack.send(user, 3);
    await waitFor(() => client.received.length === 5, {
      timeoutMs: 15_000,
      what: 'the three sent after the failover shown',
    });
    client.check([...before, ...after]);
  }, 60_000);
});
