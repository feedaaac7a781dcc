import { createRedis } from '@herald/config';
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
    await redis.connect().catch((error: unknown) => {
      app.log.warn({ err: error }, 'redis not reachable at start; requests get 503 until it is');
    });
    if (config.durability === 'aof') await assertWaitAofSupported(redis);

    const withRedisTimeout = <T>(promise: Promise<T>): Promise<T> => {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        promise,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new RedisTimeoutError(config.redisTimeoutMs)),
            config.redisTimeoutMs,
          );
        }),
      ]).finally(() => clearTimeout(timer));
    };
    app.decorate<Redis | Cluster>('redis', redis);
    app.decorate('withRedisTimeout', withRedisTimeout);
    // Closed after the queue (onClose hooks run in reverse order of registration).
    app.addHook('onClose', async () => {
      redis.disconnect();
    });
  },
  { name: 'redis', dependencies: ['config'], fastify: '5.x' },
);

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
  connection.on('error', (error) => app.log.warn({ err: error }, `${what} connection error`));
  return connection;
}

async function assertWaitAofSupported(redis: Redis | Cluster): Promise<void> {
  const info = (await redis.call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
  if (!Array.isArray(info) || info[0] === null || info[0] === undefined) {
    throw new Error(
      'HERALD_DURABILITY=aof needs WAITAOF (Redis 7.2 or newer) and this Redis lacks it: upgrade Redis or set HERALD_DURABILITY=redis.',
    );
  }
}
