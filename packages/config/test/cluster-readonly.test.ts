import { type RedisClusterHandle, startRedisCluster, waitFor } from '@herald/testing';
import calculateSlot from 'cluster-key-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type SettlingCluster } from '../src/redis.js';

// A Cluster client that sends a key's writes to a node that is a replica now, on a connection in
// READONLY mode: what a failover left one worker doing (an audit: "READONLY You can't write against a
// read only replica" from its fan-out queue every few seconds for 4 minutes, until it was restarted).
// The replica answers a script that writes with READONLY, not MOVED, and ioredis refreshes its slot table
// only on MOVED (go-redis and redis-rs refresh on READONLY too). Here the stale table is made by hand:
// the key's slot pointed at its master's replica.
describe('SettlingCluster after a READONLY reply', () => {
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1 });
  }, 120_000);
  afterAll(async () => {
    await cluster?.dispose();
  });

  it('refreshes its slot table and writes go to the master again', async () => {
    const client = createRedis(
      { url: `redis://${cluster.nodes[0]?.host}:${cluster.nodes[0]?.port}`, clusterNodes: cluster.nodes },
      'plain',
      { maxRetriesPerRequest: 1 },
    ) as SettlingCluster;
    try {
      await waitFor(() => client.status === 'ready', { what: 'the Cluster client ready' });
      // A replica and its master's first slot (gossip may take a moment to show every replica).
      const { replica, firstSlot } = await waitFor(
        async () => {
          const lines = ((await client.cluster('NODES')) as string)
            .split('\n')
            .map((line) => line.split(' '));
          const slave = lines.find((fields) => fields[2]?.includes('slave') && fields[7] === 'connected');
          const master = lines.find((fields) => fields[0] === slave?.[3] && fields[8] !== undefined);
          if (!slave || !master) return undefined;
          return { replica: slave[1]?.split('@')[0] as string, firstSlot: Number(master[8]?.split('-')[0]) };
        },
        { what: 'a replica in the Cluster' },
      );
      let key = '';
      for (let n = 0; ; n++) {
        key = `{readonly-${n}}:k`;
        if (calculateSlot(key) >= firstSlot && calculateSlot(key) < firstSlot + 5000) break;
      }
      await client.set(key, '1');
      const slot = calculateSlot(key);
      const slots = (client as unknown as { slots: string[][] }).slots;
      // The stale table: the slot's writes go to the replica's connection, in READONLY mode (ioredis's
      // own way of connecting to a replica, which it sends READONLY on).
      const [host, port] = (replica as string).split(':');
      const pool = (
        client as unknown as { connectionPool: { findOrCreate(node: object, readOnly: boolean): unknown } }
      ).connectionPool;
      pool.findOrCreate({ host, port: Number(port) }, true);
      slots[slot] = [replica as string];
      const write = () => client.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, key, '2');
      await expect(write()).rejects.toThrow(/READONLY/);
      await waitFor(async () => (await write().catch(() => undefined)) === 'OK', {
        timeoutMs: 10_000,
        what: 'a write that reaches the master again',
      });
      expect(await client.get(key)).toBe('2');
    } finally {
      client.disconnect();
    }
  }, 30_000);
});
