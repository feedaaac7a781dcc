import type { Inbox, NotificationStatus as StoredStatus } from '@herald/inbox';
import {
  DEFAULT_TENANT,
  envelopeIndexKey,
  NOTIFY_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
  type NotificationStatus,
} from '@herald/protocol';
import type { Job, JobState, Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { couldBeJobId, unlessNoJob } from './queue-jobs.js';

/** The notification queue's partitions and the connection that reads their envelope indexes (theirs). */
export interface NotificationQueue {
  queues: readonly Queue<NotificationJob>[];
  connection: Redis | Cluster;
}

/** A status with the tenant it belongs to (not shown to clients). */
export type TenantStatus = NotificationStatus & { tenantId: string | undefined };

/**
 * Where notification `id` of `tenantId` is; undefined when it is not that tenant's. The inbox is the record of truth once the worker has stored it (delivered,
 * expired, deduplicated; it outlives the job); the BullMQ job tells the rest (waiting, retrying,
 * failed) and the attempts.
 */
export async function statusOf(
  queue: NotificationQueue,
  root: Inbox,
  tenantId: string,
  id: string,
): Promise<TenantStatus | undefined> {
  const inbox = root.tenant(tenantId);
  const [queued, first] = await Promise.all([
    queuedNotification(queue, tenantId, id).then(
      (found) => ({ found }),
      (error: unknown) => ({ error }),
    ),
    inbox.statusById(id),
  ]);
  // A partition that could not answer (see queuedNotification) matters only when the inbox, the record
  // of truth once a worker settled it (or a cancel did), has nothing either.
  if ('error' in queued && !first) throw queued.error;
  let { state, job } = 'found' in queued ? queued.found : { state: 'unknown' as const, job: undefined };
  let stored = first;
  // The worker stores a notification, then drops it from the queue (its envelope index entry, or its
  // job completes): a first inbox read from before the store and a queue read from after the drop see
  // neither, or a finished job without its record. Read the inbox again, after the queue: it has it now.
  if (!stored && (!job || state === 'completed')) {
    stored = await inbox.statusById(id);
    // An envelope item that failed is added as a job of its own before its index entry is dropped (and
    // is not stored): an own-job lookup from before that add and an index read from after the drop both
    // missed it. The queue again, then: it has the job now (and the inbox, if that job is done).
    if (!stored && !job) {
      ({ state, job } = await queuedNotification(queue, tenantId, id));
      if (job && state === 'completed') stored = await inbox.statusById(id);
    }
  }
  if (!job && !stored) return undefined;
  const base = {
    id,
    userId: stored?.userId ?? job?.data.userId ?? '',
    tenantId,
    attempts: job?.attemptsMade ?? 1,
    // From the job, or once it is gone from the inbox entry; absent (not "", which is no date-time) when
    // neither has it (a notification never stored, or trimmed from the inbox, after its job went).
    ...withCreatedAt(job?.data.createdAt || stored?.createdAt),
    ...(stored?.escalation ? { escalation: stored.escalation } : {}),
  };
  if (stored?.state === 'cancelled') {
    return {
      ...base,
      attempts: job?.attemptsMade ?? 0,
      status: 'cancelled',
      ...(stored.cancelledAt ? { cancelledAt: stored.cancelledAt } : {}),
    };
  }
  const fromInbox = stored ? await inboxStatus(inbox, base, stored) : undefined;
  if (fromInbox) return fromInbox;
  if (state === 'failed' && job) return { ...base, status: 'failed', ...failure(job) };
  return { ...base, status: 'queued' };
}

/** `{ createdAt }` when known, else nothing: absent rather than "" or undefined. */
function withCreatedAt(createdAt: string | undefined): { createdAt?: string } {
  return createdAt ? { createdAt } : {};
}

/**
 * `id`'s BullMQ state, then its job (if it is a `name` job of `tenantId`'s) with `record()`, what is
 * kept of it beside the queue. State first, then the job: the job read is at least as new as the state,
 * so a `failed` state never comes with the attempts of an earlier try. An id that can be no job (one of
 * the queue's own keys, see {@link couldBeJobId}) is not looked up, and a job of another name (an
 * envelope, a hash of the queue that is no job) is none: unknown either way.
 */
export async function readJob<Data extends { tenantId?: string | undefined }, Kept>(
  queue: Queue<Data>,
  name: string,
  tenantId: string,
  id: string,
  record: () => Promise<Kept>,
): Promise<{ state: JobState | 'unknown'; job: Job<Data> | undefined; record: Kept }> {
  if (!couldBeJobId(id)) return { state: 'unknown', job: undefined, record: await record() };
  const state = await unlessNoJob(queue.getJobState(id), 'unknown');
  const [found, kept] = await Promise.all([unlessNoJob(queue.getJob(id), undefined), record()]);
  if (found && found.name !== name) return { state: 'unknown', job: undefined, record: kept };
  return { state, job: tenantsJob(found, tenantId), record: kept };
}

/** What status and cancel read of the job that carries a notification: its own job, or its envelope. */
export interface QueuedNotification {
  data: NotificationJob;
  attemptsMade: number;
  finishedOn?: number | undefined;
  failedReason?: string | undefined;
  /** Takes it out of the queue: its own job removed; nothing for an envelope (the worker finds the marker). */
  remove(): Promise<void>;
}

/**
 * Where notification `id` of `tenantId` is queued, and its job: its own `notify` job, or the envelope
 * that carries it (from the envelope index, as the notification it carries, with the envelope's state and
 * attempts), in whichever partition holds it (all are asked at once: the id does not say the recipient).
 * State before job, as in {@link readJob}. Undefined job when it is in none, or not `tenantId`'s.
 */
export async function queuedNotification(
  { queues, connection }: NotificationQueue,
  tenantId: string,
  id: string,
): Promise<{ state: JobState | 'unknown'; job: QueuedNotification | undefined }> {
  // A partition that cannot answer (on a Cluster, its queue's slot moving: TRYAGAIN until the move
  // ends) does not hold up a notification another partition has; found nowhere else, it may be there,
  // so its error is thrown rather than "unknown".
  const settled = await Promise.allSettled(queues.map((queue) => queuedIn(queue, connection, tenantId, id)));
  const found = settled.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  const known =
    found.find((candidate) => candidate.job !== undefined) ??
    found.find((candidate) => candidate.state !== 'unknown');
  if (known) return known;
  const failure = settled.find((outcome) => outcome.status === 'rejected');
  if (failure) throw failure.reason;
  return { state: 'unknown', job: undefined };
}

/** {@link queuedNotification} in one partition. */
async function queuedIn(
  queue: Queue<NotificationJob>,
  connection: Redis | Cluster,
  tenantId: string,
  id: string,
): Promise<{ state: JobState | 'unknown'; job: QueuedNotification | undefined }> {
  const own = await readJob(queue, NOTIFY_JOB_NAME, tenantId, id, async () => undefined);
  if (own.job !== undefined || own.state !== 'unknown') {
    return {
      state: own.state,
      job: own.job && { ...pick(own.job), remove: () => own.job?.remove() ?? Promise.resolve() },
    };
  }
  const envelopeId = await connection.hget(
    envelopeIndexKey({ prefix: queue.opts.prefix ?? 'bull', name: queue.name }),
    id,
  );
  if (envelopeId === null) return { state: 'unknown', job: undefined };
  const envelopes = queue as unknown as Queue<NotificationEnvelope>;
  const state = await envelopes.getJobState(envelopeId);
  const envelope = await envelopes.getJob(envelopeId);
  const item = envelope?.data.items?.find((candidate) => candidate.id === id);
  const job = tenantsJob(item && { data: item }, tenantId);
  if (envelope === undefined || job === undefined) return { state: 'unknown', job: undefined };
  return {
    state,
    job: { ...pick({ ...envelope, data: job.data }), remove: async () => undefined },
  };
}

function pick(job: {
  data: NotificationJob;
  attemptsMade: number;
  finishedOn?: number | undefined;
  failedReason?: string | undefined;
}): Omit<QueuedNotification, 'remove'> {
  return {
    data: job.data,
    attemptsMade: job.attemptsMade,
    finishedOn: job.finishedOn,
    failedReason: job.failedReason,
  };
}

/** `job` when it is `tenantId`'s: BullMQ job ids are one namespace, so another tenant's job is absent. */
export function tenantsJob<J extends { data: { tenantId?: string | undefined } }>(
  job: J | undefined,
  tenantId: string,
): J | undefined {
  return job && (job.data.tenantId ?? DEFAULT_TENANT) === tenantId ? job : undefined;
}

/** When and why a failed job failed, as its status says it (each only when known). */
export function failure(job: { finishedOn?: number | undefined; failedReason?: string | undefined }): {
  failedAt?: string;
  failedReason?: string;
} {
  return {
    ...(job.finishedOn ? { failedAt: new Date(job.finishedOn).toISOString() } : {}),
    ...(job.failedReason ? { failedReason: job.failedReason } : {}),
  };
}

/**
 * Cancels notification `id` of `tenantId` if no worker has stored it yet (`DELETE /notifications/:id`):
 * the inbox marker first (a worker appending it afterwards stores nothing), then its job leaves the
 * queue (one already running cannot be removed: it finds the marker). Answers whether it is cancelled
 * (now or before) with its status; undefined when it is not that tenant's.
 */
export async function cancel(
  queue: NotificationQueue,
  root: Inbox,
  tenantId: string,
  id: string,
): Promise<{ cancelled: boolean; status: TenantStatus } | undefined> {
  const { state, job } = await queuedNotification(queue, tenantId, id);
  // Failed for good or processed: final already (a processed one has its marker; the inbox answers it).
  if (job && state !== 'failed' && state !== 'completed') {
    const { state: marker } = await root
      .tenant(tenantId)
      .cancel(job.data.userId, id, job.data.createdAt ?? '');
    if (marker === 'cancelled') await job.remove().catch(() => undefined);
  }
  const status = await statusOf(queue, root, tenantId, id);
  return status && { cancelled: status.status === 'cancelled', status };
}

/**
 * What a recipient's inbox says of a notification, when it settles it (`expired`, `muted` by the user,
 * collapsed into another by `dedupeKey`, or `delivered`); undefined while it is stored and not acked.
 */
export async function inboxStatus(
  inbox: Inbox,
  base: Omit<TenantStatus, 'status'>,
  stored: StoredStatus,
): Promise<TenantStatus | undefined> {
  if (stored.state === 'expired') return { ...base, status: 'expired' };
  if (stored.state === 'muted')
    return { ...base, status: 'muted', ...(stored.muted ? { muted: stored.muted } : {}) };
  if (stored.state === 'deduplicated' && stored.duplicateOf) {
    const original = await inbox.statusById(stored.duplicateOf);
    return {
      ...base,
      status: original?.delivered ? 'delivered' : 'queued',
      duplicateOf: stored.duplicateOf,
      ...(original?.deliveredAt ? { deliveredAt: original.deliveredAt } : {}),
    };
  }
  if (stored.delivered) {
    return {
      ...base,
      status: 'delivered',
      ...(stored.deliveredAt ? { deliveredAt: stored.deliveredAt } : {}),
    };
  }
  return undefined;
}
