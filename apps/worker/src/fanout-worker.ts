import { REDIS_ROLE_OPTIONS } from '@herald/config';
import { Inbox, Topics } from '@herald/inbox';
import { livePublisher } from '@herald/live';
import { type FanoutJob, fanoutQueueName } from '@herald/protocol';
import { type Job, Worker } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import { type FanoutResult, fanOut, SenderLimiters } from './fanout.js';
import type { WorkerMetrics } from './http.js';

/** The fan-out side of a worker process: its BullMQ worker and its own Redis connections. */
export interface FanoutWorker {
  worker: Worker<FanoutJob, FanoutResult>;
  close(): Promise<void>;
}

/**
 * Takes topic sends and broadcasts from their own queue (`<queue>-fanout`) with their own concurrency
 * (`HERALD_WORKER_FANOUT_CONCURRENCY`, default 2) and their own Redis connection, so that a large
 * fan-out neither takes the slots of single sends nor queues its commands ahead of theirs on one socket:
 * Redis serves the two connections in turn, a chunk (500 appends) at a time at most.
 */
export async function startFanoutWorker(
  config: WorkerConfig,
  log: Logger,
  metrics: WorkerMetrics,
): Promise<FanoutWorker> {
  const options = { maxRetriesPerRequest: null };
  const redis = config.redisClusterNodes
    ? new Cluster(config.redisClusterNodes, { redisOptions: options })
    : new Redis(config.redisUrl, options);
  const bullConnection = config.redisClusterNodes
    ? new Cluster(config.redisClusterNodes, { redisOptions: options })
    : undefined;
  redis.on('error', (error) => log.warn({ err: error }, 'fan-out redis connection error'));
  const live = livePublisher(redis, { key: config.pubsubKey, mode: config.pubsubMode }, (error) =>
    log.warn({ err: error }, 'live publish failed'),
  );
  const context = {
    inbox: new Inbox(redis, config.inbox),
    topics: new Topics(redis, { prefix: config.inbox.prefix }),
    live,
    limiters: new SenderLimiters(redis),
    chunkSize: config.fanout.chunkSize,
  };
  const worker = new Worker<FanoutJob, FanoutResult>(
    fanoutQueueName(config.queue.name),
    async (job: Job<FanoutJob, FanoutResult>, token?: string) => {
      const started = process.hrtime.bigint();
      const result = await fanOut(job, token, context);
      metrics.jobs.inc({ outcome: 'fanned-out' });
      log.info(
        {
          notificationId: job.data.id,
          tenant: job.data.tenantId,
          ...job.data.audience,
          ...result,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
        },
        'fan-out sent',
      );
      return result;
    },
    {
      prefix: config.queue.prefix,
      concurrency: config.fanout.concurrency,
      lockDuration: config.lockMs,
      stalledInterval: config.stalledIntervalMs,
      connection: bullConnection ?? { url: config.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
    },
  );
  worker.on('failed', (job, error) => {
    const final = job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1);
    log[final ? 'error' : 'warn'](
      { err: error, notificationId: job?.id, attempts: job?.attemptsMade, final },
      final ? 'fan-out failed for good' : 'fan-out attempt failed; will resume from its checkpoint',
    );
  });
  worker.on('error', (error) => log.warn({ err: error }, 'fan-out worker error'));
  await worker.waitUntilReady();
  return {
    worker,
    async close() {
      await worker.close();
      redis.disconnect();
      bullConnection?.disconnect();
    },
  };
}
