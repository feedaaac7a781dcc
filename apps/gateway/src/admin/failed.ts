import { DEFAULT_TENANT, type FailedJobs, type NotificationJob } from '@herald/protocol';
import type { Queue } from 'bullmq';

/**
 * The failed set of the notification queue (BullMQ's `failed` jobs: notifications that could not be
 * delivered after all their attempts): its size and its newest `limit` jobs. The admin API and the
 * operator CLI (`herald failed list`) read it through this.
 *
 * @example
 * ```ts
 * const { count, jobs } = await failedJobs(queue, 20);
 * ```
 */
export async function failedJobs(queue: Queue<NotificationJob>, limit: number): Promise<FailedJobs> {
  const [count, jobs] = await Promise.all([queue.getFailedCount(), queue.getFailed(0, limit - 1)]);
  return {
    count,
    // A job can vanish between the two reads (retried meanwhile): getFailed answers a hole for it.
    jobs: jobs
      .filter((job) => job !== undefined && job !== null)
      .map((job) => ({
        id: String(job.id),
        tenantId: job.data.tenantId ?? DEFAULT_TENANT,
        userId: job.data.userId,
        attempts: job.attemptsMade,
        failedAt: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
        reason: (job.failedReason ?? '').replace(/\s+/g, ' '),
      })),
  };
}

/** What {@link retryFailed} did: `retried`, or why not (`missing`, or the state the job is in). */
export type RetryOutcome = { retried: true } | { retried: false; state: string | 'missing' };

/**
 * Puts the failed notification `id` back in the queue (a worker delivers it again); a job that is not
 * failed (queued, delivered, retried already) or not there is left alone.
 *
 * @example
 * ```ts
 * const outcome = await retryFailed(queue, 'n-1'); // { retried: true }
 * ```
 */
export async function retryFailed(queue: Queue<NotificationJob>, id: string): Promise<RetryOutcome> {
  const job = await queue.getJob(id);
  if (!job) return { retried: false, state: 'missing' };
  const state = await job.getState();
  if (state !== 'failed') return { retried: false, state };
  await job.retry('failed');
  return { retried: true };
}
