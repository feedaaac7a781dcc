import { connectionErrorLog, createRedis, REDIS_ROLE_OPTIONS } from '@herald/config';
import { type FanoutJob, fanoutQueueName } from '@herald/protocol';
import { Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import type { FanoutResult } from './fanout.js';
import type { FanoutThreadData } from './fanout-processor.js';
import type { WorkerMetrics } from './http.js';

/** The fan-out side of a worker process: its BullMQ worker, whose jobs run in threads of their own. */
export interface FanoutWorker {
  worker: Worker<FanoutJob, FanoutResult>;
  close(): Promise<void>;
}

// The built processor: worker threads load JavaScript (tests that run this file from src use dist's).
const PROCESSOR = new URL(
  import.meta.url.endsWith('.ts') ? '../dist/fanout-processor.js' : './fanout-processor.js',
  import.meta.url,
);

/**
 * Takes topic sends and broadcasts from their own queue (`<queue>-fanout`) with their own concurrency
 * (`HERALD_WORKER_FANOUT_CONCURRENCY`, default 2), each run in a worker thread with its own Redis
 * connection (`fanout-processor.ts`). A 100,000-recipient fan-out keeps its thread busy; the main
 * thread, where single sends run, is not held by it, and the OS shares the CPU between the two.
 */
export async function startFanoutWorker(
  config: WorkerConfig,
  log: Logger,
  metrics: WorkerMetrics,
): Promise<FanoutWorker> {
  const bullConnection = config.redisClusterNodes
    ? createRedis({ url: config.redisUrl, clusterNodes: config.redisClusterNodes }, 'worker')
    : undefined;
  const workerData: FanoutThreadData = { config };
  const worker = new Worker<FanoutJob, FanoutResult>(fanoutQueueName(config.queue.name), PROCESSOR, {
    prefix: config.queue.prefix,
    concurrency: config.fanout.concurrency,
    lockDuration: config.lockMs,
    stalledInterval: config.stalledIntervalMs,
    useWorkerThreads: true,
    workerThreadsOptions: { workerData },
    connection: bullConnection ?? { url: config.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
  });
  worker.on('completed', (job, result) => {
    metrics.jobs.inc({ outcome: 'fanned-out' });
    log.info(
      {
        notificationId: job.id,
        tenant: job.data.tenantId,
        ...job.data.audience,
        ...result,
        ms: job.finishedOn && job.processedOn ? job.finishedOn - job.processedOn : undefined,
      },
      'fan-out sent',
    );
  });
  worker.on('failed', (job, error) => {
    const final = job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1);
    log[final ? 'error' : 'warn'](
      { err: error, notificationId: job?.id, attempts: job?.attemptsMade, final },
      final ? 'fan-out failed for good' : 'fan-out attempt failed; will resume from its checkpoint',
    );
  });
  worker.on('error', connectionErrorLog(log, 'fan-out worker error'));
  await worker.waitUntilReady();
  return {
    worker,
    async close() {
      // A fan-out can take minutes: it stops after its batch in flight and goes back to the queue, and the
      // next worker resumes it from its checkpoint (instead of this one holding the shutdown).
      worker.cancelAllJobs('shutdown');
      await worker.close();
      bullConnection?.disconnect();
    },
  };
}
