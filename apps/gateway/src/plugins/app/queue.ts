import { connectionOf, ReplicaWaiter } from '@herald/config';
import type { NotificationJob } from '@herald/protocol';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Cluster, Redis } from 'ioredis';
import { producerConnection } from './redis.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The BullMQ queue the worker consumes (its own connection, failing fast like `app.redis`). */
    queue: Queue<NotificationJob>;
    /**
     * The queues' own connection: every queue of the gateway adds through it (the fan-out queue too, in
     * the same `{herald}` slot), so that `ensureDurable` waits for what they added.
     */
    queueConnection: Redis | Cluster;
    /**
     * After a job add: waits until the queue's writes are durable as configured, on the queue's own
     * connection (WAIT and WAITAOF count the writes of the connection they run on): in the primary's
     * AOF (WAITAOF, `durability: aof`) and on `HERALD_REDIS_WAIT_REPLICAS` replicas (WAIT).
     */
    ensureDurable(): Promise<void>;
    /**
     * Before a job add: throws `ReplicaWaitError` when the queue's master has fewer replicas than
     * `HERALD_REDIS_WAIT_REPLICAS` (Cluster, as its slot table says), so that nothing is added that
     * could not be acknowledged.
     */
    checkDurable(): void;
  }
}

/** The notification queue (closed on shutdown, before the Redis connection) and its durability wait. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    // Its own connection, failing fast like `app.redis`, given to BullMQ (which then uses it as it is)
    // so that WAIT and WAITAOF run on the connection that carried the adds. On Cluster a Cluster client;
    // the prefix's hash tag (`{herald}`) keeps the queue in one slot.
    const connection = producerConnection(
      app,
      'queue',
      {},
      // With replicas to wait for, a replica that rejoins after a failover is seen within a second
      // (one CLUSTER SLOTS per second; ioredis's default is every 5 s).
      config.redisWaitReplicas > 0 ? { slotsRefreshInterval: 1000 } : {},
    );
    const queue = new Queue<NotificationJob>(config.queue.name, {
      prefix: config.queue.prefix,
      connection,
    });
    queue.on('error', (error) => app.log.warn({ err: error }, 'queue connection error'));
    app.decorate('queue', queue);
    app.decorate<Redis | Cluster>('queueConnection', connection);

    // A key in the queue's slot: the connection that carried the add.
    const queueKey = `${config.queue.prefix}:${config.queue.name}:id`;
    const timeout = String(config.redisTimeoutMs);
    const waiter =
      config.redisWaitReplicas > 0
        ? new ReplicaWaiter(connection, config.redisWaitReplicas, config.redisTimeoutMs)
        : undefined;
    app.decorate('checkDurable', () => waiter?.check(queueKey));
    app.decorate('ensureDurable', async () => {
      if (config.durability === 'aof') {
        // WAITAOF numlocal numreplicas timeout: the primary's own AOF, no replica required.
        const node = connectionOf(connection, queueKey);
        await app.withRedisTimeout(node.call('WAITAOF', '1', '0', timeout));
      }
      if (waiter) await app.withRedisTimeout(waiter.wait(queueKey));
    });
    app.addHook('onClose', async () => {
      await queue.close();
      connection.disconnect();
    });
  },
  { name: 'queue', dependencies: ['config', 'redis'], fastify: '5.x' },
);
