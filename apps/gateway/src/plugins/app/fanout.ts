import { randomUUID } from 'node:crypto';
import { connectionErrorLog, QUEUE_OPTIONS } from '@herald/config';
import { Topics, unroutedId } from '@herald/inbox';
import {
  FANOUT_JOB_NAME,
  type FanoutAudience,
  type FanoutJob,
  fanoutQueueName,
  type NotifySendRequest,
  notificationJobOptions,
} from '@herald/protocol';
import { Queue } from 'bullmq';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { fanoutStatusOf } from '../../fanout-status.js';
import { checkJobs } from '../../queue-jobs.js';
import type { TenantStatus } from '../../status.js';
import { addDurably, optional } from './notifications.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Topics, their subscribers and the tenants' users (`app.topics.tenant(tenantId)`). */
    topics: Topics;
    /** The queue of topic sends and broadcasts (`<queue>-fanout`): one job each, fanned out by the workers. */
    fanoutQueue: Queue<FanoutJob>;
    /** Topic send or broadcast `id` of `tenantId` (with `userId`: that recipient's), or undefined. */
    fanoutStatusOf(tenantId: string, id: string, userId?: string): Promise<TenantStatus | undefined>;
    fanouts: {
      /**
       * Enqueues one topic send or broadcast for `request`'s caller: one job, one id (derived from the
       * `Idempotency-Key` when there is one). Resolves once the job is durable; throws a 503 otherwise.
       */
      enqueue(
        request: FastifyRequest,
        body: Omit<NotifySendRequest, 'userId'>,
        audience: FanoutAudience,
      ): Promise<string>;
    };
  }
}

/** Topic sends and broadcasts: the topics store, the fan-out queue, and its enqueue. */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    app.decorate('topics', new Topics(app.redis, { prefix: config.inbox.prefix }));
    // On the notification queue's connection: `addDurably`'s WAIT and WAITAOF count that connection's
    // writes, and the prefix's hash tag keeps this queue in the same slot on Cluster.
    const queue = new Queue<FanoutJob>(fanoutQueueName(config.queue.name), {
      ...QUEUE_OPTIONS,
      prefix: config.queue.prefix,
      connection: app.queueConnection,
    });
    queue.on('error', connectionErrorLog(app.log, 'fan-out queue connection error'));
    app.decorate('fanoutQueue', queue);
    app.decorate('fanoutStatusOf', (tenantId: string, id: string, userId?: string) =>
      fanoutStatusOf(queue, app.topics, app.inbox, tenantId, id, userId),
    );
    app.addHook('onClose', async () => {
      await queue.close();
    });

    async function enqueue(
      request: FastifyRequest,
      body: Omit<NotifySendRequest, 'userId'>,
      audience: FanoutAudience,
    ): Promise<string> {
      const identity = request.identity;
      const derivedId = request.idempotency?.derivedId;
      // One id for many users: never routed (keys.ts), each recipient's record is under their inbox.
      const id = unroutedId(derivedId ?? randomUUID());
      const { topic: _topic, broadcast: _broadcast, ...fields } = body;
      const sender = app.limits.senderPolicy(identity);
      const data: FanoutJob = {
        id,
        payload: fields.payload,
        createdAt: new Date(app.clock.now()).toISOString(),
        tenantId: identity.tenantId,
        ...(identity.inbox ? { inbox: identity.inbox } : {}),
        ...optional(fields),
        audience,
        charge: {
          keyPrefix: sender.keyPrefix,
          senderId: identity.id,
          capacity: sender.capacity,
          ratePerSecond: sender.ratePerSecond,
          prepaid: 1,
          ...(sender.hashTag === undefined ? {} : { hashTag: sender.hashTag }),
        },
      };
      const opts = notificationJobOptions(data, {
        attempts: config.jobAttempts,
        backoffMs: config.jobBackoffMs,
        jitter: 0.5,
      });
      await addDurably(app, request, () => {
        checkJobs(queue, [{ name: FANOUT_JOB_NAME, data, opts }]);
        return queue.add(FANOUT_JOB_NAME, data, opts);
      });
      // On the request's one line (`request completed`), as a send to one user.
      request.notificationIds = [id];
      request.log.debug({ notificationId: id, tenant: identity.tenantId, ...audience }, 'fan-out queued');
      return id;
    }
    app.decorate('fanouts', { enqueue });
  },
  {
    name: 'fanout',
    dependencies: ['config', 'redis', 'queue', 'metrics', 'api-keys', 'limits', 'inbox', 'notifications'],
    fastify: '5.x',
  },
);
