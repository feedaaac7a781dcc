import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Inbox } from '@herald/inbox';
import { type LivePublisher, livePublisher } from '@herald/live';
import type { NotificationJob } from '@herald/protocol';
import { loggerOptions } from '@herald/protocol';
import { heraldRateLimit } from '@herald/rate-limiter/fastify';
import { Queue } from 'bullmq';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import { Redis } from 'ioredis';
import { ApiKeyStore } from './api-keys.js';
import type { GatewayConfig } from './config.js';
import { ErrorCode } from './errors.js';
import { IdempotencyStore } from './idempotency.js';
import { Limits } from './limits.js';
import { createMetrics, type GatewayMetrics } from './metrics.js';
import { createApiKeyAuth, decorateIdentity } from './plugins/api-key-auth.js';
import { registerErrorHandler } from './plugins/error-handler.js';
import { httpServerOptions, registerHttpLayer } from './plugins/http-layer.js';
import { registerIdempotencyRelease } from './plugins/idempotency-hooks.js';
import { registerJsonBody } from './plugins/json-body.js';
import { registerOpenApi } from './plugins/openapi.js';
import { registerValidation } from './plugins/validation.js';
import { healthRoutes } from './routes/health.js';
import { notifyRoutes } from './routes/notify.js';
import { statusRoutes } from './routes/status.js';
import { tokenRoutes } from './routes/tokens.js';
import { userRoutes } from './routes/users.js';
import { statusOf, type TenantStatus } from './status.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: GatewayConfig;
    redis: Redis;
    queue: Queue<NotificationJob>;
    limits: Limits;
    apiKeys: ApiKeyStore;
    idempotency: IdempotencyStore;
    metrics: GatewayMetrics;
    /** Route `onRequest` hook: `Authorization: Bearer <api key>` or a 401. */
    authenticate: (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void;
    /** Rejects when `promise` takes longer than `redisTimeoutMs`: the request gets a 503, never a hang. */
    withRedisTimeout<T>(promise: Promise<T>): Promise<T>;
    /** With `durability: aof`, waits until the primary's AOF has the writes (WAITAOF). */
    ensureDurable(): Promise<void>;
    /** Notification `id` of `tenantId`, or undefined (another tenant's answers like a missing one). */
    statusOf(tenantId: string, id: string): Promise<TenantStatus | undefined>;
    inbox: Inbox;
    /** Pushes unread counts to the user's connected tabs after a REST read. */
    live: LivePublisher;
  }
}

/** Largest request body, in bytes. */
export const BODY_LIMIT_BYTES = 64 * 1024;

/** Thrown when a Redis operation outlives `redisTimeoutMs`. */
export class RedisTimeoutError extends Error {
  readonly code = 'HERALD_ERR_REDIS_TIMEOUT';
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
    this.name = 'RedisTimeoutError';
  }
}

/**
 * Builds the gateway (routes, Redis, queue, limiter, metrics, OpenAPI) without listening. Tests call
 * `app.inject()`; `server.ts` listens.
 *
 * @example
 * ```ts
 * const app = await buildApp(loadConfig());
 * await app.listen({ port: 3000 });
 * ```
 */
export async function buildApp(config: GatewayConfig): Promise<FastifyInstance> {
  const app = Fastify({
    logger: loggerOptions(config.log),
    // Fastify's "incoming request" / "request completed" lines are info: below that level, skip even
    // building them (measurable on a denied flood, where a request costs ~25 µs in all).
    logController: new LogController({
      disableRequestLogging: !['trace', 'debug', 'info'].includes(config.log.level),
    }),
    ...httpServerOptions,
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: 'x-request-id',
    // Behind a load balancer, its `X-Forwarded-For` is not trusted unless configured: safe default.
    trustProxy: false,
  }).withTypeProvider<TypeBoxTypeProvider>();
  registerHttpLayer(app);
  registerJsonBody(app);

  // Producers fail fast: with no offline queue a command to a Redis that is down fails at once, and
  // a command sent before a disconnect is not resent after it (a stale limiter consume or a job add
  // replayed minutes later would be wrong), so the API answers 503 instead of holding the request.
  const producerOptions = {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
  };
  const redis = new Redis(config.redisUrl, { ...producerOptions, lazyConnect: true });
  redis.on('error', (error) => app.log.warn({ err: error }, 'redis connection error'));
  await redis.connect().catch((error: unknown) => {
    app.log.warn({ err: error }, 'redis not reachable at start; requests get 503 until it is');
  });

  if (config.durability === 'aof') await assertWaitAofSupported(redis);

  const queue = new Queue<NotificationJob>(config.queue.name, {
    prefix: config.queue.prefix,
    connection: { url: config.redisUrl, ...producerOptions },
  });
  queue.on('error', (error) => app.log.warn({ err: error }, 'queue connection error'));

  const withRedisTimeout = <T>(promise: Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new RedisTimeoutError(config.redisTimeoutMs)), config.redisTimeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
  };

  const apiKeys = new ApiKeyStore({
    redis,
    keyPrefix: config.keyPrefix,
    cacheMs: config.apiKeyCacheMs,
    envKeys: config.apiKeys,
  });
  const metrics = createMetrics(() => withRedisTimeout(queue.getJobCounts()));

  app.decorate('config', config);
  app.decorate('redis', redis);
  app.decorate('queue', queue);
  app.decorate('metrics', metrics);
  app.decorate('apiKeys', apiKeys);
  app.decorate(
    'idempotency',
    new IdempotencyStore({ redis, keyPrefix: config.keyPrefix, ttlSeconds: config.idempotencyTtlSeconds }),
  );
  const limits = new Limits(redis, config, app.log);
  metrics.decisionTotals = () => limits.totals();
  app.decorate('limits', limits);
  app.decorate('withRedisTimeout', withRedisTimeout);
  app.decorate('ensureDurable', async () => {
    if (config.durability !== 'aof') return;
    // WAITAOF numlocal numreplicas timeout: the primary's own AOF, no replica required.
    await withRedisTimeout(redis.call('WAITAOF', '1', '0', String(config.redisTimeoutMs)));
  });
  const inbox = new Inbox(redis, config.inbox);
  app.decorate('inbox', inbox);
  // Fire-and-forget: a tab that misses an unread count gets the exact count with its next change.
  const onLiveError = (error: unknown) => app.log.warn({ err: error }, 'live publish failed');
  app.decorate('live', livePublisher(redis, config.pubsub, onLiveError));
  app.decorate('statusOf', (tenantId: string, id: string) => statusOf(queue, inbox, tenantId, id));
  decorateIdentity(app);
  app.decorate('authenticate', createApiKeyAuth(apiKeys, withRedisTimeout));

  // Callback style: no promise per request.
  app.addHook('onResponse', (request, reply, done) => {
    metrics.requests.add(request.method, request.routeOptions.url ?? 'unknown', reply.statusCode);
    done();
  });
  app.addHook('onClose', async () => {
    await queue.close();
    redis.disconnect();
  });

  await registerOpenApi(app);

  registerValidation(app);
  registerErrorHandler(app);
  registerIdempotencyRelease(app);
  // Routes name their limiter, key and cost in `config.rateLimit`; the plugin runs after
  // authentication and validation, so bad input costs no tokens, and sets the draft-11 headers.
  await app.register(heraldRateLimit, {
    limiter: app.limits.defaults(),
    costExceedsCapacityCode: ErrorCode.BATCH_EXCEEDS_BURST,
  });
  await app.register(healthRoutes);
  await app.register(notifyRoutes);
  await app.register(statusRoutes);
  await app.register(tokenRoutes);
  await app.register(userRoutes);
  return app;
}

async function assertWaitAofSupported(redis: Redis): Promise<void> {
  const info = (await redis.call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
  if (!Array.isArray(info) || info[0] === null || info[0] === undefined) {
    throw new Error(
      'HERALD_DURABILITY=aof needs WAITAOF (Redis 7.2 or newer) and this Redis lacks it: upgrade Redis or set HERALD_DURABILITY=redis.',
    );
  }
}
