import { connectionErrorLog, QUEUE_OPTIONS, REDIS_ROLE_OPTIONS } from '@herald/config';
import type { Inbox } from '@herald/inbox';
import { DEFAULT_TENANT, type EscalationStatus, type NotificationJob } from '@herald/protocol';
import {
  ESCALATE_JOB_NAME,
  type EscalationJob,
  EscalationRecords,
  escalationQueueName,
  type PushSettings,
  PushSubscriptions,
  pushMessage,
  sendPush,
} from '@herald/push';
import { type Job, Queue, Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { holdFor, untilDueMs } from './due.js';
import type { WorkerMetrics } from './http.js';
import { TenantShares } from './tenant-shares.js';

/**
 * Attempts of an escalation whose push service answers 429/5xx or not at all, and the first backoff
 * (doubling): 6 attempts over about a minute (2 + 4 + 8 + 16 + 32 s). The last attempt records what it
 * reached (`failed` counts the rest): an escalation never fails for good.
 */
const ESCALATE_ATTEMPTS = 6;
const ESCALATE_BACKOFF_MS = 2000;
/** Escalations sent at once per worker process (each is a few HTTPS requests). */
const ESCALATE_CONCURRENCY = 20;
/**
 * Escalations of one tenant sent at once per worker process: a push endpoint is any URL a user token
 * registers, and one that never answers holds a slot for `HERALD_PUSH_TIMEOUT_MS`; a tenant's others
 * wait in the delayed set (not in a slot), as a webhook endpoint's do, so that its hung push services
 * never take every slot from the other tenants.
 */
const ESCALATE_TENANT_CONCURRENCY = 4;

/** The worker's Web Push escalations: scheduling when a notification is stored, and sending when due. */
export interface Escalations {
  /** After a notification with `escalateAfterMs` is stored: records `scheduled`, adds the delayed job. */
  schedule(job: NotificationJob, offset: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the escalation queue's worker. A job is due `escalateAfterMs` after its notification was
 * stored; then, unless a tab acked it (the marker's `deliveredAt`, which the first ack writes) or it was
 * settled already (a run again after a crash), it is sent to each of the user's push subscriptions;
 * gone ones (404/410) are removed. The outcome goes into the notification's marker, where
 * `GET /notifications/:id` reads it.
 */
export async function startEscalations(options: {
  redis: Redis | Cluster;
  inbox: Inbox;
  push: PushSettings;
  pushTimeoutMs: number;
  queue: { name: string; prefix: string };
  redisUrl: string;
  cluster: Redis | Cluster | undefined;
  log: Logger;
  /** `herald_worker_escalations_total{outcome}` and `herald_worker_pushes_total{outcome}`. */
  metrics: Pick<WorkerMetrics, 'escalations' | 'pushes'>;
  /**
   * Redis's clock: the job's `timestamp` and the `dueAt` recorded, and when a job is due (a job handed
   * over early by this machine's clock, or another worker's, goes back for the rest).
   */
  now: () => number;
}): Promise<Escalations> {
  const { redis, inbox, push, log, metrics } = options;
  const records = new EscalationRecords(redis);
  const store = new PushSubscriptions(redis, inbox.prefix);
  const name = escalationQueueName(options.queue.name);
  const connection = options.cluster ?? { url: options.redisUrl, ...REDIS_ROLE_OPTIONS.worker };
  const queue = new Queue<EscalationJob>(name, {
    ...QUEUE_OPTIONS,
    prefix: options.queue.prefix,
    connection,
  });
  queue.on('error', connectionErrorLog(log, 'escalation queue error'));
  // The marker that exists (a routed id stored by a worker from before routed ids has it under the user's
  // keys).
  const markerOf = (data: Pick<EscalationJob, 'tenantId' | 'userId' | 'id'>) =>
    inbox.tenant(data.tenantId).markerKey(data.userId, data.id);

  const shares = new TenantShares(ESCALATE_TENANT_CONCURRENCY);

  async function fire(job: Job<EscalationJob>, token?: string): Promise<EscalationStatus> {
    // A retry's backoff is BullMQ's own; only the first run waits for the due time.
    if (job.attemptsMade === 0)
      await holdFor(job, token, untilDueMs(job.timestamp + (job.opts.delay ?? 0), options.now()));
    return shares.run(job, token, job.data.tenantId, () => escalate(job));
  }

  async function escalate(job: Job<EscalationJob>): Promise<EscalationStatus> {
    const marker = await markerOf(job.data);
    const facts = await records.facts(marker);
    const now = () => new Date().toISOString();
    // Cancelled, expired, deduplicated, or its records expired: there is nothing to escalate.
    if (facts.state !== 'inbox') return { state: 'skipped', reason: 'not-stored' };
    // Settled by an earlier run, or by an ack that cancelled it: nothing more to do.
    if (facts.escalation && facts.escalation.state !== 'scheduled') return facts.escalation;
    if (facts.deliveredAtMs !== undefined) {
      return settle(marker, { state: 'acked', at: new Date(facts.deliveredAtMs).toISOString() });
    }
    if (!push.enabled || push.vapid === undefined) {
      return settle(marker, { state: 'skipped', reason: 'push-off', at: now() });
    }
    const subscriptions = await store.list(job.data.tenantId, job.data.userId);
    const done = new Set(job.data.done ?? []);
    const todo = subscriptions.filter((subscription) => !done.has(subscription.endpoint));
    if (subscriptions.length === 0 && done.size === 0) {
      return settle(marker, { state: 'skipped', reason: 'no-subscriptions', at: now() });
    }
    let sent = job.data.sent ?? 0;
    let failed = job.data.failed ?? 0;
    const again: string[] = [];
    const vapid = push.vapid;
    await Promise.all(
      todo.map(async (subscription) => {
        const outcome = await sendPush(subscription, job.data.message, vapid, {
          allowPrivate: push.allowPrivate,
          timeoutMs: options.pushTimeoutMs,
        });
        metrics.pushes.inc({ outcome: outcome.kind });
        const context = { notificationId: job.data.id, endpoint: new URL(subscription.endpoint).origin };
        if (outcome.kind === 'retry') {
          again.push(subscription.endpoint);
          log.info({ ...context, status: outcome.status, reason: outcome.reason }, 'push: will retry');
          return;
        }
        done.add(subscription.endpoint);
        if (outcome.kind === 'sent') {
          sent += 1;
          return;
        }
        failed += 1;
        if (outcome.kind === 'gone') {
          await store.remove(job.data.tenantId, job.data.userId, subscription.endpoint);
          log.info({ ...context, status: outcome.status }, 'push subscription gone: removed');
        } else {
          log.warn({ ...context, status: outcome.status, reason: outcome.reason }, 'push refused');
        }
      }),
    );
    const last = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    if (again.length > 0 && !last) {
      // What went through stays done: the retry (BullMQ's backoff) sends only to the others.
      await job.updateData({ ...job.data, done: [...done], sent, failed });
      throw new Error(`push service unavailable for ${again.length} subscription(s): will retry`);
    }
    return settle(marker, { state: 'pushed', at: now(), sent, failed: failed + again.length });
  }

  async function settle(marker: string, record: EscalationStatus): Promise<EscalationStatus> {
    await records.settle(marker, record);
    return record;
  }

  const worker = new Worker<EscalationJob, EscalationStatus>(name, fire, {
    prefix: options.queue.prefix,
    concurrency: ESCALATE_CONCURRENCY,
    connection,
  });
  worker.on('error', connectionErrorLog(log, 'escalation worker error'));
  worker.on('completed', (job, result) => {
    metrics.escalations.inc({ outcome: result.state });
    log.info({ notificationId: job.data.id, escalation: result }, 'escalation settled');
  });
  await worker.waitUntilReady();

  return {
    async schedule(job, offset) {
      if (job.escalateAfterMs === undefined) return;
      const data: EscalationJob = {
        id: job.id,
        tenantId: job.tenantId ?? DEFAULT_TENANT,
        userId: job.userId,
        message: pushMessage({
          id: job.id,
          offset,
          userId: job.userId,
          createdAt: job.createdAt,
          payload: job.payload,
          ...(job.topic !== undefined ? { topic: job.topic } : {}),
          ...(job.type !== undefined ? { type: job.type } : {}),
        }),
      };
      const at = options.now();
      await records.scheduled(await markerOf(data), at + job.escalateAfterMs);
      // jobId = notification id: a notification job that runs again adds nothing (BullMQ ignores it).
      await queue.add(ESCALATE_JOB_NAME, data, {
        jobId: job.id,
        timestamp: at,
        delay: job.escalateAfterMs,
        attempts: ESCALATE_ATTEMPTS,
        backoff: { type: 'exponential', delay: ESCALATE_BACKOFF_MS, jitter: 0.5 },
        removeOnComplete: { age: 3600, count: 10_000 },
        removeOnFail: { age: 24 * 3600 },
      });
    },
    async close() {
      await worker.close();
      await queue.close();
    },
  };
}
