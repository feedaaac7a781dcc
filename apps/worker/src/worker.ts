import {
  checkWritable,
  connectionErrorLog,
  createRedis,
  jobCountsOf,
  QUEUE_OPTIONS,
  queuePartitions,
  REDIS_ROLE_OPTIONS,
  RedisClock,
  ReplicaWaiter,
  reconnectDelayMs,
  settleWithin,
} from '@herald/config';
import {
  type AppendResult,
  Inbox,
  InboxError,
  InboxErrorCode,
  type InboxNotification,
  Topics,
} from '@herald/inbox';
import { type LivePublisher, livePublisher } from '@herald/live';
import {
  DEFAULT_PRIORITY,
  DEFAULT_TENANT,
  envelopeIndexKey,
  NOTIFY_ENVELOPE_JOB_NAME,
  NOTIFY_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
  notificationJobOptions,
  userKey,
} from '@herald/protocol';
import { WebhookStore } from '@herald/webhooks';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import { holdIfEarly } from './due.js';
import { startEscalations } from './escalation.js';
import { isRefusedForItsData } from './fanout.js';
import { startFanoutWorker } from './fanout-worker.js';
import { createMetrics, type WorkerMetrics } from './http.js';
import { Leftovers } from './leftovers.js';
import { appendOptionsOf, type Durability, replicaDurability, storeAndPush } from './store.js';
import { isTransientStoreError, retryStore } from './store-retry.js';
import { UserOrder } from './user-order.js';
import { startWebhookWorker, workerWebhookEvents } from './webhooks.js';

/** A running notification worker. */
export interface NotificationWorker {
  /** The BullMQ worker of the first partition this worker consumes (of `workers`). */
  worker: Worker<NotificationJob | NotificationEnvelope, JobResult>;
  /** One BullMQ worker per queue partition consumed (`HERALD_WORKER_PARTITIONS`), in partition order. */
  workers: readonly Worker<NotificationJob | NotificationEnvelope, JobResult>[];
  /** The drains of the partitions of earlier `HERALD_QUEUE_PARTITIONS` counts that still hold jobs. */
  leftovers: Leftovers;
  inbox: Inbox;
  metrics: WorkerMetrics;
  /** Resolves when Redis and the queue answer and Redis takes writes (the readiness check). */
  ready(): Promise<unknown>;
  close(): Promise<void>;
}

/** What a completed job returns (BullMQ keeps it as the job's `returnvalue`). */
export type JobResult =
  | { outcome: 'appended' | 'already-appended'; offset: string }
  | { outcome: 'envelope'; notifications: number; requeued: number }
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
  rerun = false,
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
    storeAndPush(
      inbox.tenant(tenantId),
      live,
      notification,
      { ...appendOptionsOf(job), ...(rerun ? { rerun } : {}) },
      durable,
    ),
    topics?.tenant(tenantId).remember([job.userId]),
  ]);
  return result;
}

/** The notifications a job carries: its own, or an envelope's. */
function notificationsOf(job: Job<NotificationJob | NotificationEnvelope>): NotificationJob[] {
  if (job.name !== NOTIFY_ENVELOPE_JOB_NAME) return [job.data as NotificationJob];
  const items = (job.data as NotificationEnvelope).items;
  return Array.isArray(items) ? items : [];
}

/** How far behind Redis's clock this machine's may be before the worker warns, ms. */
const BEHIND_WARN_MS = 1000;
/** How often the worker checks, and at most how often it repeats the same warning, ms. */
const BEHIND_CHECK_MS = 60_000;
const BEHIND_REPEAT_MS = 10 * 60_000;

/**
 * Warns, now and every minute while it holds (the same offset at most every 10 minutes), when this
 * machine's clock is more than a second behind Redis's. Herald's own times are Redis's, but BullMQ
 * promotes a delayed job (`delayMs`, a retry's backoff) when the worker's `Date.now()` reaches its time:
 * that much late. (A clock ahead is harmless: such a job, promoted early, waits for its time, see
 * earlyByMs.) Answers the timer, which keeps no process alive.
 */
function warnWhenBehind(clock: RedisClock, log: Logger): NodeJS.Timeout {
  let warned: { atMs: number; behindMs: number } | undefined;
  const check = () => {
    const offset = clock.offsetMs();
    if (offset === undefined || offset >= -BEHIND_WARN_MS) {
      warned = undefined;
      return;
    }
    const behindMs = -offset;
    const now = performance.now();
    if (
      warned &&
      now - warned.atMs < BEHIND_REPEAT_MS &&
      Math.abs(behindMs - warned.behindMs) < BEHIND_WARN_MS
    )
      return;
    warned = { atMs: now, behindMs };
    log.warn(
      { behindMs },
      `This machine's clock is ${(behindMs / 1000).toFixed(1)} s behind Redis's: BullMQ promotes delayed notifications (delayMs) and retries by this clock, so they run that much late. Keep the clocks in sync (NTP).`,
    );
  };
  check();
  const timer = setInterval(check, BEHIND_CHECK_MS);
  timer.unref();
  return timer;
}

/**
 * Longest a shutdown waits for the BullMQ workers to close (their active jobs to finish), ms, within the
 * apps' 10 s grace (`SHUTDOWN_GRACE_MS`): the connections are closed after it, and the process exits 0.
 */
export const WORKERS_CLOSE_MS = 5000;

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
    { enableAutoPipelining: true },
    config.redisWaitReplicas > 0 ? { slotsRefreshInterval: 1000 } : {},
  );
  // On Redis Cluster BullMQ takes a Cluster client (the queue prefix `{herald}` keeps a queue in one slot).
  const bullConnection = config.redisClusterNodes ? createRedis(target, 'worker') : undefined;
  redis.on('error', connectionErrorLog(log, 'redis connection error'));
  // Redis's clock: when a delayed job is due (see earlyByMs), the times of webhook events and requests.
  const clock = new RedisClock(redis);
  await clock.sync();
  clock.start();
  const clockCheck = warnWhenBehind(clock, log);
  const inbox = new Inbox(redis, config.inbox);
  const topics = new Topics(redis, { prefix: config.inbox.prefix });
  // Fire-and-forget: a socket that misses the live message reads it from the inbox (gap fill).
  const live = livePublisher(redis, { key: config.pubsubKey, mode: config.pubsubMode }, (error) =>
    log.warn({ err: error }, 'live publish failed'),
  );
  // Every partition of the notification queue (the queue depth on /metrics and the readiness check count
  // them all; an envelope's failed notifications go back to its own), on one connection that fails fast
  // (no offline queue) so that a scrape or probe while Redis is down answers at once.
  const partitions = queuePartitions(config.queue);
  const queueConnection =
    bullConnection ??
    createRedis(target, 'worker', {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      retryStrategy: reconnectDelayMs,
    });
  queueConnection.on('error', () => {});
  const queues = partitions.map(({ name, prefix }) => {
    const queue = new Queue<NotificationJob>(name, { ...QUEUE_OPTIONS, prefix, connection: queueConnection });
    queue.on('error', () => {});
    return queue;
  });
  const metrics = createMetrics(
    () => jobCountsOf(queues),
    () => queues,
  );
  // Delivery webhooks: this worker reports what it finds (expired, failed for good) and delivers them.
  const webhookStore = new WebhookStore(redis, config.keyPrefix);
  const webhookTarget = {
    store: webhookStore,
    queue: config.queue,
    redisUrl: config.redisUrl,
    cluster: bullConnection,
    now: () => clock.now(),
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
  // Readiness: with no master holding the replicas asked for, nothing stored is pushed live.
  const replicas =
    config.redisWaitReplicas > 0 ? new ReplicaWaiter(redis, config.redisWaitReplicas, 0) : undefined;
  // Each user's notifications are stored in send order, one at a time (see UserOrder). A store that fails
  // for a moment is retried in its lane (see retryStore); one given up holds the lane's waiting ones too.
  const order = new UserOrder({ holds: isTransientStoreError });
  // Aborted on close: a store being retried gives up at once and its job goes back to BullMQ.
  const closing = new AbortController();

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
    now: () => clock.now(),
  });
  /**
   * Stores and pushes one notification (of its own job or of an envelope, `job`, which `token` locks), in
   * its user's send order.
   */
  async function processOne(
    data: NotificationJob,
    job: Job<NotificationJob | NotificationEnvelope, JobResult>,
    token: string | undefined,
    remember = true,
  ): Promise<JobResult> {
    let result: AppendResult;
    const stopTimer = metrics.duration.startTimer();
    try {
      result = await order.run(
        userKey(data.tenantId ?? DEFAULT_TENANT, data.userId),
        [Date.parse(data.createdAt) || 0, data.seq ?? 0, data.priority ?? DEFAULT_PRIORITY],
        () =>
          retryStore(
            () =>
              processNotification(
                data,
                inbox,
                live,
                remember ? topics : undefined,
                durable,
                // Run before (stalled or retried): maybe by a worker from before routed ids.
                job.attemptsMade > 0 || job.stalledCounter > 0,
              ),
            {
              signal: closing.signal,
              lockMs: config.lockMs,
              ...(token !== undefined
                ? { extendLock: async () => (await job.extendLock(token, config.lockMs)) === 1 }
                : {}),
              onHold: (error) =>
                log.warn(
                  { err: error, notificationId: data.id, userId: data.userId },
                  "store failed: retried here, the user's later notifications waiting",
                ),
            },
          ),
      );
    } catch (error) {
      // A job whose data can never be stored (e.g. an empty userId) fails at once, without retries; so
      // does one whose user's inbox Redis refuses for what it holds (WRONGTYPE): no retry mends it.
      if (error instanceof InboxError && error.code !== InboxErrorCode.UNEXPECTED_REPLY) {
        throw new UnrecoverableError(`${error.code}: ${error.message}`);
      }
      if (isRefusedForItsData(error)) throw new UnrecoverableError((error as Error).message);
      throw error;
    } finally {
      stopTimer();
    }
    // The Web Push fallback waits for its deadline from now, once the notification is stored.
    if (result.outcome === 'appended' || result.outcome === 'already-appended')
      await escalations.schedule(data, result.offset);
    metrics.jobs.inc({ outcome: result.outcome });
    log.debug(
      { notificationId: data.id, userId: data.userId, outcome: result.outcome },
      'notification processed',
    );
    if (result.outcome === 'expired') {
      log.info({ notificationId: data.id }, 'notification expired before delivery');
      await report(
        data,
        { notificationId: data.id, userId: data.userId, at: new Date(clock.now()).toISOString() },
        'notification.expired',
      );
    }
    if (result.outcome === 'cancelled')
      log.info({ notificationId: data.id }, 'notification cancelled before delivery');
    const { unread: _unread, ...jobResult } = result;
    return jobResult;
  }

  /**
   * An envelope: each notification as if it were its own job, side by side (one user's in send order).
   * One that fails is enqueued as a `notify` job of its own (its retries, failure and status are then
   * its own); when that enqueue fails too, the envelope's attempt fails and is retried (what was stored
   * is stored once). Done: the index forgets its notifications.
   */
  async function processEnvelope(
    job: Job<NotificationEnvelope, JobResult>,
    token: string | undefined,
    { queue, envelopeIndex }: { queue: Queue<NotificationJob>; envelopeIndex: string },
  ): Promise<JobResult> {
    const items = notificationsOf(job);
    // The tenants' users are remembered once per envelope (one SADD per tenant), not once per notification.
    const users = new Map<string, Set<string>>();
    for (const item of items) {
      const tenantId = item.tenantId ?? DEFAULT_TENANT;
      if (typeof item.userId !== 'string' || item.userId === '') continue;
      const known = users.get(tenantId) ?? new Set<string>();
      known.add(item.userId);
      users.set(tenantId, known);
    }
    const [settled] = await Promise.all([
      Promise.allSettled(items.map((item) => processOne(item, job, token, false))),
      Promise.all([...users].map(([tenantId, ids]) => topics.tenant(tenantId).remember([...ids]))),
    ]);
    const failed = items.filter((_item, index) => settled[index]?.status === 'rejected');
    if (failed.length > 0) {
      const backoff = typeof job.opts.backoff === 'object' ? job.opts.backoff : undefined;
      const retry = {
        attempts: job.opts.attempts ?? 1,
        backoffMs: backoff?.delay ?? 1000,
        jitter: backoff?.jitter ?? 0.5,
      };
      await queue.addBulk(
        failed.map((item) => ({
          name: NOTIFY_JOB_NAME,
          data: item,
          opts: notificationJobOptions(item, retry),
        })),
      );
      for (const [index, outcome] of settled.entries()) {
        if (outcome.status === 'rejected')
          log.warn(
            { err: outcome.reason, notificationId: items[index]?.id },
            'notification of an envelope failed: enqueued as its own job, to be retried',
          );
      }
    }
    if (items.length > 0) await redis.hdel(envelopeIndex, ...items.map((item) => item.id));
    return { outcome: 'envelope', notifications: items.length, requeued: failed.length };
  }

  /** A job of the partition whose queue is `target.queue`: an envelope, or a notification of its own. */
  const processJob = async (
    job: Job<NotificationJob | NotificationEnvelope, JobResult>,
    token: string | undefined,
    target: { queue: Queue<NotificationJob>; envelopeIndex: string },
  ): Promise<JobResult> => {
    if (job.name === NOTIFY_ENVELOPE_JOB_NAME)
      return processEnvelope(job as Job<NotificationEnvelope, JobResult>, token, target);
    await holdIfEarly(job as Job<NotificationJob>, token, clock.now());
    return processOne(job.data as NotificationJob, job, token);
  };
  const targets = partitions.map((ref, index) => ({
    queue: queues[index] as Queue<NotificationJob>,
    envelopeIndex: envelopeIndexKey(ref),
  }));
  // One BullMQ worker per partition consumed, each with its own `concurrency` and blocking connection.
  const workers = config.partitions.map((partition) => {
    const { name, prefix } = partitions[partition] ?? {
      name: config.queue.name,
      prefix: config.queue.prefix,
    };
    const partitionWorker = new Worker<NotificationJob | NotificationEnvelope, JobResult>(
      name,
      (job, token) => processJob(job, token, targets[partition] ?? (targets[0] as (typeof targets)[number])),
      {
        prefix,
        concurrency: config.concurrency,
        lockDuration: config.lockMs,
        stalledInterval: config.stalledIntervalMs,
        connection: bullConnection ?? { url: config.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
      },
    );
    partitionWorker.on('failed', (job, error) => onFailed(job, error));
    partitionWorker.on('error', connectionErrorLog(log, 'worker error', { prefix }));
    return partitionWorker;
  });
  const [worker] = workers;
  if (worker === undefined) throw new Error('HERALD_WORKER_PARTITIONS chose no partition');
  function onFailed(job: Job<NotificationJob | NotificationEnvelope> | undefined, error: Error): void {
    const final =
      job !== undefined &&
      (job.attemptsMade >= (job.opts.attempts ?? 1) || error instanceof UnrecoverableError);
    // An envelope failed for good (its notifications could not even be enqueued on their own): each of
    // its notifications is failed (its status says so, through the index).
    const notifications = job === undefined ? [] : notificationsOf(job);
    if (final && job !== undefined) {
      for (const data of notifications) {
        void report(
          data,
          {
            notificationId: data.id,
            userId: data.userId,
            // Redis's clock, as every event's (BullMQ's finishedOn is this machine's).
            at: new Date(clock.now()).toISOString(),
            attempts: job.attemptsMade,
            reason: error.message.slice(0, 500),
          },
          'notification.failed',
        );
      }
    }
    metrics.jobs.inc({ outcome: final ? 'failed' : 'retry' });
    log[final ? 'error' : 'warn'](
      {
        err: error,
        notificationIds: notifications.map((data) => data.id),
        attempts: job?.attemptsMade,
        final,
      },
      final
        ? 'notification failed for good: see `pnpm herald failed list`'
        : 'notification attempt failed; will retry',
    );
  }
  await Promise.all(workers.map((partitionWorker) => partitionWorker.waitUntilReady()));
  // The partitions of an earlier HERALD_QUEUE_PARTITIONS that still hold jobs: drained, not lost.
  const leftovers = new Leftovers({
    redis: queueConnection,
    queue: config.queue,
    connection: bullConnection ?? { url: config.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
    concurrency: config.concurrency,
    lockMs: config.lockMs,
    stalledIntervalMs: config.stalledIntervalMs,
    process: (job, ref, queue, token) =>
      processJob(job, token, {
        queue: queue as Queue<NotificationJob>,
        envelopeIndex: envelopeIndexKey(ref),
      }),
    onFailed,
    log,
    checkMs: config.leftoverCheckMs,
  });
  leftovers.start();
  const webhooks = await startWebhookWorker({
    ...webhookTarget,
    settings: config.webhooks,
    log,
    count: (outcome) => metrics.webhooks.inc({ outcome }),
  });
  const fanout = await startFanoutWorker(config, log, metrics);

  return {
    worker,
    workers,
    leftovers,
    inbox,
    metrics,
    // A full Redis still answers PING and reads: the probe's write says whether jobs can move.
    ready: () =>
      Promise.all([
        redis.ping(),
        jobCountsOf(queues, 'wait'),
        checkWritable(queueConnection, config.queue),
        replicas?.available(),
      ]),
    async close() {
      // Waits for active jobs to finish (each is a couple of Redis round trips), takes no new ones; a
      // store being retried fails now, and its job goes back to BullMQ (retried, or stalled and taken
      // by the next worker when Redis does not take the failure either).
      closing.abort();
      // Each waited for until WORKERS_CLOSE_MS after the first: a BullMQ worker whose fetch loop never
      // ends (seen after a Redis Cluster failover: its blocking connection closed, its wait for a job
      // never settled) held the shutdown until the grace ran out, and the process exited 1 or was
      // killed. One left so has its active jobs, if any, back in the queue once their lock expires (the
      // store is idempotent), and its connections are closed below.
      const deadline = performance.now() + WORKERS_CLOSE_MS;
      const closed = async (name: string, closure: Promise<unknown>) => {
        const done = await settleWithin(
          // One that fails is done with: the others, and the connections, still close.
          closure.then(
            () => true,
            (error: unknown) => {
              log.warn({ err: error, worker: name }, 'a BullMQ worker failed to close');
              return true;
            },
          ),
          Math.max(0, deadline - performance.now()),
          false,
        );
        if (!done)
          log.warn(
            { worker: name, waitedMs: WORKERS_CLOSE_MS },
            'a BullMQ worker did not close in time: left',
          );
      };
      await Promise.all([
        ...workers.map((partitionWorker, index) => closed(`partition ${index}`, partitionWorker.close())),
        closed('leftovers', leftovers.close()),
        closed('fan-out', fanout.close()),
      ]);
      await closed('escalations', escalations.close());
      await closed('webhooks', webhooks.close());
      await closed('webhook events', webhookEvents.close());
      await closed('queues', Promise.all(queues.map((queue) => queue.close())));
      clock.stop();
      clearInterval(clockCheck);
      if (queueConnection !== bullConnection) queueConnection.disconnect();
      redis.disconnect();
      bullConnection?.disconnect();
    },
  };
}
