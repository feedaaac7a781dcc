import { WebhookEvents, WebhookStore } from '@herald/webhooks';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { producerOptions } from './redis.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Tenants' delivery webhooks (settings in Redis) and the events the gateway reports (REST reads). */
    webhooks: { store: WebhookStore; events: WebhookEvents };
  }
}

/** Delivery webhooks: the store behind `/webhook` and `/admin/…/webhook`, and the gateway's producer. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    const store = new WebhookStore(app.redis, config.keyPrefix);
    const events = new WebhookEvents(store, {
      queueName: config.queue.name,
      prefix: config.queue.prefix,
      connection: { url: config.redisUrl, ...producerOptions },
    });
    events.queue.on('error', (error) => app.log.warn({ err: error }, 'webhook queue connection error'));
    app.decorate('webhooks', { store, events });
    app.addHook('onClose', async () => {
      await events.close();
    });
  },
  { name: 'webhooks', dependencies: ['config', 'redis'], fastify: '5.x' },
);
