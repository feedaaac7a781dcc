import { keysMatching, onRedisCluster, redisUrl, testRedis } from '@herald/testing';
import { Cluster } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { notify, randomId, Stack, waitFor } from './support/stack.js';

// What `npx pnpm@12.4.2 test` and `test:cluster` (TEST_REDIS_CLUSTER=1) each run the suite on: the apps a
// test starts really use that Redis (not a single node of the Cluster, not a Redis of their own).
describe(`the run's Redis (${onRedisCluster() ? 'a Redis Cluster' : 'one Redis'})`, () => {
  const stack = new Stack(redisUrl());
  afterAll(() => stack.dispose());

  it('holds what the apps write: on a Cluster run, 30 users spread over every master', async () => {
    const [gateway] = await Promise.all([stack.start('gateway', 'gw'), stack.startDelivery()]);
    const users = Array.from({ length: 30 }, (_, i) => randomId(`spread${i}`));
    const sent = await Promise.all(users.map(async (user) => (await notify(gateway, user, 1))[0]));
    await waitFor(
      async () =>
        (await Promise.all(users.map((user) => stack.inboxIds(user)))).every(
          (ids, i) => ids.length === 1 && ids[0] === sent[i],
        ),
      { timeoutMs: 30_000, what: 'each user’s notification in their inbox' },
    );
    const redis = testRedis();
    try {
      await redis.ping(); // a Cluster client knows its masters once it has read the slot table
      const masters = redis instanceof Cluster ? redis.nodes('master') : [redis];
      expect(masters.length).toBe(onRedisCluster() ? 3 : 1);
      // Each master's own keys of this stack's inboxes (SCAN on that node only).
      const perMaster = await Promise.all(
        masters.map((node) => keysMatching(node, `${stack.env.HERALD_INBOX_PREFIX}*`)),
      );
      for (const keys of perMaster) expect(keys.length).toBeGreaterThan(0);
      expect(stack.env.HERALD_REDIS_CLUSTER_NODES !== undefined).toBe(onRedisCluster());
    } finally {
      redis.disconnect();
    }
  });
});
