import { fastifySSE } from '@fastify/sse';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { createLogger } from '@herald/config';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { GatewayConfig } from './config.js';
import { OneLinePerRequest } from './logging.js';
import admin from './plugins/app/admin.js';
import apiKeys from './plugins/app/api-keys.js';
import configPlugin from './plugins/app/config.js';
import deployment from './plugins/app/deployment.js';
import errors from './plugins/app/errors.js';
import fanout from './plugins/app/fanout.js';
import httpLayer, { httpServerOptions } from './plugins/app/http-layer.js';
import idempotency from './plugins/app/idempotency.js';
import inbox from './plugins/app/inbox.js';
import jsonBody from './plugins/app/json-body.js';
import limits from './plugins/app/limits.js';
import live from './plugins/app/live.js';
import metrics from './plugins/app/metrics.js';
import notifications from './plugins/app/notifications.js';
import queue from './plugins/app/queue.js';
import redis from './plugins/app/redis.js';
import validation from './plugins/app/validation.js';
import webhooks from './plugins/app/webhooks.js';
import openApi from './plugins/external/openapi.js';
import adminRoutes from './routes/admin/index.js';
import healthRoutes from './routes/health/index.js';
import notificationRoutes from './routes/notifications/index.js';
import notifyRoutes from './routes/notify/index.js';
import preferenceRoutes from './routes/preferences/index.js';
import tokenRoutes from './routes/tokens/index.js';
import topicRoutes from './routes/topics/index.js';
import userRoutes from './routes/users/index.js';
import webhookRoutes from './routes/webhooks/index.js';

export { RedisTimeoutError } from './errors.js';

/** Largest request body, in bytes. */
export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Builds the gateway (plugins, then routes) without listening. Tests call `app.inject()`;
 * `server.ts` listens.
 *
 * @example
 * ```ts
 * const app = await buildApp(loadConfig());
 * await app.listen({ port: 3000 });
 * ```
 */
export async function buildApp(config: GatewayConfig): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: createLogger(config.log, 'gateway') as FastifyBaseLogger,
    // One line per request (see OneLinePerRequest), at info: below that level, skip even building it
    // (measurable on a denied flood, where a request costs ~25 µs in all).
    logController: new OneLinePerRequest({
      disableRequestLogging: !['trace', 'debug', 'info'].includes(config.log.level),
    }),
    ...httpServerOptions,
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: 'x-request-id',
    // Behind a load balancer, its `X-Forwarded-For` is not trusted unless configured: safe default.
    trustProxy: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  await app.register(configPlugin, { config });
  // First of all: it learns every route (the docs' own included) from `onRoute`, to answer 405.
  await app.register(httpLayer);

  // External plugins, before any route they document.
  await app.register(openApi);
  // Server-Sent Events for GET /admin/stream (@fastify/sse: the Fastify team's, with backpressure).
  await app.register(fastifySSE);

  // Herald's plugins, each naming the plugins it needs.
  await app.register(jsonBody);
  await app.register(validation);
  await app.register(errors);
  await app.register(redis);
  await app.register(deployment);
  await app.register(queue);
  await app.register(metrics);
  await app.register(apiKeys);
  await app.register(idempotency);
  await app.register(admin);
  await app.register(notifications);
  await app.register(limits);
  await app.register(inbox);
  await app.register(live);
  await app.register(webhooks);
  await app.register(fanout);

  await app.register(healthRoutes);
  await app.register(notifyRoutes);
  await app.register(notificationRoutes);
  await app.register(tokenRoutes);
  await app.register(userRoutes);
  await app.register(preferenceRoutes);
  await app.register(topicRoutes);
  await app.register(adminRoutes);
  await app.register(webhookRoutes);
  return app;
}
