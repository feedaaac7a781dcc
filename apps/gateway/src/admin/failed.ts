import {
  DEFAULT_TENANT,
  type FailedJobs,
  NOTIFY_ENVELOPE_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
} from '@herald/protocol';
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
