import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  BatchAccepted,
  type BatchItemResult,
  BatchRequest,
  ErrorResponse,
  NotifyAccepted,
  NotifyRequest,
} from '@herald/protocol';
import Type from 'typebox';
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '../../idempotency.js';
import { checkPayload, type NotifyItem, sortBatch, sortedBatch, validItems } from './batch.js';

const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: IDEMPOTENCY_KEY_MAX_LENGTH,
      description:
        'Retry safely: the same key and body within 24 h returns the first answer and enqueues nothing.',
    }),
  ),
});

const errors = {
  400: ErrorResponse,
  401: ErrorResponse,
  409: ErrorResponse,
  413: ErrorResponse,
  422: ErrorResponse,
  429: ErrorResponse,
  503: ErrorResponse,
};

/** `POST /notify` and `POST /notify/batch`: authenticate, limit, enqueue durably, answer 202. */
const notifyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/notify',
    {
      onRequest: [app.authenticate, app.notifications.refuseUndurable],
      preValidation: [checkPayload, app.idempotencyCheck],
      config: { rateLimit: app.notifyRateLimit((request) => [request.body as NotifyItem]) },
      schema: {
        summary: 'Send a notification to one user',
        description:
          'Costs one token from the sender (API key) and one from the recipient, in one atomic decision. 202 means the notification is in Redis.',
        headers: IdempotencyHeaders,
        body: NotifyRequest,
        response: { 202: NotifyAccepted, ...errors },
      },
    },
    async (request, reply) => {
      const [id] = await app.notifications.enqueue(request, [request.body]);
      const body = { id: id as string, status: 'queued' as const };
      await app.settleIdempotency(request, { statusCode: 202, body });
      return reply.code(202).send(body);
    },
  );

  app.post(
    '/notify/batch',
    {
      onRequest: [app.authenticate, app.notifications.refuseUndurable],
      preValidation: [app.idempotencyCheck, sortBatch],
      config: { rateLimit: app.notifyRateLimit(validItems) },
      schema: {
        summary: 'Send up to 100 notifications at once',
        description:
          'Each item is validated on its own: an invalid one is rejected alone (its error in `results`), the others are sent. The valid ones cost one token each from the sender and from each recipient, taken all at once: a batch the limits cannot take is refused whole (429) and enqueues nothing.',
        headers: IdempotencyHeaders,
        body: BatchRequest,
        response: { 202: BatchAccepted, ...errors },
      },
    },
    async (request, reply) => {
      const sorted = sortedBatch(request);
      const ids = await app.notifications.enqueue(
        request,
        sorted.valid.map(({ item }) => item),
      );
      const results: BatchItemResult[] = [
        ...sorted.valid.map(({ index }, n) => ({ index, status: 'queued' as const, id: ids[n] as string })),
        ...sorted.rejected,
      ].sort((a, b) => a.index - b.index);
      const body = { accepted: ids.length, rejected: sorted.rejected.length, results };
      await app.settleIdempotency(request, { statusCode: 202, body });
      return reply.code(202).send(body);
    },
  );
};

export default notifyRoutes;
