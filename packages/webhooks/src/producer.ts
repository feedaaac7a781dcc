import { createHash } from 'node:crypto';
import {
  WEBHOOK_JOB_NAME,
  type WebhookEventData,
  type WebhookEventType,
  type WebhookJob,
  webhookQueueName,
} from '@herald/protocol';
import { Queue, type QueueOptions } from 'bullmq';
import type { WebhookStore } from './store.js';

/** How long a tenant's webhook settings are trusted in memory, ms: a change applies within a second. */
export const SUBSCRIPTION_CACHE_MS = 1000;

/** Completed webhook jobs kept: an hour or 10,000, whichever is fewer (as notification jobs). */
const KEEP_COMPLETED = { age: 3600, count: 10_000 } as const;
/**
 * Messages failed for good are kept 7 days (for an operator to look at), then removed as later ones fail:
 * an endpoint that fails often, but never often enough in a row to be parked, would otherwise grow the
 * failed set without end. By age alone: a count would let one tenant's failures push out another's.
 */
const KEEP_FAILED = { age: 7 * 24 * 3600 } as const;

/**
 * The message id (`webhook-id`) of an event: derived from tenant, event, notification and recipient, so
 * that a fact reported twice (a job run again after a crash) is the same message, which BullMQ adds once
 * while its job is kept and a receiver can drop by id. The recipient is part of it because a topic send
 * or broadcast has one notification id for all its recipients: each one's ack or read is a fact of its own.
 *
 * @example
 * ```ts
 * messageId('acme', 'notification.read', 'n-1', 'alice'); // 'msg_3q2+7w…' (stable)
 * ```
 */
export function messageId(
  tenantId: string,
  type: WebhookEventType,
  notificationId: string,
  userId: string,
): string {
  const digest = createHash('sha256')
    .update(`${tenantId}\n${type}\n${notificationId}\n${userId}`)
    .digest('base64url');
  return `msg_${digest.slice(0, 27)}`;
}

/**
 * Where the facts happen (realtime's ack and read, the gateway's read, the worker's failed and expired),
 * this enqueues one durable BullMQ job per event on the webhook queue, for tenants whose webhook asks
 * for it. Nothing is enqueued for a tenant without a webhook (one Redis read per tenant per second).
 *
 * @example
 * ```ts
 * const events = new WebhookEvents(store, { queueName: 'notifications', connection });
 * await events.emit('acme', 'notification.delivered', [{ notificationId: 'n-1', userId: 'alice', at }]);
 * ```
 */
export class WebhookEvents {
  readonly queue: Queue<WebhookJob>;
  readonly #store: WebhookStore;
  readonly #subscriptions = new Map<
    string,
    { events: ReadonlySet<string>; webhook: string | undefined; until: number }
  >();
  /** The clock of the events' `timestamp` and `read`'s `at`: Herald's apps pass Redis's. */
  readonly #now: () => number;

  constructor(
    store: WebhookStore,
    options: {
      queueName: string;
      prefix: string;
      connection: QueueOptions['connection'];
      /**
       * Ms since the epoch now, for the events' times (default `Date.now`). Herald's apps pass Redis's
       * clock, which `delivered`'s `at` comes from: on a realtime server 45 s behind, a read was
       * stamped 45 s before the ack it followed.
       */
      now?: () => number;
    },
  ) {
    this.#store = store;
    this.#now = options.now ?? Date.now;
    this.queue = new Queue<WebhookJob>(webhookQueueName(options.queueName), {
      // No version check, as `@herald/config`'s QUEUE_OPTIONS: its INFO, sent as the queue is built,
      // broke the queue for good when the gateway's fail-fast connection was not ready then.
      skipVersionCheck: true,
      prefix: options.prefix,
      connection: options.connection,
    });
    this.queue.on('error', () => {});
  }

  /** The events `tenantId`'s webhook receives (none without a webhook), cached {@link SUBSCRIPTION_CACHE_MS}. */
  async #subscribed(tenantId: string): Promise<{ events: ReadonlySet<string>; webhook: string | undefined }> {
    const now = Date.now();
    const cached = this.#subscriptions.get(tenantId);
    if (cached !== undefined && cached.until > now) return cached;
    const record = await this.#store.record(tenantId, now);
    const subscription = {
      events: new Set<string>(record?.events ?? []),
      webhook: record?.createdAt || undefined,
      until: now + SUBSCRIPTION_CACHE_MS,
    };
    if (this.#subscriptions.size > 10_000) this.#subscriptions.clear();
    this.#subscriptions.set(tenantId, subscription);
    return subscription;
  }

  /** Enqueues `type` for each of `facts` when `tenantId`'s webhook receives it; answers how many. */
  async emit(tenantId: string, type: WebhookEventType, facts: readonly WebhookEventData[]): Promise<number> {
    if (facts.length === 0) return 0;
    const subscription = await this.#subscribed(tenantId);
    if (!subscription.events.has(type)) return 0;
    // Produced never before it happened: `at` may come from another reading of Redis's clock (a
    // script's TIME) a little ahead of this process's estimate of it.
    const latest = facts.reduce((max, fact) => Math.max(max, Date.parse(fact.at) || 0), 0);
    const timestamp = new Date(Math.max(this.#now(), latest)).toISOString();
    await this.queue.addBulk(
      facts.map((data) => {
        const job: WebhookJob = {
          id: messageId(tenantId, type, data.notificationId, data.userId),
          tenantId,
          payload: { type, timestamp, data },
          ...(subscription.webhook === undefined ? {} : { webhook: subscription.webhook }),
        };
        return {
          name: WEBHOOK_JOB_NAME,
          data: job,
          opts: { jobId: job.id, removeOnComplete: KEEP_COMPLETED, removeOnFail: KEEP_FAILED },
        };
      }),
    );
    return facts.length;
  }

  /** `notification.delivered` for the ids a user's tab acked first (`Inbox.acknowledge`), at `atMs`. */
  delivered(tenantId: string, userId: string, ids: readonly string[], atMs: number): Promise<number> {
    const at = new Date(atMs).toISOString();
    return this.emit(
      tenantId,
      'notification.delivered',
      ids.map((notificationId) => ({ notificationId, userId, at })),
    );
  }

  /**
   * `notification.read` for the ids that went from unread to read (`Inbox.markRead`'s `ids`), at `atMs`
   * (its `readAtMs`: Redis's clock, as `delivered`'s, so a read is never reported before its delivery).
   */
  read(tenantId: string, userId: string, ids: readonly string[], atMs: number): Promise<number> {
    const at = new Date(atMs).toISOString();
    return this.emit(
      tenantId,
      'notification.read',
      ids.map((notificationId) => ({ notificationId, userId, at })),
    );
  }

  /**
   * Enqueues held messages again (after `resume`), each with its message id and attempts so far; a new
   * job id, as the job that held the message may still be kept as completed.
   */
  async resend(jobs: readonly WebhookJob[]): Promise<number> {
    if (jobs.length === 0) return 0;
    const stamp = Date.now().toString(36);
    await this.queue.addBulk(
      jobs.map((job) => ({
        name: WEBHOOK_JOB_NAME,
        data: job,
        opts: { jobId: `${job.id}_${stamp}`, removeOnComplete: KEEP_COMPLETED, removeOnFail: KEEP_FAILED },
      })),
    );
    return jobs.length;
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
