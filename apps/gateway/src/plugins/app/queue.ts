import {
  connectionErrorLog,
  connectionOf,
  earlierLayouts,
  partitionOf,
  QUEUE_OPTIONS,
  queuePartitions,
  queueSlotKey,
  ReplicaWaiter,
  recordLayout,
} from '@herald/config';
import type { NotificationJob } from '@herald/protocol';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Cluster, Redis } from 'ioredis';
import { connectAtStart, producerConnection } from './redis.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The notification queue's partition 0 (its own connection, failing fast like `app.redis`): the one
     * queue of a deployment with `HERALD_QUEUE_PARTITIONS=1`, the default.
     */
    queue: Queue<NotificationJob>;
    /** Every partition of the notification queue, by index (`HERALD_QUEUE_PARTITIONS`; see `queuePartitions`). */
    queues: readonly Queue<NotificationJob>[];
    /**
     * The partitions of earlier `HERALD_QUEUE_PARTITIONS` counts still recorded in Redis (the workers
     * drain them): a notification queued there before the change is found by its status, cancel and
     * the failed-jobs API too. Refreshed every minute; empty when the count never changed.
     */
    earlierQueues(): readonly Queue<NotificationJob>[];
    /** Records this gateway's count and reads the earlier ones now (else every minute). */
    recordPartitions(): Promise<void>;
    /** The partition of a recipient: one user's notifications always share one, in send order. */
    partitionOf(tenantId: string, userId: string): number;
    /**
     * The queues' own connection: every queue of the gateway adds through it (the fan-out queue too, in
     * the same `{herald}` slot), so that `ensureDurable` waits for what they added.
     */
    queueConnection: Redis | Cluster;
    /**
     * After a job add: waits until the writes to `partitions` (default 0) are durable as configured, on
     * the queues' own connection (WAIT and WAITAOF count the writes of the connection they run on; one
     * per master of those partitions): in the primary's AOF (WAITAOF, `durability: aof`) and on
     * `HERALD_REDIS_WAIT_REPLICAS` replicas (WAIT).
     */
    ensureDurable(partitions?: Iterable<number>): Promise<void>;
    /**
     * Before a job add: throws `ReplicaWaitError` when the master of one of `partitions` (default 0) has
     * fewer replicas than `HERALD_REDIS_WAIT_REPLICAS` (Cluster, as its slot table says), so that nothing
     * is added that could not be acknowledged.
     */
    checkDurable(partitions?: Iterable<number>): void;
    /**
     * For readiness: resolves when some partition's master has the `HERALD_REDIS_WAIT_REPLICAS` replicas
     * (or none are asked for), else rejects with that `ReplicaWaitError`: then every send is refused. One
     * master short of them (a failover) leaves the others' recipients served, so it is still ready.
     */
    durableReady(): Promise<void>;
  }
}

/** How often a gateway records its `HERALD_QUEUE_PARTITIONS` (workers forget a count unrecorded for 10 min). */
const LAYOUT_RECORD_MS = 60_000;

/** The notification queue (closed on shutdown, before the Redis connection) and its durability wait. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    // Its own connection, failing fast like `app.redis`, given to BullMQ (which then uses it as it is)
    // so that WAIT and WAITAOF run on the connection that carried the adds. On Cluster a Cluster client;
    // the prefix's hash tag (`{herald}`) keeps a partition in one slot, each partition its own.
    const connection = producerConnection(
      app,
      'queue',
      { lazyConnect: true },
      // With replicas to wait for, a replica that rejoins after a failover is seen within a second
      // (one CLUSTER SLOTS per second; ioredis's default is every 5 s).
      { lazyConnect: true, ...(config.redisWaitReplicas > 0 ? { slotsRefreshInterval: 1000 } : {}) },
    );
    // Connected (on Cluster: the slot table read) before the gateway takes a request, as `app.redis` is:
    // otherwise its first requests after a start are refused (503) while the connection is still coming up.
    await connectAtStart(app, connection, 'queue');
    const queues = queuePartitions(config.queue).map(({ name, prefix }) => {
      const queue = new Queue<NotificationJob>(name, { ...QUEUE_OPTIONS, prefix, connection });
      queue.on('error', connectionErrorLog(app.log, 'queue connection error', { prefix }));
      return queue;
    });
    const [queue] = queues;
    if (queue === undefined) throw new Error('HERALD_QUEUE_PARTITIONS gave no queue');
    app.decorate('queue', queue);
    app.decorate('queues', Object.freeze(queues));
    app.decorate('partitionOf', (tenantId: string, userId: string) =>
      partitionOf(tenantId, userId, queues.length),
    );
    app.decorate<Redis | Cluster>('queueConnection', connection);

    // A key in each partition's slot: where the connection that carried its adds is found.
    const slotKeys = queuePartitions(config.queue).map(queueSlotKey);
    const keysOf = (partitions: Iterable<number> = [0]) =>
      [...new Set(partitions)].map((p) => slotKeys[p] ?? '');
    const timeout = String(config.redisTimeoutMs);
    const waiter =
      config.redisWaitReplicas > 0
        ? new ReplicaWaiter(connection, config.redisWaitReplicas, config.redisTimeoutMs)
        : undefined;
    app.decorate('checkDurable', (partitions?: Iterable<number>) => {
      if (waiter) for (const key of keysOf(partitions)) waiter.check(key);
    });
    app.decorate('durableReady', async () => {
      if (waiter === undefined) return;
      const checks = await Promise.allSettled(slotKeys.map((key) => waiter.available(key)));
      if (checks.some((check) => check.status === 'fulfilled')) return;
      throw checks.find((check) => check.status === 'rejected')?.reason;
    });
    app.decorate('ensureDurable', async (partitions?: Iterable<number>) => {
      const keys = keysOf(partitions);
      if (config.durability === 'aof') {
        // WAITAOF numlocal numreplicas timeout: the primary's own AOF, no replica required; once per master.
        const nodes = new Set(keys.map((key) => connectionOf(connection, key)));
        await app.withRedisTimeout(
          Promise.all([...nodes].map((node) => node.call('WAITAOF', '1', '0', timeout))),
        );
      }
      if (waiter) await app.withRedisTimeout(Promise.all(keys.map((key) => waiter.wait(key))));
    });
    // The partition count this gateway enqueues with, recorded now and every minute: the workers of a
    // later count drain what it left in its partitions (see `layoutRegistryKey`). And the partitions of
    // the earlier counts recorded, whose notifications a status or cancel may ask for.
    const earlier = new Map<string, Queue<NotificationJob>>();
    let earlierList: readonly Queue<NotificationJob>[] = [];
    app.decorate('earlierQueues', () => earlierList);
    const record = async () => {
      try {
        await recordLayout(connection, config.queue);
        const refs = (await earlierLayouts(connection, config.queue)).flatMap((layout) => layout.leftovers);
        const keep = new Set(refs.map((ref) => `${ref.prefix}:${ref.name}`));
        for (const ref of refs) {
          const key = `${ref.prefix}:${ref.name}`;
          if (earlier.has(key)) continue;
          const queue = new Queue<NotificationJob>(ref.name, {
            ...QUEUE_OPTIONS,
            prefix: ref.prefix,
            connection,
          });
          queue.on('error', connectionErrorLog(app.log, 'queue connection error', { prefix: ref.prefix }));
          earlier.set(key, queue);
        }
        for (const [key, queue] of earlier) {
          if (keep.has(key)) continue;
          earlier.delete(key);
          await queue.close();
        }
        earlierList = Object.freeze([...earlier.values()]);
      } catch (error) {
        app.log.warn({ err: error }, 'could not record HERALD_QUEUE_PARTITIONS in Redis; will retry');
      }
    };
    app.decorate('recordPartitions', record);
    void record();
    const recording = setInterval(() => void record(), LAYOUT_RECORD_MS);
    recording.unref();
    app.addHook('onClose', async () => {
      clearInterval(recording);
      await Promise.all([...queues, ...earlier.values()].map((partition) => partition.close()));
      connection.disconnect();
    });
  },
  { name: 'queue', dependencies: ['config', 'redis'], fastify: '5.x' },
);
