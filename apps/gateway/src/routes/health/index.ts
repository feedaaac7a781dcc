import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { checkWritable, credentialsRefused } from '@herald/config';
import { exposition } from '@herald/config/metrics';
import { notReadyMessage } from '@herald/config/operations';
import { ErrorResponse } from '@herald/protocol';
import Type from 'typebox';
import { ErrorCode, HttpError } from '../../errors.js';

const Ok = Type.Object({ status: Type.Literal('ok') });

/** Liveness, readiness and Prometheus metrics. */
const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/healthz',
    {
      schema: {
        summary:
          'Liveness: the process serves (never asks Redis: a Redis blip must not restart every gateway)',
        tags: ['operations'],
        response: { 200: Ok },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        summary:
          "Readiness: Redis and the queue answer, Redis takes writes (not out of memory), some queue partition's master has the replicas of HERALD_REDIS_WAIT_REPLICAS, and the apps of this deployment agree on their shared settings; take the instance out of rotation otherwise",
        tags: ['operations'],
        response: { 200: Ok, 503: ErrorResponse },
      },
    },
    async () => {
      // Redis refusing REDIS_URL's password: said as such, not as a Redis that does not answer.
      const refused = credentialsRefused(app.redis) ?? credentialsRefused(app.queueConnection);
      if (refused)
        throw new HttpError(ErrorCode.UNAVAILABLE, `Not ready: ${refused.message}.`, {
          headers: { 'Retry-After': '1' },
        });
      try {
        // The queue has its own connection: a count proves it answers; a full Redis still answers
        // both, and the probe's write says whether it takes sends.
        await app.withRedisTimeout(
          Promise.all([
            app.redis.ping(),
            app.queue.count(),
            checkWritable(app.queueConnection, app.config.queue),
            app.durableReady(),
          ]),
        );
      } catch (error) {
        throw new HttpError(ErrorCode.UNAVAILABLE, notReadyMessage(error), {
          headers: { 'Retry-After': '1' },
          cause: error,
        });
      }
      const mismatches = await app.withRedisTimeout(app.fingerprint.mismatches()).catch(() => []);
      if (mismatches.length > 0) {
        throw new HttpError(
          ErrorCode.DEPLOYMENT_MISMATCH,
          `Not ready: the apps of this deployment disagree (${mismatches.join('; ')}); give every app the same settings.`,
          { extra: { mismatches } },
        );
      }
      return { status: 'ok' as const };
    },
  );

  app.get(
    '/metrics',
    { schema: { summary: 'Prometheus metrics', tags: ['operations'], hide: false } },
    async (_request, reply) => {
      const { contentType, body } = await exposition(app.metrics.registry);
      return reply.type(contentType).send(body);
    },
  );
};

export default healthRoutes;
