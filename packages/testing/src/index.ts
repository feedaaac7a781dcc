import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { inject } from 'vitest';
import { parseClusterNodes } from './redis-cluster.js';

export { CHROMIUM_ARGS, CHROMIUM_PATH, launchChromium } from './browser.js';
export { loopbackCertificate } from './certificate.js';
export { skewedClock } from './clock.js';
export { isolatedEnv, redisEnv } from './env.js';
export { expectHealthThroughOutage } from './health.js';
export { deleteMatching, keysMatching } from './keys.js';
export { monitorArgs, monitorRedis, type RedisMonitor } from './monitor.js';
export { appOnOwnRedis } from './own-redis.js';
export { freeLowPort, freePort, isPortFree } from './ports.js';
export { type AppProcess, startApp } from './processes.js';
export { parseClusterNodes, type RedisClusterHandle, startRedisCluster } from './redis-cluster.js';
export { hasRedisServerBinary, ping, type RedisServerHandle, startRedisServer } from './redis-server.js';
export { expectEach, refusal } from './refusal.js';
export { postRetrying503, randomId, waitFor } from './wait.js';

/**
 * URL of the Redis this test run uses (see `global-setup`); on a Redis Cluster run
 * (`TEST_REDIS_CLUSTER`), one of its masters: use {@link testRedis} for a client that reaches every slot.
 */
export function redisUrl(): string {
  return inject('redisUrl');
}

/** Whether this run's shared Redis is a Redis Cluster (`TEST_REDIS_CLUSTER`, see `global-setup`). */
export function onRedisCluster(): boolean {
  return inject('redisCluster') !== '';
}

/**
 * A BullMQ `connection` to this run's shared Redis: `{ url }` on one Redis (BullMQ opens and closes it),
 * a {@link testRedis} Cluster client on a Cluster run (BullMQ leaves a given client open: it ends with
 * the test file's process).
 *
 * @example
 * ```ts
 * const queue = new Queue(name, { prefix: '{herald}', connection: queueConnection() });
 * ```
 */
export function queueConnection(): Cluster | { url: string; maxRetriesPerRequest: null } {
  if (onRedisCluster()) return testRedis({ maxRetriesPerRequest: null }) as Cluster;
  return { url: redisUrl(), maxRetriesPerRequest: null };
}

/**
 * A client of this run's shared Redis: an ioredis `Cluster` on a Cluster run (`TEST_REDIS_CLUSTER`), with
 * `options` for every node and `cluster`'s Cluster options, else a `Redis` at {@link redisUrl} with
 * `options`. Quit it after the test.
 *
 * @example
 * ```ts
 * const redis = testRedis({ maxRetriesPerRequest: null });
 * ```
 */
export function testRedis(
  options: RedisOptions = {},
  cluster: Omit<ClusterOptions, 'redisOptions'> = {},
): Redis | Cluster {
  const nodes = inject('redisCluster');
  if (nodes !== '') return new Cluster(parseClusterNodes(nodes), { ...cluster, redisOptions: options });
  return new Redis(redisUrl(), options);
}

/**
 * A {@link testRedis} client for live channels: on a Cluster run it subscribes to sharded channels on
 * their slot's node (`shardedSubscribers`), as realtime does with `HERALD_PUBSUB_MODE=sharded`.
 */
export function liveRedis(options: RedisOptions = {}): Redis | Cluster {
  return testRedis(options, { shardedSubscribers: true });
}

export { type MetricFamily, scrapeMetrics } from './metrics.js';
