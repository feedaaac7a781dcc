import { randomUUID } from 'node:crypto';
import {
  NOTIFY_JOB_NAME,
  type NotificationJob,
  type NotifyRequest,
  notificationJobOptions,
} from '@herald/protocol';
import type { JobsOptions } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Static } from 'typebox';
import { Envelopes } from '../../envelopes.js';
import { enqueueUnsure, neverSent, unavailable } from '../../errors.js';

type NotifyItem = Static<typeof NotifyRequest>;

declare module 'fastify' {
  interface FastifyInstance {
    notifications: {
      /**
       * Enqueues `items` for `request`'s caller; resolves with their ids once every job is in Redis
       * (and in its AOF with `durability: aof`). Throws a 503 `HttpError` otherwise.
       */
      enqueue(request: FastifyRequest, items: readonly NotifyItem[]): Promise<string[]>;
      /**
       * Route `onRequest` hook (after authentication) of the enqueueing routes: a `503` at once while the
       * queue's master has fewer replicas than `HERALD_REDIS_WAIT_REPLICAS`, before the body is read, a
       * key claimed or a token taken. A client retrying through a failover costs the gateway next to
       * nothing until a replica is back (with three Redis calls per refusal, the retries of 20 s of
       * load starved the gateways on a 2-core machine).
       */
      refuseUndurable(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void;
    };
  }
}

/** The enqueue service of `POST /notify` and `/notify/batch`: job building, ids, add/addBulk, WAITAOF. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    // Jobs enqueued by this process so far: each job's `seq` (see NotificationJob).
    let enqueued = 0;
    const envelopes =
      config.envelopeWindowMs > 0
        ? new Envelopes(app.queue, app.queueConnection, {
            windowMs: config.envelopeWindowMs,
            maxItems: config.envelopeMaxItems,
            retry: { attempts: config.jobAttempts, backoffMs: config.jobBackoffMs, jitter: 0.5 },
          })
        : undefined;
    // Shutting down: the envelope being gathered goes now (its requests are still waiting for it).
    app.addHook('preClose', async () => envelopes?.flush());
    async function enqueue(request: FastifyRequest, items: readonly NotifyItem[]): Promise<string[]> {
      const identity = request.identity;
      const derivedId = request.idempotency?.derivedId;
      const createdAt = new Date().toISOString();
      const jobs = items.map((item, index) => {
        // With an Idempotency-Key the ids derive from it, so a retry can never enqueue a second copy
        // (BullMQ ignores an add whose job id exists), even if the idempotency record was lost.
        const id = derivedId ? (items.length === 1 ? derivedId : `${derivedId}-${index}`) : randomUUID();
        const data: NotificationJob = {
          id,
          userId: item.userId,
          payload: item.payload,
          createdAt,
          seq: enqueued++,
          tenantId: identity.tenantId,
          ...(identity.inbox ? { inbox: identity.inbox } : {}),
          ...optional(item),
        };
        // jobId = notification id, delay, priority, exponential backoff with jitter, failed jobs kept.
        const opts: JobsOptions = notificationJobOptions(data, {
          attempts: config.jobAttempts,
          backoffMs: config.jobBackoffMs,
          jitter: 0.5,
        });
        return { name: NOTIFY_JOB_NAME, data, opts };
      });

      const [single] = jobs;
      // Without delay or priority (which BullMQ keeps exact per job), in the next envelope.
      const enveloped = envelopes !== undefined && jobs.every((job) => immediate(job.data));
      await addDurably(
        app,
        () =>
          enveloped
            ? envelopes.add(jobs.map((job) => job.data))
            : jobs.length === 1 && single
              ? app.queue.add(single.name, single.data, single.opts)
              : app.queue.addBulk(jobs),
        derivedId !== undefined,
      );
      // On the request's one log line (OneLinePerRequest).
      request.notificationIds = jobs.map((job) => job.data.id);
      return jobs.map((job) => job.data.id);
    }
    const refuseUndurable = (
      _request: FastifyRequest,
      _reply: FastifyReply,
      done: (error?: Error) => void,
    ) => {
      try {
        app.checkDurable();
      } catch (error) {
        done(unavailable('The queue (its Redis replicas)', error));
        return;
      }
      done();
    };
    app.decorate('notifications', { enqueue, refuseUndurable });
  },
  {
    name: 'notifications',
    dependencies: ['config', 'redis', 'queue', 'metrics', 'api-keys'],
    fastify: '5.x',
  },
);

/**
 * Runs `add` (a BullMQ add on the queue connection, `app.queueConnection`) and waits until the job is
 * durable (`HERALD_DURABILITY`, `HERALD_REDIS_WAIT_REPLICAS`); throws the 503 of an enqueue refused
 * (nothing accepted: also at once while the queue's master lacks replicas) or unsure (`maybeAccepted`:
 * a retry with the key is safe).
 */
export async function addDurably(
  app: FastifyInstance,
  add: () => Promise<unknown>,
  hasIdempotencyKey: boolean,
): Promise<void> {
  try {
    app.checkDurable();
  } catch (error) {
    throw unavailable('The queue (its Redis replicas)', error);
  }
  const started = process.hrtime.bigint();
  try {
    await app.withRedisTimeout<unknown>(add());
    await app.ensureDurable();
  } catch (error) {
    // Refused before it was sent: nothing was accepted. A timeout or a dropped connection: unknown.
    if (neverSent(error)) throw unavailable('The queue (Redis)', error);
    throw enqueueUnsure(error, hasIdempotencyKey);
  }
  app.metrics.enqueueSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
}

/** True when `job` waits for nothing (no delay, no priority): it may ride in an envelope. */
function immediate(job: NotificationJob): boolean {
  return (job.delayMs === undefined || job.delayMs <= 0) && job.priority === undefined;
}

/** The optional fields of `item` a job carries. */
export function optional(item: Omit<NotifyItem, 'userId'>): Partial<NotificationJob> {
  const options: Partial<NotificationJob> = {};
  if (item.priority !== undefined) options.priority = item.priority;
  if (item.delayMs !== undefined) options.delayMs = item.delayMs;
  if (item.ttlMs !== undefined) options.ttlMs = item.ttlMs;
  if (item.dedupeKey !== undefined) options.dedupeKey = item.dedupeKey;
  if (item.topic !== undefined) options.topic = item.topic;
  if (item.type !== undefined) options.type = item.type;
  if (item.escalateAfterMs !== undefined) options.escalateAfterMs = item.escalateAfterMs;
  return options;
}
