import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import Type from 'typebox';

/**
 * The Redis variables every Herald app reads, as TypeBox properties to spread into its env schema:
 * `REDIS_URL`, and `HERALD_REDIS_CLUSTER_NODES` (`host:port,…`), which switches the app to Redis Cluster.
 *
 * @example
 * ```ts
 * const EnvSchema = Type.Object({ PORT: Type.Integer(), ...RedisEnv });
 * ```
 */
export const RedisEnv = {
  REDIS_URL: Type.String({ pattern: '^rediss?://', default: 'redis://127.0.0.1:6379' }),
  HERALD_REDIS_CLUSTER_NODES: Type.Optional(Type.String({ pattern: '^[^,:]+:\\d+(,[^,:]+:\\d+)*$' })),
};

/**
 * Redis Cluster start-up nodes from `HERALD_REDIS_CLUSTER_NODES`, or undefined when it is unset.
 *
 * @example
 * ```ts
 * clusterNodes({ HERALD_REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2:7000' }); // [{ host: '10.0.0.1', port: 7000 }, …]
 * ```
 */
export function clusterNodes(parsed: {
  HERALD_REDIS_CLUSTER_NODES?: string | undefined;
}): { host: string; port: number }[] | undefined {
  return parsed.HERALD_REDIS_CLUSTER_NODES?.split(',').map((node) => {
    const at = node.lastIndexOf(':');
    return { host: node.slice(0, at), port: Number(node.slice(at + 1)) };
  });
}

/**
 * Connection options by role, as STYLE.md asks:
 * - `producer` (the gateway, the CLI): fail fast. No offline queue, so a command to a Redis that is down
 *   fails at once and the API answers 503 instead of holding the request; a command sent before a
 *   disconnect is not resent after it (a limiter decision or a job add replayed minutes later is wrong).
 * - `worker` (BullMQ workers, realtime): wait for Redis (`maxRetriesPerRequest: null`, as BullMQ requires),
 *   so that work in flight outlives a Redis restart.
 */
/**
 * How long a lost connection waits before its next reconnect attempt, ms: 50 ms more per attempt, at
 * most 500 ms, so that every connection is back within half a second of Redis, however long it was
 * away. ioredis's default grows to 2 s and BullMQ's (for connections it makes from options) to 20 s
 * (`exp(attempt)`): after a 10 s outage the gateway's queue came back up to 8 s after Redis did. The
 * cost is one connection attempt per connection every 500 ms while Redis is down.
 */
export const reconnectDelayMs = (attempt: number): number => Math.min(attempt * 50, 500);

export const REDIS_ROLE_OPTIONS = Object.freeze({
  producer: Object.freeze({
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: reconnectDelayMs,
  }),
  worker: Object.freeze({ maxRetriesPerRequest: null, retryStrategy: reconnectDelayMs }),
} satisfies Record<string, RedisOptions>);

/** Where an app's Redis is: one server, or a Cluster's start-up nodes. */
export interface RedisTarget {
  url: string;
  clusterNodes?: { host: string; port: number }[] | undefined;
}

/**
 * A Redis (or Cluster) client for `role` (see {@link REDIS_ROLE_OPTIONS}), with `extra` options on top.
 *
 * @example
 * ```ts
 * const redis = createRedis({ url: config.redisUrl }, 'producer', { lazyConnect: true });
 * ```
 */
export function createRedis(
  target: RedisTarget,
  role: keyof typeof REDIS_ROLE_OPTIONS,
  extra: RedisOptions = {},
  cluster: Omit<ClusterOptions, 'redisOptions'> = {},
): Redis | Cluster {
  const options = { ...REDIS_ROLE_OPTIONS[role], ...extra };
  if (target.clusterNodes !== undefined) {
    return new Cluster(target.clusterNodes, {
      ...cluster,
      redisOptions: options,
      ...(role === 'producer' ? { enableOfflineQueue: false } : {}),
    });
  }
  return new Redis(target.url, options);
}
