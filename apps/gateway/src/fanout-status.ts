import type { Inbox, Topics } from '@herald/inbox';
import { FANOUT_JOB_NAME, type FanoutJob } from '@herald/protocol';
import type { Queue } from 'bullmq';
import { failure, inboxStatus, readJob, type TenantStatus } from './status.js';

/**
 * Where topic send or broadcast `id` of `tenantId` is; undefined when it is none of that tenant's. Its
 * record (counts, cursor, audience) is the record of truth once the worker has started it; the BullMQ
 * job tells the rest (waiting, delayed for the sender's tokens, failed). With `userId`: that recipient's
 * own status (`delivered` once one of their clients acked it); undefined when they were not one of its
 * recipients (`sent`), or are not in its audience (not reached yet).
 */
export async function fanoutStatusOf(
  queue: Queue<FanoutJob>,
  topicsRoot: Topics,
  inboxRoot: Inbox,
  tenantId: string,
  id: string,
  userId?: string,
): Promise<TenantStatus | undefined> {
  const topics = topicsRoot.tenant(tenantId);
  const { state, job, record } = await readJob(queue, FANOUT_JOB_NAME, tenantId, id, () => topics.fanout(id));
  if (!job && !record) return undefined;
  const audience = record?.audience ?? job?.data.audience ?? { broadcast: true };
  const base = {
    id,
    tenantId,
    attempts: job?.attemptsMade ?? 1,
    ...(job?.data.createdAt ? { createdAt: job.data.createdAt } : {}),
    ...('topic' in audience ? { topic: audience.topic } : { broadcast: true as const }),
  };
  if (userId !== undefined) {
    const inbox = inboxRoot.tenant(tenantId);
    const stored = await inbox.status(userId, id);
    // Its inbox refused it (the fan-out went on without it): failed for good, with why.
    const reason = stored ? undefined : record?.failures.get(userId);
    if (reason !== undefined) return { ...base, userId, status: 'failed', failedReason: reason };
    if (!stored && record?.state === 'sent') return undefined;
    // Not reached yet: queued only for a user of its audience (one who joins before their page is
    // reached gets it too); anyone else, a typo among them, would wait for ever.
    if (!stored && !(await topics.includes(audience, userId))) return undefined;
    const own = { ...base, userId };
    return (stored && (await inboxStatus(inbox, own, stored))) ?? { ...own, status: 'queued' };
  }
  const recipients = record
    ? {
        total: record.total,
        reached: record.reached,
        expired: record.expired,
        deduplicated: record.deduplicated,
        muted: record.muted,
        failed: record.failed,
      }
    : { total: await topics.size(audience), reached: 0, expired: 0, deduplicated: 0, muted: 0, failed: 0 };
  if (record?.state === 'sent') {
    return {
      ...base,
      status: 'sent',
      recipients,
      ...(record.sentAtMs ? { sentAt: new Date(record.sentAtMs).toISOString() } : {}),
    };
  }
  if (state === 'failed' && job) return { ...base, status: 'failed', recipients, ...failure(job) };
  return { ...base, status: 'queued', recipients };
}
