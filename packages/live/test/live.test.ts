import { liveRedis, randomId, testRedis, waitFor } from '@herald/testing';
import { Cluster, type Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type LiveMessage,
  LiveSubscriber,
  liveChannel,
  livePublisher,
  type PubsubMode,
} from '../src/index.js';

const connections: (Redis | Cluster)[] = [];
// On a Redis Cluster run: a Cluster client, subscribing to sharded channels on their slot's node.
const connect = () => {
  const redis = liveRedis();
  connections.push(redis);
  return redis;
};
afterAll(() => {
  for (const redis of connections) redis.disconnect();
});

const event = (userId: string, seq: number) => ({
  id: `n${seq}`,
  offset: `1-${seq}`,
  userId,
  payload: { seq },
  createdAt: new Date(0).toISOString(),
});

describe.each<PubsubMode>(['classic', 'sharded'])('live channel (%s)', (mode) => {
  it('delivers a user’s messages to that user’s listeners only, in order, once subscribed', async () => {
    const settings = { key: randomId('live'), mode };
    const subscriber = new LiveSubscriber(connect(), settings);
    const publisher = livePublisher(connect(), settings);
    const alice: LiveMessage[] = [];
    const otherTenant: LiveMessage[] = [];
    const a = subscriber.subscribe('acme', 'alice', (message) => alice.push(message));
    const b = subscriber.subscribe('globex', 'alice', (message) => otherTenant.push(message));
    await Promise.all([a.ready, b.ready]);
    for (let seq = 1; seq <= 50; seq++) publisher.notification('acme', event('alice', seq));
    publisher.unread('acme', 'alice', { count: 3, version: 9 });
    await waitFor(() => alice.length === 51);
    expect(alice.slice(0, 50).map((m) => (m.kind === 'notification' ? m.event.payload.seq : 0))).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 1),
    );
    expect(alice[50]).toEqual({
      v: 1,
      kind: 'unread',
      tenantId: 'acme',
      userId: 'alice',
      unread: { count: 3, version: 9 },
    });
    expect(otherTenant).toEqual([]);
    a.close();
    b.close();
    expect(subscriber.size).toBe(0);
  });

  it('shares one subscription among a user’s listeners and drops it with the last', async () => {
    const settings = { key: randomId('live'), mode };
    const probe = connect();
    const subscriber = new LiveSubscriber(connect(), settings);
    const channel = liveChannel(settings.key, 'acme', 'bob');
    // Every node's subscriptions (on a Cluster, a subscription lives on one node: the sum is the count).
    const count = async () => {
      const nodes = probe instanceof Cluster ? probe.nodes('master') : [probe];
      const replies = await Promise.all(
        nodes.map(
          (node) =>
            node.call('PUBSUB', mode === 'sharded' ? 'SHARDNUMSUB' : 'NUMSUB', channel) as Promise<
              [string, number]
            >,
        ),
      );
      return replies.reduce((sum, reply) => sum + reply[1], 0);
    };
    const first = subscriber.subscribe('acme', 'bob', () => {});
    const second = subscriber.subscribe('acme', 'bob', () => {});
    await Promise.all([first.ready, second.ready]);
    expect(await count()).toBe(1);
    first.close();
    expect(await count()).toBe(1);
    second.close();
    await waitFor(async () => (await count()) === 0);
    // Subscribing again right after the last close ends subscribed (the connection keeps command order).
    const third = subscriber.subscribe('acme', 'bob', () => {});
    await third.ready;
    expect(await count()).toBe(1);
    third.close();
  });

  it('a failed publish goes to onError, not to an unhandled rejection', async () => {
    const broken = testRedis(
      { lazyConnect: true, enableOfflineQueue: false },
      { lazyConnect: true, enableOfflineQueue: false },
    );
    const errors: unknown[] = [];
    const publisher = livePublisher(broken, { key: randomId('live'), mode }, (error) => errors.push(error));
    publisher.notification('acme', event('alice', 1));
    await waitFor(() => errors.length === 1);
    broken.disconnect();
  });
});
