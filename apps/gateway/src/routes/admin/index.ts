import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AdminSnapshot, ErrorResponse, FailedJobs, notificationIdOf, RetriedJob } from '@herald/protocol';
import Type from 'typebox';
import { failedJobs, retryFailed } from '../../admin/failed.js';
import { ErrorCode, HttpError, unavailable } from '../../errors.js';

const ADMIN_ERRORS = { 401: ErrorResponse, 404: ErrorResponse, 503: ErrorResponse };

/**
 * The admin API, for the operator dashboard: behind `HERALD_ADMIN_KEY` (`app.authenticateAdmin`),
 * never a tenant API key. Everything is read from Redis, where every gateway and realtime instance
 * writes its figures once per second.
 */
const adminRoutes: FastifyPluginAsyncTypebox = async (app) => {
  /** `call()`, or a 503 naming `what` when Redis fails or outlives `HERALD_REDIS_TIMEOUT_MS`. */
  const fromRedis = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    try {
      return await app.withRedisTimeout(call());
    } catch (error) {
      throw unavailable(what, error);
    }
  };
  const snapshot = () => fromRedis('Redis', () => app.adminSnapshot());

  app.get(
    '/admin/snapshot',
    {
      onRequest: app.authenticateAdmin,
      schema: {
        summary: 'What the dashboard shows, once (every gateway and realtime instance summed)',
        tags: ['admin'],
        response: { 200: AdminSnapshot, ...ADMIN_ERRORS },
      },
    },
    snapshot,
  );

  // Open streams, ended on shutdown (an SSE answer never finishes by itself).
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const close of open) close();
  });
  app.get(
    '/admin/stream',
    {
      onRequest: app.authenticateAdmin,
      sse: { kind: 'manual', heartbeat: false },
      schema: {
        summary: 'The snapshot pushed every second (Server-Sent Events)',
        description:
          'A `text/event-stream` of `snapshot` events, one per second, each `data` an AdminSnapshot (as `GET /admin/snapshot` answers). The first is sent at once. Read it with `fetch` (it needs the `Authorization` header, which `EventSource` cannot send).',
        tags: ['admin'],
        response: {
          200: {
            description: 'One `event: snapshot` per second, `data: <AdminSnapshot JSON>`.',
            content: { 'text/event-stream': { schema: Type.String() } },
          },
          ...ADMIN_ERRORS,
        },
      },
    },
    async (request, reply) => {
      // Read before the stream opens: a Redis that does not answer is a plain 503.
      const first = await snapshot();
      const sse = reply.sse;
      // HEAD: the stream's headers, and the end (without keepAlive the SSE plugin ends the answer). Node
      // sends a HEAD answer's headers only when it ends, which a stream never does.
      if (request.method === 'HEAD') {
        sse.sendHeaders();
        return;
      }
      sse.keepAlive();
      const send = (data: AdminSnapshot) => {
        if (sse.isConnected) sse.send({ event: 'snapshot', data }).catch(() => {});
      };
      send(first);
      const unsubscribe = app.adminStream.subscribe(send);
      const close = () => sse.close();
      open.add(close);
      sse.onClose(() => {
        unsubscribe();
        open.delete(close);
      });
    },
  );

  app.get(
    '/admin/failed',
    {
      onRequest: app.authenticateAdmin,
      schema: {
        summary: 'Notifications that failed every attempt, newest first',
        tags: ['admin'],
        querystring: Type.Object(
          { limit: Type.Integer({ minimum: 1, maximum: 1000, default: 20 }) },
          { additionalProperties: false },
        ),
        response: { 200: FailedJobs, 400: ErrorResponse, ...ADMIN_ERRORS },
      },
    },
    (request) =>
      fromRedis('The queue (Redis)', () =>
        failedJobs([...app.queues, ...app.earlierQueues()], request.query.limit),
      ),
  );

  app.post(
    '/admin/failed/:id/retry',
    {
      onRequest: app.authenticateAdmin,
      schema: {
        summary: 'Put a failed notification back in the queue',
        description:
          'By its id, or by the id of an envelope (one queue job carrying notifications sent without delay or priority), as `GET /admin/failed` lists it. A notification carried in an envelope has the envelope’s state: `409 HERALD_ERR_NOT_FAILED` with its `state` while it is queued (`waiting`, `delayed`, `active`…); when that envelope failed for good, the envelope is retried (its notifications stored already are stored once). `404` for one in no queue: never sent, or stored already (its tenant’s `GET /notifications/:id` tells its status).',
        tags: ['admin'],
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) }),
        response: { 200: RetriedJob, 409: ErrorResponse, ...ADMIN_ERRORS },
      },
    },
    async (request) => {
      const id = notificationIdOf(request.params.id);
      const outcome = await fromRedis('The queue (Redis)', () =>
        retryFailed([...app.queues, ...app.earlierQueues()], id),
      );
      if (outcome.retried) return { id, status: 'retried' as const };
      if (outcome.state === 'missing') {
        throw new HttpError(
          ErrorCode.NOT_FOUND,
          `Notification ${id} is not in the queue: it was never sent, or a worker has stored it already (its tenant's GET /notifications/${id} tells its status).`,
        );
      }
      const carrier = outcome.envelopeId === undefined ? '' : `, in envelope ${outcome.envelopeId}`;
      throw new HttpError(
        ErrorCode.NOT_FAILED,
        `Notification ${id} is not failed (it is ${outcome.state}${carrier}): nothing to retry.`,
        { extra: { state: outcome.state } },
      );
    },
  );
};

export default adminRoutes;
