import { createRedis, REDIS_ROLE_OPTIONS } from '@herald/config';
import type { AckResult, ReadResult } from '@herald/inbox';
import { WebhookEvents, WebhookStore } from '@herald/webhooks';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RealtimeConfig } from './config.js';

/** What realtime reports to delivery webhooks: first acks (`delivered`) and reads, in the background. */
export interface RealtimeWebhookEvents {
  delivered(tenantId: string, userId: string, acked: AckResult): void;
  read(tenantId: string, userId: string, read: Pick<ReadResult, 'ids' | 'readAtMs'>): void;
  close(): Promise<void>;
}

/**
 * The webhook events of this realtime server, on their own BullMQ connection (patient, like a worker's:
 * an event enqueued while Redis restarts is sent when it is back). An event that cannot be enqueued is
 * logged; the ack or read it reports has happened and is answered as usual.
 */
export function realtimeWebhookEvents(
  config: RealtimeConfig,
  redis: Redis | Cluster,
  log: Logger,
  now: () => number,
): RealtimeWebhookEvents {
  const cluster = config.redisClusterNodes
    ? createRedis({ url: config.redisUrl, clusterNodes: config.redisClusterNodes }, 'worker')
    : undefined;
  const events = new WebhookEvents(new WebhookStore(redis, config.keyPrefix), {
    queueName: config.queue.name,
    prefix: config.queue.prefix,
    connection: cluster ?? { url: config.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
    now,
  });
  const failed = (tenantId: string, type: string) => (error: unknown) =>
    log.warn({ err: error, tenantId, type }, 'webhook event not enqueued');
  return {
    delivered(tenantId, userId, acked) {
      if (acked.ids.length === 0) return;
      events.delivered(tenantId, userId, acked.ids, acked.deliveredAtMs).catch(failed(tenantId, 'delivered'));
    },
    read(tenantId, userId, { ids, readAtMs }) {
      if (ids.length === 0) return;
      events.read(tenantId, userId, ids, readAtMs).catch(failed(tenantId, 'read'));
    },
    async close() {
      await events.close();
      cluster?.disconnect();
    },
  };
}
