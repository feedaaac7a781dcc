import type { NotificationJob, NotificationStatus } from '@herald/protocol';
import type { Queue } from 'bullmq';

/** A status with the tenant it belongs to (not shown to clients). */
export type TenantStatus = NotificationStatus & { tenantId: string | undefined };

/** Looks a notification up in the queue: the job carries its state, attempts and timestamps. */
export async function statusFromQueue(
  queue: Queue<NotificationJob>,
  id: string,
): Promise<TenantStatus | undefined> {
  const job = await queue.getJob(id);
  if (!job) return undefined;
  const state = await job.getState();
  const returned = job.returnvalue as { status?: string; deliveredAt?: string } | null | undefined;
  const base = {
    id,
    userId: job.data.userId,
    tenantId: job.data.tenantId,
    attempts: job.attemptsMade,
    createdAt: job.data.createdAt,
  };
  if (returned?.status === 'expired') return { ...base, status: 'expired' };
  if (state === 'failed') {
    return {
      ...base,
      status: 'failed',
      ...(job.finishedOn ? { failedAt: new Date(job.finishedOn).toISOString() } : {}),
      ...(job.failedReason ? { failedReason: job.failedReason } : {}),
    };
  }
  return { ...base, status: 'queued' };
}
