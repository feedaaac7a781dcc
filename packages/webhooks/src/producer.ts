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
 * The message id (`webhook-id`) of an event: derived from tenant, event and notification, so that a fact
 * reported twice (a job run again after a crash) is the same message, which BullMQ adds once while its
 * job is kept and a receiver can drop by id.
 *
 * @example
 * ```ts
 * messageId('acme', 'notification.read', 'n-1'); // 'msg_3q2+7w…' (stable)
 * ```
 */
export function messageId(tenantId: string, type: WebhookEventType, notificationId: string): string {
  const digest = createHash('sha256').update(`${tenantId}\n${type}\n${notificationId}`).digest('base64url');
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
  readonly #subscriptions = new Map<string, { events: ReadonlySet<string>; until: number }>();

  constructor(
    store: WebhookStore,
    options: { queueName: string; prefix: string; connection: QueueOptions['connection'] },
  ) {
    this.#store = store;
    this.queue = new Queue<WebhookJob>(webhookQueueName(options.queueName), {
      prefix: options.prefix,
      connection: options.connection,
    });
    this.queue.on('error', () => {});
  }

  /** The events `tenantId`'s webhook receives (none without a webhook), cached {@link SUBSCRIPTION_CACHE_MS}. */
  async #subscribed(tenantId: string): Promise<ReadonlySet<string>> {
    const now = Date.now();
    const cached = this.#subscriptions.get(tenantId);
    if (cached !== undefined && cached.until > now) return cached.events;
    const record = await this.#store.record(tenantId, now);
    const events = new Set<string>(record?.events ?? []);
    if (this.#subscriptions.size > 10_000) this.#subscriptions.clear();
    this.#subscriptions.set(tenantId, { events, until: now + SUBSCRIPTION_CACHE_MS });
    return events;
  }

  /** Enqueues `type` for each of `facts` when `tenantId`'s webhook receives it; answers how many. */
  async emit(tenantId: string, type: WebhookEventType, facts: readonly WebhookEventData[]): Promise<number> {
    if (facts.length === 0 || !(await this.#subscribed(tenantId)).has(type)) return 0;
    const timestamp = new Date().toISOString();
    await this.queue.addBulk(
      facts.map((data) => {
        const job: WebhookJob = {
          id: messageId(tenantId, type, data.notificationId),
          tenantId,
          payload: { type, timestamp, data },
        };
        return {
          name: WEBHOOK_JOB_NAME,
          data: job,
          opts: { jobId: job.id, removeOnComplete: KEEP_COMPLETED, removeOnFail: false },
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

  /** `notification.read` for the ids that went from unread to read (`Inbox.markRead`'s `ids`), now. */
  read(tenantId: string, userId: string, ids: readonly string[]): Promise<number> {
    const at = new Date().toISOString();
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
        opts: { jobId: `${job.id}_${stamp}`, removeOnComplete: KEEP_COMPLETED, removeOnFail: false },
      })),
    );
    return jobs.length;
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
