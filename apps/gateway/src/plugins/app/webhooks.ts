import { connectionErrorLog } from '@herald/config';
import { WebhookEvents, WebhookStore } from '@herald/webhooks';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

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
      // The queues' connection (a Cluster client on Redis Cluster), in the queue's `{herald}` slot.
      connection: app.queueConnection,
      now: () => app.clock.now(),
    });
    events.queue.on('error', connectionErrorLog(app.log, 'webhook queue connection error'));
    app.decorate('webhooks', { store, events });
    app.addHook('onClose', async () => {
      await events.close();
    });
  },
  { name: 'webhooks', dependencies: ['config', 'redis', 'queue'], fastify: '5.x' },
);
