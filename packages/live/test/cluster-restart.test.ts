import { type RedisClusterHandle, randomId, startRedisCluster, waitFor } from '@herald/testing';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeLiveMessage, type LiveMessage, LiveSubscriber, liveChannel } from '../src/index.js';

// A master of a Cluster without replicas restarted (an upgrade): its slots keep their master, so no
// failover is seen, but its subscriber connection was lost. ioredis makes a new one for it, again and
// again while the node is down (saying `subscribersReady` each time), and subscribes again once the node
// is back. Realtime must neither read every socket's inbox at each of those tries nor stay deaf after.
describe('sharded subscriber, a Cluster master restarted (same slots, same address)', () => {
  let cluster: RedisClusterHandle;
  const connections: (Redis | Cluster)[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  }, 60_000);
  afterAll(async () => {
    for (const redis of connections) redis.disconnect();
    await cluster?.dispose();
  });

  it('asks for no refill (onReconnect) while the node is down, and subscribes again once it is back', async () => {
    // As the realtime server builds it for sharded pub/sub.
    const sub = new Cluster(cluster.nodes, { shardedSubscribers: true, slotsRefreshInterval: 1000 });
    connections.push(sub);
    let connectFailures = 0;
    sub.on('error', () => connectFailures++);
    const reconnects: number[] = [];
    const key = randomId('live');
    const live = new LiveSubscriber(sub, {
      key,
      mode: 'sharded',
      onReconnect: () => reconnects.push(Date.now()),
    });
    const restarted = cluster.servers[1];
    if (!restarted) throw new Error('no second master');
    // Users whose channel is on the master that restarts.
    const users: string[] = [];
    while (users.length < 4) {
      const user = randomId('u');
      if ((await cluster.masterOf(liveChannel(key, 'acme', user))) === restarted) users.push(user);
    }
    const received = new Map<string, string[]>(users.map((user) => [user, []]));
    const subscriptions = users.map((user) =>
      live.subscribe('acme', user, (message) => {
        if (message.kind === 'notification') received.get(user)?.push(message.event.id);
      }),
    );
    await Promise.all(subscriptions.map((subscription) => subscription.ready));
    const node = new Redis(restarted.url, { retryStrategy: () => 50 });
    node.on('error', () => {});
    connections.push(node);
    const publish = (user: string, id: string) => {
      const message: LiveMessage = {
        v: 1,
        kind: 'notification',
        tenantId: 'acme',
        userId: user,
        event: { id, offset: '1-1', userId: user, payload: {}, createdAt: new Date(0).toISOString() },
      };
      return node.spublish(liveChannel(key, 'acme', user), encodeLiveMessage(message));
    };
    for (const user of users) await publish(user, 'before');
    await waitFor(() => users.every((user) => received.get(user)?.includes('before')), {
      what: 'the first messages',
    });

    // Down until the other nodes say the Cluster failed (its node timeout), and ioredis has tried to set
    // the subscriber up again, and said it failed, again and again (its backoff grows to ~2 s).
    const failuresAtStop = connectFailures;
    await cluster.stopUntilFailed(restarted);
    await waitFor(() => connectFailures >= failuresAtStop + 5, {
      timeoutMs: 30_000,
      what: 'failed attempts of the subscriber',
    });
    expect(reconnects, 'onReconnect while the node is down').toEqual([]);

    await restarted.restart();
    // Live messages reach the listeners again (published until they do: one published before ioredis
    // subscribed again reaches no one).
    let round = 0;
    await waitFor(
      async () => {
        round++;
        for (const user of users) {
          if (!received.get(user)?.some((id) => id.startsWith('after')))
            await publish(user, `after-${round}`);
        }
        return users.every((user) => received.get(user)?.some((id) => id.startsWith('after')));
      },
      { timeoutMs: 20_000, intervalMs: 200, what: 'live messages after the restart' },
    );
    for (const subscription of subscriptions) subscription.close();
  }, 120_000);
});
