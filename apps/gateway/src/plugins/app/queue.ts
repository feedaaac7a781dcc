import type { NotificationJob } from '@herald/protocol';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { producerOptions } from './redis.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The BullMQ queue the worker consumes (its own connection, failing fast like `app.redis`). */
    queue: Queue<NotificationJob>;
  }
}

/** The notification queue: closed on shutdown, before the Redis connection. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    const queue = new Queue<NotificationJob>(config.queue.name, {
      prefix: config.queue.prefix,
      connection: { url: config.redisUrl, ...producerOptions },
    });
    queue.on('error', (error) => app.log.warn({ err: error }, 'queue connection error'));
    app.decorate('queue', queue);
    app.addHook('onClose', async () => {
      await queue.close();
    });
  },
  { name: 'queue', dependencies: ['config', 'redis'], fastify: '5.x' },
);
