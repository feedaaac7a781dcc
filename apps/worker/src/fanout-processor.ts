// The fan-out processor, run by BullMQ in worker threads of its own (`useWorkerThreads`): a fan-out's
// event loop, CPU and Redis connection are never those of single sends, which the main thread keeps.
import { workerData } from 'node:worker_threads';
import { createRedis, RedisClock } from '@herald/config';
import { Inbox, Topics } from '@herald/inbox';
import { livePublisher } from '@herald/live';
import type { FanoutJob } from '@herald/protocol';
import { WebhookEvents, WebhookStore } from '@herald/webhooks';
import type { SandboxedJob } from 'bullmq';
import type { WorkerConfig } from './config.js';
import { type FanoutContext, type FanoutResult, fanOut, SenderLimiters } from './fanout.js';
import { replicaDurability } from './store.js';

/** What the thread is started with (`workerThreadsOptions.workerData`). */
export interface FanoutThreadData {
  config: WorkerConfig;
}

const { config } = workerData as FanoutThreadData;
const redis = createRedis({ url: config.redisUrl, clusterNodes: config.redisClusterNodes }, 'worker');
// Reconnects by itself; a command that fails fails the job, which resumes from its checkpoint.
redis.on('error', () => {});
// Redis's clock, which a delayed topic send is due by (this machine's may be off).
const clock = new RedisClock(redis);
await clock.sync();
clock.start();
// Recipients the notification expired or failed for are reported to the tenant's webhook, as a single
// send's expiry and failure are.
const webhookEvents = new WebhookEvents(new WebhookStore(redis, config.keyPrefix), {
  queueName: config.queue.name,
  prefix: config.queue.prefix,
  connection: redis,
});
const context: FanoutContext = {
  inbox: new Inbox(redis, config.inbox),
  topics: new Topics(redis, { prefix: config.inbox.prefix }),
  // Fire-and-forget, as for single sends: a missed live message is read from the inbox.
  live: livePublisher(redis, { key: config.pubsubKey, mode: config.pubsubMode }, () => {}),
  limiters: new SenderLimiters(redis),
  chunkSize: config.fanout.chunkSize,
  durable: replicaDurability(redis, config.redisWaitReplicas),
  now: () => clock.now(),
  expired: (tenantId, notificationId, userIds) => {
    const at = new Date(clock.now()).toISOString();
    return webhookEvents.emit(
      tenantId,
      'notification.expired',
      userIds.map((userId) => ({ notificationId, userId, at })),
    );
  },
  // Recipients whose inbox Redis refused: failed for good, as a single send's last attempt is.
  failed: (tenantId, notificationId, failures, attempts) => {
    const at = new Date(clock.now()).toISOString();
    return webhookEvents.emit(
      tenantId,
      'notification.failed',
      [...failures].map(([userId, reason]) => ({
        notificationId,
        userId,
        at,
        attempts,
        reason: reason.slice(0, 500),
      })),
    );
  },
};

export default async function processFanout(
  job: SandboxedJob<FanoutJob, FanoutResult>,
  token?: string,
  signal?: AbortSignal,
): Promise<FanoutResult> {
  return fanOut(job, token, context, signal);
}
