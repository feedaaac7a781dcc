import {
  DEFAULT_TENANT,
  envelopeIndexKey,
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

/**
 * What {@link retryFailed} did: `retried`, or why not (`missing`, or the state it is in); `envelopeId`
 * when the notification is carried in an envelope (a send without delay or priority), whose state it is
 * and which is what was retried.
 */
export type RetryOutcome =
  | { retried: true; envelopeId?: string }
  | { retried: false; state: string | 'missing'; envelopeId?: string };

/** Job `id` of one of `queues`: a notification's own, or an envelope (retried by its own id too). */
async function jobOf(queues: readonly Queue<NotificationJob>[], id: string) {
  const found = await Promise.all(queues.map((queue) => unlessNoJob(queue.getJob(id), undefined)));
  return found.find(
    (candidate) => candidate?.name === NOTIFY_JOB_NAME || candidate?.name === NOTIFY_ENVELOPE_JOB_NAME,
  );
}

/**
 * The envelope that carries notification `id` while it is queued: its partition's envelope index (the
 * gateway writes it before the envelope, the worker drops it once the envelope is done) names it.
 */
async function envelopeCarrying(queues: readonly Queue<NotificationJob>[], id: string) {
  const found = await Promise.all(
    queues.map(async (queue) => {
      const index = envelopeIndexKey({ prefix: queue.opts.prefix ?? 'bull', name: queue.name });
      const envelopeId = await (await queue.getBackend().client).hget(index, id);
      if (envelopeId === null || !couldBeJobId(envelopeId)) return undefined;
      const envelope = await unlessNoJob(queue.getJob(envelopeId), undefined);
      const items = (envelope?.data as NotificationEnvelope | undefined)?.items ?? [];
      return envelope?.name === NOTIFY_ENVELOPE_JOB_NAME && items.some((item) => item.id === id)
        ? envelope
        : undefined;
    }),
  );
  return found.find((envelope) => envelope !== undefined);
}

/**
 * Puts the failed notification `id` back in its queue (a worker delivers it again), whichever partition
 * holds it; a job that is not failed (queued, delivered, retried already) or not there is left alone.
 * A notification without delay or priority rides in an envelope, not in a job of its own: the envelope
 * that carries it (from the envelope indexes of every partition) says its state, and is what is retried
 * when it failed for good (its other notifications with it; those stored already are stored once, as
 * with `herald failed retry <envelope id>`). Once a worker has stored it, it is in no queue structure:
 * `missing` (its tenant's status says it; the admin has no tenant to read an inbox by).
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
  let job = await jobOf(queues, id);
  let envelopeId: string | undefined;
  if (job === undefined) {
    const envelope = await envelopeCarrying(queues, id);
    envelopeId = envelope?.id;
    // Neither: the worker may have re-added it as a job of its own (an envelope item that failed), then
    // dropped it from the index, between the two reads. Its own job again, then.
    job = envelope ?? (await jobOf(queues, id));
  }
  if (!job) return { retried: false, state: 'missing' };
  const carrier = envelopeId === undefined ? {} : { envelopeId };
  const state = await job.getState();
  // Every Herald job has a priority (DEFAULT_PRIORITY): BullMQ's `prioritized` is where it waits.
  if (state !== 'failed')
    return { retried: false, state: state === 'prioritized' ? 'waiting' : state, ...carrier };
  await job.retry('failed');
  return { retried: true, ...carrier };
}
