import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  ErrorResponse,
  NOTIFY_JOB_NAME,
  type NotificationJob,
  NotifyAccepted,
  NotifyRequest,
} from '@herald/protocol';
import { ErrorCode, HttpError, unavailable } from '../errors.js';

/** `POST /notify`: authenticate, take a token from the recipient's bucket, enqueue durably, answer 202. */
export const notifyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/notify',
    {
      onRequest: app.authenticate,
      schema: {
        summary: 'Send a notification to one user',
        body: NotifyRequest,
        response: { 202: NotifyAccepted, '4xx': ErrorResponse, 503: ErrorResponse },
      },
    },
    async (request, reply) => {
      const { userId, payload } = request.body;

      let decision: Awaited<ReturnType<typeof app.limiter.consume>>;
      try {
        decision = await app.limiter.consume(userId);
      } catch (error) {
        throw unavailable('The rate limiter (Redis)', error);
      }
      if (!decision.allowed) {
        throw new HttpError(429, ErrorCode.RATE_LIMITED, 'Rate limit exceeded', {
          headers: { 'Retry-After': String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000))) },
          extra: { retryAfterMs: decision.retryAfterMs },
        });
      }

      const job: NotificationJob = { id: randomUUID(), userId, payload, createdAt: new Date().toISOString() };
      try {
        // Resolves only once Redis has the job: a 202 is never sent for a job that is not there.
        await app.queue.add(NOTIFY_JOB_NAME, job, { jobId: job.id });
      } catch (error) {
        throw unavailable('The queue (Redis)', error);
      }
      request.log.info({ notificationId: job.id }, 'notification queued');
      return reply.code(202).send({ id: job.id, status: 'queued' });
    },
  );
};
