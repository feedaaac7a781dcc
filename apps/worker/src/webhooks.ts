import { connectionErrorLog, REDIS_ROLE_OPTIONS } from '@herald/config';
import { type WebhookJob, webhookQueueName } from '@herald/protocol';
import {
  type DeliveryOutcome,
  deliverWebhook,
  WebhookEvents,
  type WebhookStore,
  type WebhookWorkerSettings,
} from '@herald/webhooks';
import { DelayedError, type Job, UnrecoverableError, Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { TenantShares } from './tenant-shares.js';

/** A worker's delivery of webhooks: its own BullMQ worker on the webhook queue. */
export interface WebhookWorker {
  worker: Worker<WebhookJob, DeliveryOutcome>;
  close(): Promise<void>;
}

/**
 * Starts the webhook delivery worker: `concurrency` POSTs at once in all, at most `endpointConcurrency`
 * of them to one tenant's endpoint (the others wait in BullMQ's delayed set, not in a worker slot). A
 * failed attempt waits in the delayed set too (exponential backoff), so a failing endpoint holds no slot
 * between its attempts, and after `parkAfter` failures in a row it gets none at all.
 */
export async function startWebhookWorker(options: {
  store: WebhookStore;
  queue: { name: string; prefix: string };
  redisUrl: string;
  /** The Cluster connection on Redis Cluster (else one is made from `redisUrl`). */
  cluster: Redis | Cluster | undefined;
  settings: WebhookWorkerSettings;
  /** Redis's clock: the `webhook-timestamp` of each attempt. */
  now: () => number;
  log: Logger;
  /** `herald_worker_webhooks_total{outcome}`. */
  count: (outcome: string) => void;
}): Promise<WebhookWorker> {
  const { store, settings, log, count } = options;
  const shares = new TenantShares(settings.endpointConcurrency);
  const worker = new Worker<WebhookJob, DeliveryOutcome>(
    webhookQueueName(options.queue.name),
    async (job: Job<WebhookJob, DeliveryOutcome>, token?: string) => {
      const { tenantId } = job.data;
      const result = await shares.run(
        job,
        token,
        tenantId,
        () => deliverWebhook(job.data, store, settings, options.now),
        () => count('busy'),
      );
      const context = { tenantId, webhookId: job.data.id, type: job.data.payload.type };
      count(
        result.outcome === 'no-webhook' || result.outcome === 'not-subscribed' ? 'dropped' : result.outcome,
      );
      if (result.outcome === 'retry') {
        const attempts = (job.data.attempts ?? 0) + 1;
        log.info(
          { ...context, attempts, error: result.error, retryInMs: result.delayMs },
          'webhook attempt failed; will retry',
        );
        await job.updateData({ ...job.data, attempts });
        await job.moveToDelayed(Date.now() + result.delayMs, token);
        throw new DelayedError();
      }
      if (result.outcome === 'failed') {
        log.warn({ ...context, error: result.error }, 'webhook message failed every attempt');
        throw new UnrecoverableError(result.error);
      }
      if (result.outcome === 'held') log.warn(context, 'webhook endpoint parked: message held until resume');
      else log.debug({ ...context, outcome: result.outcome }, 'webhook processed');
      return result;
    },
    {
      prefix: options.queue.prefix,
      concurrency: settings.concurrency,
      connection: options.cluster ?? { url: options.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
    },
  );
  worker.on('error', connectionErrorLog(log, 'webhook worker error'));
  await worker.waitUntilReady();
  return {
    worker,
    close: () => worker.close(),
  };
}

/** The worker's own producer of `notification.failed` and `notification.expired` events. */
export function workerWebhookEvents(options: {
  store: WebhookStore;
  queue: { name: string; prefix: string };
  redisUrl: string;
  /** The Cluster connection on Redis Cluster (else one is made from `redisUrl`). */
  cluster: Redis | Cluster | undefined;
  /** Redis's clock: the events' `timestamp`. */
  now: () => number;
}): WebhookEvents {
  return new WebhookEvents(options.store, {
    queueName: options.queue.name,
    prefix: options.queue.prefix,
    connection: options.cluster ?? { url: options.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
    now: options.now,
  });
}
