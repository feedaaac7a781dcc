import calculateSlot from 'cluster-key-slot';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import Type from 'typebox';
import { watchCredentials } from './credentials.js';
import { refuseClusterNode, refuseNonClusterNodes } from './redis-topology.js';

/** One `host:port` of `HERALD_REDIS_CLUSTER_NODES`, its port 1 to 65535. */
const CLUSTER_NODE = '[^,:]+:([1-9]\\d{0,3}|[1-5]\\d{4}|6[0-4]\\d{3}|65[0-4]\\d{2}|655[0-2]\\d|6553[0-5])';

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
  // A host is required: ioredis reads `redis://:pw@` (no host) as 127.0.0.1:6379, which would quietly
  // connect a production app to whatever listens there.
  REDIS_URL: Type.String({
    pattern: '^rediss?://([^/?#]*@)?(\\[[0-9A-Fa-f:.]+\\]|[^@/?#:\\[\\]]+)(:\\d*)?([/?#].*)?$',
    default: 'redis://127.0.0.1:6379',
  }),
  HERALD_REDIS_CLUSTER_NODES: Type.Optional(Type.String({ pattern: `^${CLUSTER_NODE}(,${CLUSTER_NODE})*$` })),
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
  /** ioredis's defaults (realtime's inbox and pub/sub connections). */
  plain: Object.freeze({}),
} satisfies Record<string, RedisOptions>);

/**
 * BullMQ options for every `Queue` an app builds (it adds, reads and counts jobs; a `Worker` is not
 * given them). BullMQ reads the Redis version once, by an `INFO` it sends as the queue is built, and a
 * queue whose `INFO` failed is broken for good: every later call rejects with that same error. On a
 * connection that fails fast (no offline queue: the gateway's, the worker's queue connection) that
 * `INFO` fails whenever the connection is not ready at that moment, and a Cluster client counts as
 * connected for BullMQ between reading the slot table and its ready check. A gateway started while a
 * Cluster master was down so answered 503 for good after the Cluster was whole ("Cluster isn't ready
 * and enableOfflineQueue options is false"). Without the check nothing is sent while the queue is
 * built. What it loses: BullMQ's warnings about an old Redis and an eviction policy, which the
 * worker's `Worker`s still give, and two calls (`getState`, `isJobInState`) take their Lua variant
 * rather than `LPOS`, same answers.
 */
export const QUEUE_OPTIONS = Object.freeze({ skipVersionCheck: true } as const);

/**
 * ioredis's `Cluster`, whose `connect()` settles once the client is ready (or has ended), however it got
 * there. ioredis's own promise never settles when its ready check fails after the slot table was read
 * (`cluster_state:fail`: a master is down, or a restarted one is not yet taken back) and a retry then
 * connects with a promise of its own: the client ends up `ready`, the promise still pending. BullMQ 6.7
 * (`RedisConnection.reconnect`) awaits `connect()` to get a worker's blocking connection back after its
 * watchdog reset it; caught there, the worker's fetch loop would wait for good and its partition be
 * consumed no more, though the Cluster is whole again (the likely cause of 3 users of one partition not
 * shown what was sent after a master restart, e2e/test/cluster-restart, once in CI). `duplicate()` (what
 * BullMQ makes the blocking connection with) gives one of these too.
 */
export class SettlingCluster extends Cluster {
  readonly #startupNodes: ConstructorParameters<typeof Cluster>[0];
  /** A READONLY reply's slot-table refresh is under way (one at a time). */
  #refreshing = false;

  constructor(startupNodes: ConstructorParameters<typeof Cluster>[0], options: ClusterOptions = {}) {
    super(startupNodes, options);
    this.#startupNodes = startupNodes;
  }

  override connect(): Promise<void> {
    const connecting = super.connect();
    return new Promise((resolve, reject) => {
      const settle = (error?: Error) => {
        this.off('ready', onReady);
        this.off('end', onEnd);
        if (error) reject(error);
        else resolve();
      };
      const onReady = () => settle();
      // After ioredis's own rejection, which says why (it comes in the same turn as `end`).
      const onEnd = () => setImmediate(() => settle(new Error('Connection is closed.')));
      this.once('ready', onReady);
      this.once('end', onEnd);
      connecting.then(() => settle(), settle);
    });
  }

  /**
   * Every command, as ioredis sends it; a READONLY reply (a write, such as a script that writes, that
   * reached a node which is a replica now, on a connection in READONLY mode) refreshes the slot table
   * and puts every master connection back in READWRITE mode. ioredis refreshes only on MOVED, which such
   * a replica does not answer: after a failover one worker's fan-out queue got READONLY every few seconds
   * for 4 minutes, until it was restarted (an audit); go-redis and redis-rs refresh on READONLY too.
   */
  override sendCommand(...args: Parameters<Cluster['sendCommand']>): ReturnType<Cluster['sendCommand']> {
    const command = args[0] as { promise?: Promise<unknown> };
    command.promise?.catch((error: unknown) => {
      if (error instanceof Error && error.message.startsWith('READONLY')) this.#afterReadonly();
    });
    return super.sendCommand(...args);
  }

  #afterReadonly(): void {
    if (this.#refreshing) return;
    this.#refreshing = true;
    for (const node of this.nodes('master')) node.readwrite().catch(() => {});
    this.refreshSlotsCache(() => {
      this.#refreshing = false;
    });
  }

  override duplicate(
    overrideStartupNodes: ConstructorParameters<typeof Cluster>[0] = [],
    overrideOptions: ClusterOptions = {},
  ): SettlingCluster {
    return new SettlingCluster(overrideStartupNodes.length > 0 ? overrideStartupNodes : this.#startupNodes, {
      ...this.options,
      ...overrideOptions,
    });
  }
}

/** Where an app's Redis is: one server, or a Cluster's start-up nodes. */
export interface RedisTarget {
  url: string;
  clusterNodes?: { host: string; port: number }[] | undefined;
}

/**
 * What every node of a Redis Cluster is connected with, from `REDIS_URL`: its username and password
 * (`redis://user:password@…`) and TLS (`rediss://`). `HERALD_REDIS_CLUSTER_NODES` names only hosts and
 * ports, and the nodes a client discovers from the slot table are reached with these same options.
 *
 * @example
 * ```ts
 * clusterNodeOptions('redis://:s3cret@10.0.0.1:6379'); // { password: 's3cret' }
 * ```
 */
export function clusterNodeOptions(url: string): RedisOptions {
  const parsed = new URL(url);
  return {
    ...(parsed.username !== '' ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password !== '' ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/**
 * A Redis (or Cluster) client for `role` (see {@link REDIS_ROLE_OPTIONS}), with `extra` options on top
 * (on Cluster: for every node, with `REDIS_URL`'s credentials, see {@link clusterNodeOptions}, and
 * without `enableAutoPipelining`) and `cluster`'s Cluster options.
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
    // Auto-pipelining stays off on a Cluster: ioredis 5 picks a command's slot from its first argument
    // there (an EVALSHA's SHA), so pipelined scripts of different slots fail with "All keys in the
    // pipeline should belong to the same slots allocation group" (redis/ioredis#2109), and an envelope
    // whose notifications failed so went back one by one, out of their users' order (worker tests on a
    // Cluster).
    const { enableAutoPipelining: _off, ...nodeOptions } = options;
    const client = new SettlingCluster(target.clusterNodes, {
      ...cluster,
      redisOptions: { ...clusterNodeOptions(target.url), ...nodeOptions },
      ...(role === 'producer' ? { enableOfflineQueue: false } : {}),
    });
    watchCredentials(client);
    refuseNonClusterNodes(client);
    return client;
  }
  const redis = new Redis(target.url, options);
  watchCredentials(redis);
  refuseClusterNode(redis);
  const db = redis.options.db ?? 0;
  if (db > 0) {
    // ioredis reports a SELECT the server refuses and goes on in database 0, where every write would
    // land in another database than the one asked for: the connection stops instead, and says why.
    let stopped = false;
    redis.on('error', (error: Error) => {
      if (stopped || !/DB index is out of range/i.test(error.message)) return;
      stopped = true;
      redis.disconnect();
      redis.emit(
        'error',
        new Error(
          `REDIS_URL selects database ${db}, which this Redis does not have (${error.message}): use one it has (CONFIG GET databases; 0 is always there), or raise its \`databases\` setting. This connection is closed.`,
        ),
      );
    });
  }
  return redis;
}

/**
 * Most seconds since a replica's last acknowledgement (`INFO replication`, `lag`) for it to count as one
 * in {@link ReplicaWaiter.available}: it acknowledges every second, so a healthy one shows 0 or 1.
 */
const MAX_REPLICA_LAG_S = 2;

/** Least time between two slot-table reads that {@link ReplicaWaiter.check} asks for, ms. */
const REFRESH_EVERY_MS = 100;

/** Fewer replicas than asked acknowledged a write within the timeout, or exist (timeout 0; see {@link ReplicaWaiter}). */
export class ReplicaWaitError extends Error {
  readonly code = 'HERALD_REPLICA_WAIT';
  constructor(
    readonly wanted: number,
    readonly acknowledged: number,
    readonly timeoutMs: number,
  ) {
    super(
      timeoutMs === 0
        ? `The Redis master has ${acknowledged} of the ${wanted} replica(s) asked for (HERALD_REDIS_WAIT_REPLICAS) in sync and acknowledging: a write there would be on the primary only.`
        : `${acknowledged} of ${wanted} Redis replica(s) acknowledged the write within ${timeoutMs} ms (HERALD_REDIS_WAIT_REPLICAS): it is on the primary only, and a failover could lose it.`,
    );
    this.name = 'ReplicaWaitError';
  }
}

/**
 * Waits until `replicas` replicas have the writes of a connection (Redis `WAIT`), for the apps'
 * `HERALD_REDIS_WAIT_REPLICAS`. `WAIT` counts the writes of the connection it runs on, so it goes to
 * the connection that carried them: `redis` itself, or on Cluster ioredis's connection to the master of
 * the key's slot. Redis blocks that connection while it waits, and every command behind it, so the
 * calls of one event-loop turn share one `WAIT` (group commit): a `WAIT` sent after a write's reply
 * covers it, and those before it on the connection. On Cluster, a master that has fewer replicas than
 * asked in ioredis's slot table (after a failover, until a replica rejoins) fails at once
 * ({@link ReplicaWaiter.check}) rather than blocking its connection for the whole timeout.
 *
 * @example
 * ```ts
 * const waiter = new ReplicaWaiter(connection, 1, 800);
 * waiter.check('{herald}:notifications:id'); // throws ReplicaWaitError when the master has no replica
 * await queue.add(name, data, opts); // a Queue on `connection`
 * await waiter.wait('{herald}:notifications:id');
 * ```
 */
export class ReplicaWaiter {
  readonly #redis: Redis | Cluster;
  readonly #replicas: number;
  readonly #timeoutMs: number;
  /** The `WAIT` about to be sent on each connection, shared by the calls of this turn. */
  readonly #next = new Map<Redis, Promise<void>>();
  /** When `check` last had the slot table read again. */
  #refreshedAt = 0;

  constructor(redis: Redis | Cluster, replicas: number, timeoutMs: number) {
    this.#redis = redis;
    this.#replicas = replicas;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Throws {@link ReplicaWaitError} when the master of `key` has fewer replicas than asked (Cluster
   * only), and then has ioredis read the slot table again (at most every {@link REFRESH_EVERY_MS}): a
   * replica that rejoined after a failover is seen by the next call, not at the next periodic refresh
   * (every 5 s by default), which kept refusing for seconds after it was back.
   */
  check(key: string): void {
    const cluster = this.#redis;
    if (!(cluster instanceof Cluster)) return;
    // [master, ...replicas] of the slot, as ioredis last read CLUSTER SLOTS.
    const known = (cluster.slots[calculateSlot(key)]?.length ?? 1) - 1;
    if (known >= this.#replicas) return;
    if (Date.now() - this.#refreshedAt >= REFRESH_EVERY_MS) {
      this.#refreshedAt = Date.now();
      cluster.refreshSlotsCache();
    }
    throw new ReplicaWaitError(this.#replicas, known, 0);
  }

  /**
   * For readiness: resolves when the master of `key` (without `key`: any master) has the replicas asked
   * for now, else rejects with {@link ReplicaWaitError} (timeout 0), whose message names
   * `HERALD_REDIS_WAIT_REPLICAS`. On Cluster from the slot table, as {@link check}; on one Redis from its
   * `INFO replication` (replicas online that acknowledged within {@link MAX_REPLICA_LAG_S} s), which
   * `check` does not read: there a missing or frozen replica showed only as every `WAIT` timing out,
   * while `/readyz` said ready.
   */
  async available(key?: string): Promise<void> {
    const redis = this.#redis;
    if (!(redis instanceof Cluster)) {
      const replication = await redis.info('replication');
      // slave0:ip=…,port=…,state=online,offset=…,lag=0 (lag: seconds since its last acknowledgement,
      // sent every second): one silent for longer (frozen, cut off) acknowledges no WAIT either.
      const acknowledging = [...replication.matchAll(/^slave\d+:.*state=online.*lag=(\d+)/gm)].filter(
        (match) => Number(match[1]) <= MAX_REPLICA_LAG_S,
      ).length;
      if (acknowledging < this.#replicas) throw new ReplicaWaitError(this.#replicas, acknowledging, 0);
      return;
    }
    if (key !== undefined) {
      this.check(key);
      return;
    }
    let most = 0;
    for (const owners of redis.slots) most = Math.max(most, (owners?.length ?? 1) - 1);
    if (most >= this.#replicas) return;
    if (Date.now() - this.#refreshedAt >= REFRESH_EVERY_MS) {
      this.#refreshedAt = Date.now();
      redis.refreshSlotsCache();
    }
    throw new ReplicaWaitError(this.#replicas, most, 0);
  }

  /**
   * Resolves once the master of `key` has the replicas asked for, checking every 100 ms for up to
   * `withinMs` (then throws {@link ReplicaWaitError}): for a worker, which would otherwise fail the job's
   * attempt and wait out its retry backoff after a failover.
   */
  async ready(key: string, withinMs: number): Promise<void> {
    const until = Date.now() + withinMs;
    for (;;) {
      try {
        this.check(key);
        return;
      } catch (error) {
        if (Date.now() >= until) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  /** Resolves once `replicas` replicas have every write done so far on `key`'s connection. */
  wait(key: string): Promise<void> {
    this.check(key);
    const connection = connectionOf(this.#redis, key);
    let next = this.#next.get(connection);
    if (next === undefined) {
      next = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
        this.#next.delete(connection);
        // A little under the caller's own timeout (the same setting): WAIT answers its count first, and
        // the error names HERALD_REDIS_WAIT_REPLICAS, not "Redis did not answer within 800 ms".
        const waitMs = Math.max(1, Math.floor(this.#timeoutMs * 0.8));
        const acknowledged = Number(await connection.call('WAIT', String(this.#replicas), String(waitMs)));
        if (acknowledged < this.#replicas) throw new ReplicaWaitError(this.#replicas, acknowledged, waitMs);
      });
      this.#next.set(connection, next);
    }
    return next;
  }
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
