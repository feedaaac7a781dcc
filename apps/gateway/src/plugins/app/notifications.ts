import { connectionErrorLog, isOutOfMemory, OUT_OF_MEMORY_ADVICE } from '@herald/config';
import {
  NOTIFY_JOB_NAME,
  type NotificationJob,
  type NotifyRequest,
  notificationJobOptions,
} from '@herald/protocol';
import type { JobsOptions } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest, preParsingHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import type { Static } from 'typebox';
import { EnvelopeSenders, Envelopes, Gathering } from '../../envelopes.js';
import {
  ErrorCode,
  enqueueUnsure,
  HttpError,
  neverSent,
  outOfMemory,
  settleWrites,
  unavailable,
} from '../../errors.js';
import { notificationId } from '../../notification-ids.js';
import { checkJobs, JobRefusedError } from '../../queue-jobs.js';

type NotifyItem = Static<typeof NotifyRequest>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's place among those in flight (`track`), when envelopes are on. */
    envelopeSender: { wait(count?: number): void } | undefined;
  }
  interface FastifyInstance {
    notifications: {
      /**
       * Enqueues `items` for `request`'s caller; resolves with their ids once every job is in Redis
       * (and in its AOF with `durability: aof`). Throws a 503 `HttpError` otherwise.
       */
      enqueue(request: FastifyRequest, items: readonly NotifyItem[]): Promise<string[]>;
      /**
       * Route `onRequest` hook (after authentication) of the enqueueing routes: a `503` at once while the
       * queue's master (every partition's) has fewer replicas than `HERALD_REDIS_WAIT_REPLICAS`, before the body is read, a
       * key claimed or a token taken. A client retrying through a failover costs the gateway next to
       * nothing until a replica is back (with three Redis calls per refusal, the retries of 20 s of
       * load starved the gateways on a 2-core machine).
       */
      refuseUndurable(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void;
      /**
       * Route `preParsing` hook of the enqueueing routes: counts the request among those in flight, so
       * that the envelopes being gathered go at once when every request held is waiting for one (see
       * {@link EnvelopeSenders}). It runs after authentication and the limiter's sender precheck (the
       * first `preParsing` hook), so a request refused before its body is read (401, 429) costs no
       * tracking, and before the body is read, so a request still sending it holds the envelopes.
       */
      track: preParsingHookHandler;
      /**
       * Where the notifications of the envelopes linger before their limiter decisions (one Redis
       * server, envelopes on): the `batchSchedule` of the `/notify` limiters (see {@link Gathering}).
       */
      gathering: Gathering | undefined;
      /**
       * With a gathering: marks `request` (tracked) as waiting, its `count` notifications come, for
       * their limiter decision to be gathered (without one it waits from its envelope on).
       */
      waiting(request: FastifyRequest, count: number): void;
    };
  }
}

/** The last time formatted (`toISOString`) and its ms: requests of one ms share one (~1 µs each). */
let isoMs = Number.NaN;
let isoText = '';
function isoTime(ms: number): string {
  if (ms !== isoMs) {
    isoText = new Date(ms).toISOString();
    isoMs = ms;
  }
  return isoText;
}

/** The enqueue service of `POST /notify` and `/notify/batch`: job building, ids, add/addBulk, WAITAOF. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    // Jobs enqueued by this process so far: each job's `seq` (see NotificationJob).
    let enqueued = 0;
    // The limiter batches its decisions (on a Cluster, one script call per tenant: a tenant's buckets
    // share its hash tag): the notifications linger before them, in one gathering for every partition
    // (lingering for each partition's envelope to get its share), and each envelope goes once they are
    // all decided.
    const gathering: Gathering | undefined =
      config.envelopeWindowMs > 0
        ? new Gathering({
            windowMs: config.envelopeWindowMs,
            targetItems: config.envelopeTargetItems,
            partitions: app.queues.length,
            onJoin: () => senders.check(),
            onGo: () => senders.gone(),
          })
        : undefined;
    // One envelope being gathered per partition (an envelope is a job of one queue).
    const envelopes: Envelopes[] | undefined =
      config.envelopeWindowMs > 0
        ? app.queues.map(
            (queue) =>
              new Envelopes(queue, app.queueConnection, {
                windowMs: config.envelopeWindowMs,
                targetItems: config.envelopeTargetItems,
                maxItems: config.envelopeMaxItems,
                retry: { attempts: config.jobAttempts, backoffMs: config.jobBackoffMs, jitter: 0.5 },
                onFlush: (reason) => app.metrics.envelopes.inc({ reason }),
                ...(gathering === undefined ? {} : { gathered: gathering }),
              }),
          )
        : undefined;
    // Gathered, the envelopes go in the turn after their decisions: only the gathering goes early (an
    // envelope sent as its first request is added would leave the others of its gathering behind).
    const senders = new EnvelopeSenders(() => {
      if (gathering !== undefined) gathering.go('idle');
      else for (const envelope of envelopes ?? []) envelope.flush('idle');
    }, config.envelopeTargetItems * app.queues.length);
    app.metrics.envelopeWaiting = () => senders.waiting;
    // A request property, not a WeakMap: set on every accepted request, a WeakMap entry cost more
    // than the rest of the tracking.
    app.decorateRequest('envelopeSender', undefined);
    const track: preParsingHookHandler = (request, reply, payload, done) => {
      if (envelopes !== undefined) request.envelopeSender = senders.enter(reply.raw);
      done(null, payload);
    };
    // Gathered, a request waits from its decision on; else from its envelope on (`enqueue`).
    const waiting = (request: FastifyRequest, count: number) => {
      if (gathering === undefined) return;
      gathering.arrived(count);
      request.envelopeSender?.wait(count);
    };
    // Shutting down: the envelopes being gathered go now (their requests are still waiting for them).
    app.addHook('preClose', async () => {
      gathering?.go('shutdown');
      for (const envelope of envelopes ?? []) envelope.flush('shutdown');
    });
    async function enqueue(request: FastifyRequest, items: readonly NotifyItem[]): Promise<string[]> {
      const identity = request.identity;
      const derivedId = request.idempotency?.derivedId;
      const createdAt = isoTime(app.clock.now());
      const jobs = items.map((item, index) => {
        // With an Idempotency-Key the ids derive from it, so a retry can never enqueue a second copy
        // (BullMQ ignores an add whose job id exists), even if the idempotency record was lost.
        const id = notificationId(item.userId, derivedId, index, items.length);
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
        return { name: NOTIFY_JOB_NAME, data };
      });

      // Each recipient's partition (one user's notifications in one queue, in send order).
      const byPartition = new Map<number, typeof jobs>();
      for (const job of jobs) {
        const partition = app.partitionOf(job.data.tenantId ?? identity.tenantId, job.data.userId);
        const group = byPartition.get(partition) ?? [];
        group.push(job);
        byPartition.set(partition, group);
      }
      // Without delay or priority (which BullMQ keeps exact per job), in the next envelope.
      const enveloped = envelopes !== undefined && jobs.every((job) => immediate(job.data));
      // A job of its own: jobId = notification id, delay, priority, exponential backoff with jitter,
      // failed jobs kept (an envelope's notifications need none of it: built only here).
      const optsOf = (data: NotificationJob): JobsOptions =>
        notificationJobOptions(data, {
          attempts: config.jobAttempts,
          backoffMs: config.jobBackoffMs,
          jitter: 0.5,
        });
      const add = (): Promise<unknown> => {
        if (enveloped)
          return settleWrites(
            [...byPartition].map(
              ([partition, group]) =>
                (envelopes[partition] ?? envelopes[0])?.add(group.map((job) => job.data)) ??
                Promise.resolve(),
            ),
          );
        const own = [...byPartition].map(([partition, group]) => ({
          queue: app.queues[partition] ?? app.queue,
          specs: group.map((job) => ({ ...job, opts: optsOf(job.data) })),
        }));
        // BullMQ's checks of every job of its own before any is sent (an envelope's options were checked
        // once, when its Envelopes started), so that a refusal leaves nothing accepted on any partition.
        for (const { queue, specs } of own) checkJobs(queue, specs);
        return settleWrites(
          own.map(({ queue, specs }) => {
            const [single] = specs;
            return specs.length === 1 && single
              ? queue.add(single.name, single.data, single.opts)
              : queue.addBulk(specs);
          }),
        );
      };
      await addDurably(
        app,
        request,
        () => {
          const added = add();
          if (enveloped) request.envelopeSender?.wait();
          return added;
        },
        [...byPartition.keys()],
      );
      // On the request's one log line (OneLinePerRequest).
      const ids = jobs.map((job) => job.data.id);
      request.notificationIds = ids;
      return ids;
    }
    const refuseUndurable = (
      _request: FastifyRequest,
      _reply: FastifyReply,
      done: (error?: Error) => void,
    ) => {
      // The recipients are not known before the body is read: refused here when no partition could take
      // a job (one master's failover leaves the others' recipients served; `addDurably` checks theirs).
      let refusal: unknown;
      for (const partition of app.queues.keys()) {
        try {
          app.checkDurable([partition]);
          done();
          return;
        } catch (error) {
          refusal ??= error;
        }
      }
      enqueueLog(app).refused(asError(refusal));
      done(unavailable('The queue (its Redis replicas)', refusal));
    };
    app.decorate('notifications', { enqueue, refuseUndurable, track, gathering, waiting });
  },
  {
    name: 'notifications',
    dependencies: ['config', 'redis', 'queue', 'metrics', 'api-keys'],
    fastify: '5.x',
  },
);

/**
 * Per gateway, its warnings of sends that failed in Redis, each one line per cause and 30 s (with the
 * count since), not one per request: `unsure`, an enqueue not confirmed (every send of a gateway whose
 * Redis lacked its replicas had its own line); `refused`, sends refused while a queue partition's master
 * lacks the replicas `HERALD_REDIS_WAIT_REPLICAS` asks for (a third of the traffic refused for 35 s
 * after a Cluster failover, with only 503 request lines at info to show for it).
 */
const enqueueLogs = new WeakMap<
  FastifyInstance,
  Record<'unsure' | 'refused', ReturnType<typeof connectionErrorLog>>
>();

function enqueueLog(
  app: FastifyInstance,
): Record<'unsure' | 'refused', ReturnType<typeof connectionErrorLog>> {
  let logs = enqueueLogs.get(app);
  if (logs === undefined) {
    logs = {
      unsure: connectionErrorLog(
        app.log,
        'enqueue not confirmed: the notification may or may not be in Redis (503, maybeAccepted)',
      ),
      refused: connectionErrorLog(
        app.log,
        'sends refused, nothing accepted: a queue master has fewer replicas in sync than HERALD_REDIS_WAIT_REPLICAS asks for',
      ),
    };
    enqueueLogs.set(app, logs);
  }
  return logs;
}

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/**
 * Runs `add` (BullMQ adds on the queue connection, `app.queueConnection`, to `partitions`) for `request`
 * and waits until the jobs are durable (`HERALD_DURABILITY`, `HERALD_REDIS_WAIT_REPLICAS`). Throws:
 * - a 503 of an enqueue refused (nothing accepted: at once while the queue's master lacks replicas,
 *   when the connection refused the command before sending it, or when Redis refused it for memory);
 * - a 503 of an enqueue unsure (`maybeAccepted`: sent, and Redis failed or did not confirm in time; a
 *   retry with the key is safe), its cause logged as a warning;
 * - a 500 when BullMQ refused a job before sending anything ({@link JobRefusedError}, from `add`'s
 *   {@link checkJobs}): nothing was accepted, and a retry would be refused the same, so no 503 (whose
 *   `Retry-After` would have the client retry forever, with the same Idempotency-Key the same answer
 *   each time). Input the route schemas let through never should be refused: it is a defect of the
 *   gateway, logged at error level with BullMQ's reason for the operator.
 */
export async function addDurably(
  app: FastifyInstance,
  request: FastifyRequest,
  add: () => Promise<unknown>,
  partitions: readonly number[] = [0],
): Promise<void> {
  try {
    app.checkDurable(partitions);
  } catch (error) {
    enqueueLog(app).refused(asError(error));
    throw unavailable('The queue (its Redis replicas)', error);
  }
  const started = process.hrtime.bigint();
  try {
    await app.withRedisTimeout<unknown>(add());
    await app.ensureDurable(partitions);
  } catch (error) {
    if (error instanceof JobRefusedError) {
      request.log.error(
        { err: error, jobId: error.jobId },
        'BullMQ refused a job before sending it: nothing was enqueued (a gateway defect: the route let through what BullMQ does not take)',
      );
      throw new HttpError(
        ErrorCode.INTERNAL,
        'Internal error: nothing was accepted, and a retry would be refused the same. The gateway log has the details.',
        { cause: error },
      );
    }
    // Refused before it was sent: nothing was accepted. A timeout or a dropped connection: unknown.
    if (neverSent(error)) throw unavailable('The queue (Redis)', error);
    if (isOutOfMemory(error)) {
      request.log.warn({ err: error }, `enqueue refused, nothing accepted: ${OUT_OF_MEMORY_ADVICE}`);
      throw outOfMemory(error);
    }
    // On the request's own log: its line carries the request's id.
    enqueueLog(app).unsure(asError(error), request.log);
    throw enqueueUnsure(error, request.idempotency?.derivedId !== undefined);
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
