import { ConfigError, connectionErrorLog, createRedis, RedisClock } from '@herald/config';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { RedisTimeoutError } from '../../errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The gateway's producer connection (a Cluster client with `HERALD_REDIS_CLUSTER_NODES`): fails fast
     * (no offline queue), so requests get a 503, never a hang.
     */
    redis: Redis | Cluster;
    /** Rejects when `promise` takes longer than `redisTimeoutMs`: the request gets a 503, never a hang. */
    withRedisTimeout<T>(promise: Promise<T>): Promise<T>;
    /**
     * Redis's clock (`TIME`, read at start and every 10 s): what a notification's `createdAt` is stamped
     * with, so that its `ttlMs` and `delayMs`, which the worker and the inbox scripts measure on Redis's
     * clock, do not move with this machine's.
     */
    clock: RedisClock;
  }
}

/** The Redis connection and the request-side timeout around Redis calls. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    const redis = producerConnection(
      app,
      'redis',
      { lazyConnect: true, enableAutoPipelining: true },
      { lazyConnect: true },
    );
    await connectAtStart(app, redis, 'redis');
    if (config.durability === 'aof') await assertWaitAofSupported(redis);
    const clock = new RedisClock(redis);
    // Before the first request (a Redis away at start: this machine's clock until it answers).
    await clock.sync();
    clock.start();

    const withRedisTimeout = <T>(promise: Promise<T>): Promise<T> => {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        promise,
        new Promise<never>((_, reject) => {
          // After the I/O already there (one setImmediate): a process busy longer than the timeout finds
          // the timer due and Redis's answer waiting in the socket at once, and timers run first; the
          // answer, which came in time, is the answer (it was a 503 for a write that was done).
          timer = setTimeout(
            () => setImmediate(() => reject(new RedisTimeoutError(config.redisTimeoutMs))),
            config.redisTimeoutMs,
          );
        }),
      ]).finally(() => clearTimeout(timer));
    };
    app.decorate<Redis | Cluster>('redis', redis);
    app.decorate('withRedisTimeout', withRedisTimeout);
    app.decorate('clock', clock);
    // Closed after the queue (onClose hooks run in reverse order of registration).
    app.addHook('onClose', async () => {
      clock.stop();
      redis.disconnect();
    });
  },
  { name: 'redis', dependencies: ['config'], fastify: '5.x' },
);

/**
 * How long the gateway waits for a connection at start, ms, before it goes on without it (requests get
 * 503 until it is up; ioredis goes on connecting). Well within Fastify's 10 s for a plugin.
 */
const START_CONNECT_MS = 2000;

/**
 * Connects `connection` at start, or logs why not and goes on: requests get 503 until it is up. A Redis
 * that refuses connections fails at once; a Redis Cluster that answers but is down (a master without a
 * replica gone: `cluster_state:fail`) never settles ioredis's `connect()`, and the gateway crashed at
 * start with Fastify's "Plugin did not start in time", every restart again until the Cluster was whole.
 */
export async function connectAtStart(
  app: FastifyInstance,
  connection: Redis | Cluster,
  what: string,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `not connected within ${START_CONNECT_MS} ms${'slots' in connection ? ' (is every slot of the Redis Cluster served? CLUSTER INFO: cluster_state)' : ''}`,
          ),
        ),
      START_CONNECT_MS,
    );
  });
  await Promise.race([connection.connect(), late])
    .catch((error: unknown) => {
      app.log.warn({ err: error }, `${what} not reachable at start; requests get 503 until it is`);
    })
    .finally(() => clearTimeout(timer));
}

/**
 * A producer connection (failing fast) to the gateway's Redis, or Cluster with
 * `HERALD_REDIS_CLUSTER_NODES`, with `extra` and `cluster` options; its errors are logged as warnings,
 * `<what> connection error`.
 */
export function producerConnection(
  app: FastifyInstance,
  what: string,
  extra: RedisOptions = {},
  cluster: Omit<ClusterOptions, 'redisOptions'> = {},
): Redis | Cluster {
  const { config } = app;
  const connection = createRedis(
    { url: config.redisUrl, clusterNodes: config.redisClusterNodes },
    'producer',
    extra,
    cluster,
  );
  connection.on('error', connectionErrorLog(app.log, `${what} connection error`));
  return connection;
}

async function assertWaitAofSupported(redis: Redis | Cluster): Promise<void> {
  const info = (await redis.call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
  if (!Array.isArray(info) || info[0] === null || info[0] === undefined) {
    throw new ConfigError(
      'HERALD_DURABILITY=aof needs WAITAOF (Redis 7.2 or newer) and this Redis lacks it: upgrade Redis or set HERALD_DURABILITY=redis.',
    );
  }
}
