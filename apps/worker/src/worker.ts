import {
  NOTIFICATION_EVENT,
  type NotificationEvent,
  type NotificationJob,
  type ServerToClientEvents,
  userRoom,
} from '@herald/protocol';
import { Emitter } from '@socket.io/redis-emitter';
import { type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';

/** A running notification worker. */
export interface NotificationWorker {
  worker: Worker<NotificationJob>;
  close(): Promise<void>;
}

/**
 * Starts a BullMQ worker that pushes each notification to the Socket.IO room of its user through
 * Redis pub/sub, so that whichever realtime instance holds the user's sockets delivers it.
 */
export async function startWorker(config: WorkerConfig, log: Logger): Promise<NotificationWorker> {
  const publisher = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
  publisher.on('error', (error) => log.warn({ err: error }, 'publisher connection error'));
  const emitter = new Emitter<ServerToClientEvents>(publisher, { key: config.pubsubKey });

  const worker = new Worker<NotificationJob>(
    config.queue.name,
    async (job: Job<NotificationJob>) => {
      const { id, userId, payload, createdAt } = job.data;
      const event: NotificationEvent = { id, userId, payload, createdAt };
      emitter.to(userRoom(userId)).emit(NOTIFICATION_EVENT, event);
      log.debug({ notificationId: id, userId }, 'notification pushed');
    },
    {
      prefix: config.queue.prefix,
      concurrency: config.concurrency,
      // Workers wait for Redis rather than fail: BullMQ requires maxRetriesPerRequest: null.
      connection: { url: config.redisUrl, maxRetriesPerRequest: null },
    },
  );
  worker.on('failed', (job, error) => {
    log.warn({ err: error, notificationId: job?.id, attempts: job?.attemptsMade }, 'notification failed');
  });
  worker.on('error', (error) => log.warn({ err: error }, 'worker error'));
  await worker.waitUntilReady();

  return {
    worker,
    async close() {
      await worker.close();
      publisher.disconnect();
    },
  };
}
