import { createRedis, REDIS_ROLE_OPTIONS, reconnectDelayMs } from '@herald/config';
import {
  type AppendResult,
  Inbox,
  InboxError,
  InboxErrorCode,
  type InboxNotification,
  Topics,
} from '@herald/inbox';
import { type LivePublisher, livePublisher } from '@herald/live';
import { DEFAULT_TENANT, type NotificationJob, userKey } from '@herald/protocol';
import { WebhookStore } from '@herald/webhooks';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import { startEscalations } from './escalation.js';
import { startFanoutWorker } from './fanout-worker.js';
import { createMetrics, type WorkerMetrics } from './http.js';
import { appendOptionsOf, type Durability, replicaDurability, storeAndPush } from './store.js';
import { UserOrder } from './user-order.js';
import { startWebhookWorker, workerWebhookEvents } from './webhooks.js';

/** A running notification worker. */
export interface NotificationWorker {
  worker: Worker<NotificationJob, JobResult>;
  inbox: Inbox;
  metrics: WorkerMetrics;
  /** Resolves when Redis and the queue answer (the readiness check). */
  ready(): Promise<unknown>;
  close(): Promise<void>;
}

/** What a completed job returns (BullMQ keeps it as the job's `returnvalue`). */
export type JobResult =
  | { outcome: 'appended' | 'already-appended'; offset: string }
  | { outcome: 'expired' | 'cancelled' }
  | { outcome: 'deduplicated'; duplicateOf: string }
  | { outcome: 'muted'; mutedBy: { topic: string } | { type: string } };

/**
 * Processes one notification job: append to the user's inbox first, then `durable` (waits for
 * replicas, when asked), then push it live (see {@link storeAndPush}), and remember the user as one of
 * the tenant's (the audience of a broadcast).
 */
export async function processNotification(
  job: NotificationJob,
  inbox: Inbox,
  live: LivePublisher,
  topics?: Topics,
  durable?: Durability,
): Promise<AppendResult> {
  const notification: InboxNotification = {
    id: job.id,
    userId: job.userId,
    payload: job.payload,
    createdAt: job.createdAt,
    ...(job.topic !== undefined ? { topic: job.topic } : {}),
    ...(job.type !== undefined ? { type: job.type } : {}),
  };
  // The recipient is (tenant, user): the tenant's own inbox, dedupe keys and live channel. A job from before
  // tenants carries none and belongs to `default`.
  const tenantId = job.tenantId ?? DEFAULT_TENANT;
  const [result] = await Promise.all([
    storeAndPush(inbox.tenant(tenantId), live, notification, appendOptionsOf(job), durable),
    topics?.tenant(tenantId).remember([job.userId]),
  ]);
  return result;
}

/**
 * Starts a BullMQ worker that stores each notification in its user's inbox and pushes it through Redis
 * pub/sub, so that whichever realtime instance holds the user's sockets delivers it.
 */
export async function startWorker(config: WorkerConfig, log: Logger): Promise<NotificationWorker> {
  // Workers wait for Redis rather than fail: BullMQ requires maxRetriesPerRequest: null, and the
  // inbox commands of a job should outlive a Redis restart the same way.
  const target = { url: config.redisUrl, clusterNodes: config.redisClusterNodes };
  // With replicas to wait for, a replica that rejoins after a failover is seen within a second.
  const redis = createRedis(
    target,
    'worker',
    {},
    config.redisWaitReplicas > 0 ? { slotsRefreshInterval: 1000 } : {},
  );
  // On Redis Cluster BullMQ takes a Cluster client (the queue prefix `{herald}` keeps a queue in one slot).
  const bullConnection = config.redisClusterNodes ? createRedis(target, 'worker') : undefined;
  redis.on('error', (error) => log.warn({ err: error }, 'redis connection error'));
  const inbox = new Inbox(redis, config.inbox);
  const topics = new Topics(redis, { prefix: config.inbox.prefix });
  // Fire-and-forget: a socket that misses the live message reads it from the inbox (gap fill).
  const live = livePublisher(redis, { key: config.pubsubKey, mode: config.pubsubMode }, (error) =>
    log.warn({ err: error }, 'live publish failed'),
  );
  // For the queue depth on /metrics and the readiness check; fails fast (no offline queue) so that a
  // scrape or probe while Redis is down answers at once.
  const queue = new Queue(config.queue.name, {
    prefix: config.queue.prefix,
    connection: bullConnection ?? {
      url: config.redisUrl,
      enableOfflineQueue: false,
      retryStrategy: reconnectDelayMs,
    },
  });
  queue.on('error', () => {});
  const metrics = createMetrics(() => queue.getJobCounts());
  // Delivery webhooks: this worker reports what it finds (expired, failed for good) and delivers them.
  const webhookStore = new WebhookStore(redis, config.keyPrefix);
  const webhookTarget = {
    store: webhookStore,
    queue: config.queue,
    redisUrl: config.redisUrl,
    cluster: bullConnection,
  };
  const webhookEvents = workerWebhookEvents(webhookTarget);
  const report = (
    job: NotificationJob,
    facts: Parameters<typeof webhookEvents.emit>[2][number],
    type: 'notification.failed' | 'notification.expired',
  ) =>
    webhookEvents
      .emit(job.tenantId ?? DEFAULT_TENANT, type, [facts])
      .catch((error: unknown) =>
        log.warn({ err: error, notificationId: job.id, type }, 'webhook event not enqueued'),
      );
  const durable = replicaDurability(redis, config.redisWaitReplicas);
  // Each user's notifications are stored in send order, one at a time (see UserOrder).
  const order = new UserOrder();

  const escalations = await startEscalations({
    redis,
    inbox,
    push: config.push,
    pushTimeoutMs: config.pushTimeoutMs,
    queue: config.queue,
    redisUrl: config.redisUrl,
    cluster: bullConnection,
    log,
    metrics,
  });
  const worker = new Worker<NotificationJob, JobResult>(
    config.queue.name,
    async (job: Job<NotificationJob, JobResult>) => {
      let result: AppendResult;
      const stopTimer = metrics.duration.startTimer();
      try {
        result = await order.run(
          userKey(job.data.tenantId ?? DEFAULT_TENANT, job.data.userId),
          [Date.parse(job.data.createdAt) || 0, job.data.seq ?? 0],
          () => processNotification(job.data, inbox, live, topics, durable),
        );
      } catch (error) {
        // A job whose data can never be stored (e.g. an empty userId) fails at once, without retries.
        if (error instanceof InboxError && error.code !== InboxErrorCode.UNEXPECTED_REPLY) {
          throw new UnrecoverableError(`${error.code}: ${error.message}`);
        }
        throw error;
      } finally {
        stopTimer();
      }
      // The Web Push fallback waits for its deadline from now, once the notification is stored.
      if (result.outcome === 'appended' || result.outcome === 'already-appended')
        await escalations.schedule(job.data, result.offset);
      metrics.jobs.inc({ outcome: result.outcome });
      log.debug(
        { notificationId: job.data.id, userId: job.data.userId, outcome: result.outcome },
        'notification processed',
      );
      if (result.outcome === 'expired') {
        log.info({ notificationId: job.data.id }, 'notification expired before delivery');
        await report(
          job.data,
          { notificationId: job.data.id, userId: job.data.userId, at: new Date().toISOString() },
          'notification.expired',
        );
      }
      if (result.outcome === 'cancelled')
        log.info({ notificationId: job.data.id }, 'notification cancelled before delivery');
      const { unread: _unread, ...jobResult } = result;
      return jobResult;
    },
    {
      prefix: config.queue.prefix,
      concurrency: config.concurrency,
      lockDuration: config.lockMs,
      stalledInterval: config.stalledIntervalMs,
      connection: bullConnection ?? { url: config.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
    },
  );
  worker.on('failed', (job, error) => {
    const final =
      job !== undefined &&
      (job.attemptsMade >= (job.opts.attempts ?? 1) || error instanceof UnrecoverableError);
    if (final && job !== undefined) {
      void report(
        job.data,
        {
          notificationId: job.data.id,
          userId: job.data.userId,
          at: new Date(job.finishedOn ?? Date.now()).toISOString(),
          attempts: job.attemptsMade,
          reason: error.message.slice(0, 500),
        },
        'notification.failed',
      );
    }
    metrics.jobs.inc({ outcome: final ? 'failed' : 'retry' });
    log[final ? 'error' : 'warn'](
      { err: error, notificationId: job?.id, attempts: job?.attemptsMade, final },
      final
        ? 'notification failed for good: see `pnpm herald failed list`'
        : 'notification attempt failed; will retry',
    );
  });
  worker.on('error', (error) => log.warn({ err: error }, 'worker error'));
  await worker.waitUntilReady();
  const webhooks = await startWebhookWorker({
    ...webhookTarget,
    settings: config.webhooks,
    log,
    count: (outcome) => metrics.webhooks.inc({ outcome }),
  });
  const fanout = await startFanoutWorker(config, log, metrics);

  return {
    worker,
    inbox,
    metrics,
    ready: () => Promise.all([redis.ping(), queue.getJobCounts('wait')]),
    async close() {
      // Waits for active jobs to finish (each is a couple of Redis round trips), takes no new ones.
      await Promise.all([worker.close(), fanout.close()]);
      await escalations.close();
      await webhooks.close();
      await webhookEvents.close();
      await queue.close();
      redis.disconnect();
      bullConnection?.disconnect();
    },
  };
}
