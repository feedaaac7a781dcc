import { Cluster, type Redis } from 'ioredis';

/**
 * Every key matching `pattern` (a SCAN glob), on one Redis or on every master of a Redis Cluster (a
 * single node's `KEYS` sees only its own slots).
 *
 * @example
 * ```ts
 * const stored = await keysMatching(redis, `${prefix}*`);
 * ```
 */
export async function keysMatching(redis: Redis | Cluster, pattern: string): Promise<string[]> {
  const found: string[] = [];
  // A Cluster client knows its masters once it has read the slot table.
  if (redis instanceof Cluster && redis.status !== 'ready') await redis.ping();
  for (const node of redis instanceof Cluster ? redis.nodes('master') : [redis]) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
  }
  return found;
}

/** Deletes every key matching `pattern` ({@link keysMatching}), one UNLINK per key (any slot); answers how many. */
export async function deleteMatching(redis: Redis | Cluster, pattern: string): Promise<number> {
  const keys = await keysMatching(redis, pattern);
  await Promise.all(keys.map((key) => redis.unlink(key)));
  return keys.length;
}
