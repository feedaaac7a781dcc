import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRedis, QUEUE_OPTIONS } from '@herald/config';
import { type RedisClusterHandle, startRedisCluster, waitFor } from '@herald/testing';
import { Queue } from 'bullmq';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// CI once saw a gateway started while a Cluster master was down answer 503 for good after the Cluster
// was whole: its queues were built when its fail-fast Cluster client stood between reading the slot
// table and its ready check, BullMQ's version INFO failed then, and a BullMQ queue whose INFO failed
// refuses every call after. Here the queue is built at exactly that moment.
describe('a queue built while the Cluster is down (a master without a replica stopped)', () => {
  let cluster: RedisClusterHandle;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.dispose();
  });

  it('adds once the Cluster is whole again', async () => {
    const [first, second] = cluster.servers;
    if (!second) throw new Error('no second master');
    // The gateway's queue connection (`producerConnection`): no offline queue, connected at start.
    const connection = createRedis(
      { url: first?.url ?? '', clusterNodes: cluster.nodes },
      'producer',
      { lazyConnect: true },
      { lazyConnect: true },
    ) as Cluster;
    connection.on('error', () => {});
    let queue: Queue | undefined;
    try {
      await cluster.stopUntilFailed(second);
      const statusAtBuild = new Promise<string>((resolve) => {
        // ioredis emits its `connect` status after the slot table is read, before its ready check.
        connection.once('connect', () => {
          queue = new Queue('q', { ...QUEUE_OPTIONS, prefix: '{gw-start}', connection });
          queue.on('error', () => {});
          resolve(connection.status);
        });
      });
      connection.connect().catch(() => {});
      expect(await statusAtBuild).toBe('connect');
      await second.restart();
      await cluster.waitUntilHealthy();
      let last = '';
      await waitFor(
        async () => {
          try {
            return (await queue?.add('n', {}))?.id;
          } catch (error) {
            last = error instanceof Error ? error.message : String(error);
            return undefined;
          }
        },
        { timeoutMs: 15_000, what: 'an add to succeed' },
      ).catch((error: unknown) => {
        throw new Error(`${error instanceof Error ? error.message : String(error)}; last error: ${last}`);
      });
    } finally {
      await queue?.close().catch(() => undefined);
      connection.disconnect();
    }
  }, 60_000);
});

// The same holds for every queue an app builds: each takes QUEUE_OPTIONS (the webhooks package, which
// does not depend on @herald/config, says `skipVersionCheck: true` itself).
it('every BullMQ Queue the apps and packages build skips the version check', () => {
  const root = fileURLToPath(new URL('../../..', import.meta.url));
  const sources = ['apps', 'packages'].flatMap((dir) =>
    readdirSync(join(root, dir)).flatMap((name) => {
      const src = join(root, dir, name, 'src');
      try {
        return readdirSync(src, { recursive: true, encoding: 'utf8' })
          .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'))
          .map((file) => join(src, file));
      } catch {
        return [];
      }
    }),
  );
  const builds = sources.flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return [...text.matchAll(/new Queue(<[^>]*>)?\(/g)]
      .filter((match) => {
        // Not in a comment (a doc example).
        const line = text.slice(text.lastIndexOf('\n', match.index) + 1, match.index).trim();
        return !line.startsWith('*') && !line.startsWith('//');
      })
      .map((match) => ({ file, call: text.slice(match.index, match.index + 300) }));
  });
  expect(builds.length).toBeGreaterThanOrEqual(9);
  for (const { file, call } of builds) {
    expect(/QUEUE_OPTIONS|skipVersionCheck: true/.test(call), `${file}: ${call.slice(0, 120)}`).toBe(true);
  }
});
