import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { NotificationJob } from '@herald/protocol';
import { PRETTY_LOG } from '@herald/protocol';
import { TokenBucket } from '@herald/rate-limiter';
import { Queue } from 'bullmq';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import type { GatewayConfig } from './config.js';
import { createApiKeyAuth } from './plugins/api-key-auth.js';
import { registerErrorHandler } from './plugins/error-handler.js';
import { healthRoutes } from './routes/health.js';
import { notifyRoutes } from './routes/notify.js';
import { tokenRoutes } from './routes/tokens.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: GatewayConfig;
    redis: Redis;
    queue: Queue<NotificationJob>;
    limiter: TokenBucket;
    authenticate: (request: FastifyRequest) => Promise<void>;
  }
}

/** Largest request body, in bytes. */
export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Builds the gateway (routes, Redis, queue, limiter) without listening. Tests call `app.inject()`;
 * `server.ts` listens.
 *
 * @example
 * ```ts
 * const app = await buildApp(loadConfig());
 * await app.listen({ port: 3000 });
 * ```
 */
export async function buildApp(
  config: GatewayConfig,
  options: { logger?: boolean } = {},
): Promise<FastifyInstance> {
  const app = Fastify({
    logger:
      options.logger === false
        ? false
        : {
            level: config.log.level,
            ...(config.log.format === 'pretty'
              ? { transport: { target: 'pino-pretty', options: PRETTY_LOG } }
              : {}),
          },
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: 'x-request-id',
    ajv: {
      // A JSON API: no silent coercion of "1" into 1, no silent removal of unknown fields.
      customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false },
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Producers fail fast: with no offline queue a command to a Redis that is down fails at once,
  // so the API answers 503 instead of holding the request.
  const redis = new Redis(config.redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    lazyConnect: true,
  });
  redis.on('error', (error) => app.log.warn({ err: error }, 'redis connection error'));
  await redis.connect().catch((error: unknown) => {
    app.log.warn({ err: error }, 'redis not reachable at start; requests will get 503 until it is');
  });

  const queue = new Queue<NotificationJob>(config.queue.name, {
    prefix: config.queue.prefix,
    connection: {
      url: config.redisUrl,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
    },
    defaultJobOptions: {
      attempts: 5,
      backoff: { type: 'exponential', delay: 1000 },
      removeOnComplete: { age: 3600, count: 10_000 },
      removeOnFail: { age: 7 * 24 * 3600 },
    },
  });
  queue.on('error', (error) => app.log.warn({ err: error }, 'queue connection error'));

  app.decorate('config', config);
  app.decorate('redis', redis);
  app.decorate('queue', queue);
  app.decorate(
    'limiter',
    new TokenBucket({
      redis,
      capacity: config.rateLimit.burst,
      ratePerSecond: config.rateLimit.perSecond,
      keyPrefix: config.rateLimit.keyPrefix,
    }),
  );
  app.decorate('authenticate', createApiKeyAuth(config.apiKeys));

  app.addHook('onClose', async () => {
    await queue.close();
    redis.disconnect();
  });

  registerErrorHandler(app);
  await app.register(healthRoutes);
  await app.register(notifyRoutes);
  await app.register(tokenRoutes);
  return app;
}
