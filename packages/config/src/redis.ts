import calculateSlot from 'cluster-key-slot';
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
 * `HERALD_REDIS_WAIT_REPLICAS`: how many replicas must have a write (`WAIT <n> <timeout>`) before an app
 * counts it as done: the gateway before it answers `202`, the worker before it publishes a stored
 * notification. Default 0 (the primary alone). Redis replicates asynchronously, so on a failover a
 * replica promoted before it received a write has lost it: with 1, what Herald acknowledged is on a
 * replica too.
 */
export const RedisWaitEnv = {
  HERALD_REDIS_WAIT_REPLICAS: Type.Integer({ minimum: 0, maximum: 16, default: 0 }),
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

/** Fewer replicas than asked acknowledged a write within the timeout (see {@link waitForReplicas}). */
export class ReplicaWaitError extends Error {
  readonly code = 'HERALD_REPLICA_WAIT';
  constructor(
    readonly wanted: number,
    readonly acknowledged: number,
    readonly timeoutMs: number,
  ) {
    super(
      `${acknowledged} of ${wanted} Redis replica(s) acknowledged the write within ${timeoutMs} ms: it is on the primary only, and a failover could lose it.`,
    );
    this.name = 'ReplicaWaitError';
  }
}

/**
 * Waits until `replicas` replicas have every write sent so far on the connection that serves `key`
 * (Redis `WAIT`), and rejects with {@link ReplicaWaitError} when fewer have it after `timeoutMs`. `WAIT`
 * counts the writes of its own connection, so on Cluster it goes to the connection ioredis keeps to the
 * master of `key`'s slot, the one that carried the writes; concurrent writes on that connection are
 * waited for too (never fewer). Redis blocks that connection meanwhile: the cost is one replica
 * round trip per call (sub-millisecond on one host).
 *
 * @example
 * ```ts
 * await queue.add(name, data, opts); // a Queue on `connection`
 * await waitForReplicas(connection, '{herald}:notifications:id', 1, 800);
 * ```
 */
export async function waitForReplicas(
  redis: Redis | Cluster,
  key: string,
  replicas: number,
  timeoutMs: number,
): Promise<void> {
  const acknowledged = Number(
    await connectionOf(redis, key).call('WAIT', String(replicas), String(timeoutMs)),
  );
  if (acknowledged < replicas) throw new ReplicaWaitError(replicas, acknowledged, timeoutMs);
}

/**
 * The connection that carries the commands on `key`: `redis` itself, or on Cluster ioredis's connection
 * to the master that serves `key`'s slot (as its slot table says now). For the commands that act on a
 * connection's own writes (`WAIT`, `WAITAOF`).
 */
export function connectionOf(redis: Redis | Cluster, key: string): Redis {
  if (!(redis instanceof Cluster)) return redis;
  const cluster = redis;
  const owner = cluster.slots[calculateSlot(key)]?.[0];
  const node = cluster
    .nodes('master')
    .find((candidate) => `${candidate.options.host}:${candidate.options.port}` === owner);
  if (node === undefined)
    throw new Error(`No connection to the master of key "${key}" (slot owner ${owner}).`);
  return node;
}
