import { type RedisClusterHandle, startRedisCluster } from '@herald/testing';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, randomId, Stack, waitFor } from './support/stack.js';

const PASSWORD = 'cluster-pass-0123456789abcdef';

// A Redis Cluster whose nodes require a password, as a production one does: every app connects to
// every node (those it discovers from the slot table too) with REDIS_URL's credentials, since
// HERALD_REDIS_CLUSTER_NODES names only hosts and ports.
describe('on a Redis Cluster with a password (REDIS_URL carries it for every node)', () => {
  let cluster: RedisClusterHandle;
  let stack: Stack | undefined;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, password: PASSWORD });
  }, 120_000);
  afterAll(async () => {
    await stack?.dispose().catch(() => undefined);
    await cluster?.dispose();
  });

  it('refuses a client without it, and carries notifications through every app with it', async () => {
    const nodes = cluster.nodes;
    // Without the password a node answers nothing but NOAUTH.
    const anonymous = new Redis(`redis://${nodes[0]?.host}:${nodes[0]?.port}`, { maxRetriesPerRequest: 0 });
    anonymous.on('error', () => {});
    try {
      await expect(anonymous.get('probe')).rejects.toThrow(/NOAUTH/);
    } finally {
      anonymous.disconnect();
    }

    const auth = `:${PASSWORD}@`;
    stack = new Stack(
      `redis://${auth}${nodes[0]?.host}:${nodes[0]?.port}`,
      { HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv, HERALD_PUBSUB_MODE: 'sharded' },
      () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null, password: PASSWORD } }),
    );
    const [gateway, { a, b }] = await Promise.all([stack.start('gateway', 'gw'), stack.startDelivery()]);
    const post = async (path: string, body: unknown, method = 'POST') => {
      const response = await fetch(`${gateway.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const users = Array.from({ length: 6 }, (_, i) => randomId(`auth${i}`));
    const clients = users.map((user) => stack?.client(user));
    await Promise.all(clients.map((client, i) => client?.connect(i % 2 === 0 ? a.url : b.url, '0-0')));
    const sent = new Map<string, string[]>();
    for (const user of users) {
      const answer = await post('/notify', { userId: user, payload: { n: 1 } });
      expect(answer.status).toBe(202);
      sent.set(user, [answer.body.id as string]);
    }
    // A topic send: fanned out in the worker's threads, on their own Cluster connections.
    expect((await post('/topics/all/subscribers', { userIds: users }, 'PUT')).status).toBe(200);
    const topicSend = await post('/notify', { topic: 'all', payload: { n: 2 } });
    expect(topicSend.status).toBe(202);
    for (const user of users) sent.get(user)?.push(topicSend.body.id as string);
    await waitFor(() => clients.every((client) => client?.received.length === 2), {
      timeoutMs: 30_000,
      what: 'the direct and the topic notification at every client',
    });
    for (const client of clients) client?.check(sent.get(client.userId) ?? []);
  }, 120_000);
});
