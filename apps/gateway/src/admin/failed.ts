import {
  DEFAULT_TENANT,
  type FailedJobs,
  NOTIFY_ENVELOPE_JOB_NAME,
  NOTIFY_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
} from '@herald/protocol';
import type { Queue } from 'bullmq';
import { couldBeJobId, unlessNoJob } from '../queue-jobs.js';

/**
 * The failed set of the notification queue (BullMQ's `failed` jobs of every partition: notifications that
 * could not be delivered after all their attempts): its size and its newest `limit` jobs, newest first
 * across partitions. The admin API and the operator CLI (`herald failed list`) read it through this.
 *
 * @example
 * ```ts
 * const { count, jobs } = await failedJobs(app.queues, 20);
 * ```
 */
export async function failedJobs(
  queues: readonly Queue<NotificationJob>[],
  limit: number,
): Promise<FailedJobs> {
  const partitions = await Promise.all(
    queues.map((queue) => Promise.all([queue.getFailedCount(), queue.getFailed(0, limit - 1)])),
  );
  const newest = partitions
    .flatMap(([, jobs]) => jobs)
    // A job can vanish between the two reads (retried meanwhile): getFailed answers a hole for it.
    .filter((job) => job !== undefined && job !== null)
    .sort((a, b) => (b.finishedOn ?? 0) - (a.finishedOn ?? 0))
    .slice(0, limit);
  return {
    count: partitions.reduce((sum, [count]) => sum + count, 0),
    jobs: newest.map((job) => ({
      id: String(job.id),
      ...who(job),
      attempts: job.attemptsMade,
      failedAt: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
      reason: (job.failedReason ?? '').replace(/\s+/g, ' '),
    })),
  };
}

/**
 * The tenant and user of a failed job. An envelope (failed for good only when even enqueueing its failed
 * notifications on their own failed every attempt) names its first notification's and how many it
 * carries; `herald failed retry <envelope id>` retries them all (those stored already are stored once).
 */
function who(job: { name: string; data: NotificationJob }): { tenantId: string; userId: string } {
  if (job.name !== NOTIFY_ENVELOPE_JOB_NAME) {
    return { tenantId: job.data.tenantId ?? DEFAULT_TENANT, userId: job.data.userId };
  }
  const items = (job.data as unknown as NotificationEnvelope).items ?? [];
  const first = items[0];
  const more = items.length > 1 ? ` (and ${items.length - 1} more in this envelope)` : '';
  return { tenantId: first?.tenantId ?? DEFAULT_TENANT, userId: `${first?.userId ?? ''}${more}` };
}

/** What {@link retryFailed} did: `retried`, or why not (`missing`, or the state the job is in). */
export type RetryOutcome = { retried: true } | { retried: false; state: string | 'missing' };

/**
 * Puts the failed notification `id` back in its queue (a worker delivers it again), whichever partition
 * holds it; a job that is not failed (queued, delivered, retried already) or not there is left alone.
 *
 * @example
 * ```ts
 * const outcome = await retryFailed(app.queues, 'n-1'); // { retried: true }
 * ```
 */
export async function retryFailed(
  queues: readonly Queue<NotificationJob>[],
  id: string,
): Promise<RetryOutcome> {
  // An id that can be no job names none of the queue's own keys (see `couldBeJobId`); a hash of the
  // queue that is no notification's nor an envelope's job is none either.
  if (!couldBeJobId(id)) return { retried: false, state: 'missing' };
  const found = await Promise.all(queues.map((queue) => unlessNoJob(queue.getJob(id), undefined)));
  const job = found.find(
    (candidate) => candidate?.name === NOTIFY_JOB_NAME || candidate?.name === NOTIFY_ENVELOPE_JOB_NAME,
  );
  if (!job) return { retried: false, state: 'missing' };
  const state = await job.getState();
  if (state !== 'failed') return { retried: false, state };
  await job.retry('failed');
  return { retried: true };
}
