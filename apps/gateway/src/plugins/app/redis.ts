import { REDIS_ROLE_OPTIONS } from '@herald/config';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';
import { RedisTimeoutError } from '../../errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The gateway's producer connection: fails fast (no offline queue), so requests get a 503, never a hang. */
    redis: Redis;
    /** Rejects when `promise` takes longer than `redisTimeoutMs`: the request gets a 503, never a hang. */
    withRedisTimeout<T>(promise: Promise<T>): Promise<T>;
    /** With `durability: aof`, waits until the primary's AOF has the writes (WAITAOF). */
    ensureDurable(): Promise<void>;
  }
}

/** The producer options (fail fast, see `REDIS_ROLE_OPTIONS` in @herald/config), for the queue's connection too. */
export const producerOptions = REDIS_ROLE_OPTIONS.producer;

/** The Redis connection, the request-side timeout around Redis calls, and WAITAOF durability. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    const redis = new Redis(config.redisUrl, { ...producerOptions, lazyConnect: true });
    redis.on('error', (error) => app.log.warn({ err: error }, 'redis connection error'));
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
    app.decorate('redis', redis);
    app.decorate('withRedisTimeout', withRedisTimeout);
    app.decorate('ensureDurable', async () => {
      if (config.durability !== 'aof') return;
      // WAITAOF numlocal numreplicas timeout: the primary's own AOF, no replica required.
      await withRedisTimeout(redis.call('WAITAOF', '1', '0', String(config.redisTimeoutMs)));
    });
    // Closed after the queue (onClose hooks run in reverse order of registration).
    app.addHook('onClose', async () => {
      redis.disconnect();
    });
  },
  { name: 'redis', dependencies: ['config'], fastify: '5.x' },
);

async function assertWaitAofSupported(redis: Redis): Promise<void> {
  const info = (await redis.call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
  if (!Array.isArray(info) || info[0] === null || info[0] === undefined) {
    throw new Error(
      'HERALD_DURABILITY=aof needs WAITAOF (Redis 7.2 or newer) and this Redis lacks it: upgrade Redis or set HERALD_DURABILITY=redis.',
    );
  }
}
