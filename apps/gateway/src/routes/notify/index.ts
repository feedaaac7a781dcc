import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  BatchAccepted,
  type BatchItemResult,
  BatchRequest,
  ErrorResponse,
  NotifyAccepted,
  NotifySendRequest,
} from '@herald/protocol';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '../../idempotency.js';
import { isFanoutSend } from '../../plugins/app/limits.js';
import { BATCH_ITEMS, checkPayload, type NotifyItem, sortBatch, sortedBatch, validItems } from './batch.js';
import { checkEscalation } from './escalation.js';
import { checkTarget } from './target.js';

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

/**
 * `preValidation` of `POST /notify`: the payload (depth, size), the target, the escalation, in that
 * order, in one synchronous hook (three async ones cost a promise and a hook turn each per request).
 */
function checkSend(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
  try {
    checkPayload(request);
    checkTarget(request);
    checkEscalation(request);
  } catch (error) {
    done(error as Error);
    return;
  }
  done();
}

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
      preParsing: [app.notifications.track],
      preValidation: [checkSend, app.idempotencyCheck],
      config: {
        rateLimit: app.notifyRateLimit((request) =>
          isFanoutSend(request.body) ? [] : [request.body as NotifyItem],
        ),
      },
      schema: {
        summary: 'Send a notification to one user, a topic, or every user of the tenant',
        description:
          'To one user (`userId`): costs one token from the sender (API key) and one from the recipient, in one atomic decision. To a topic (`topic` without `userId`) or to every user of the tenant (`broadcast: true`): one id, one job, fanned out by the workers in chunks to every recipient’s inbox; it costs the sender one token per recipient (the first now, the rest as each chunk goes out: a sender out of tokens has its fan-out paused until it has them), and no recipient’s own limit. `GET /notifications/:id` counts the recipients reached. 202 means the notification is in Redis.',
        headers: IdempotencyHeaders,
        body: NotifySendRequest,
        response: { 202: NotifyAccepted, ...errors },
      },
    },
    async (request, reply) => {
      const send = request.body;
      const [id] =
        send.userId === undefined
          ? [
              await app.fanouts.enqueue(
                request,
                send,
                send.topic ? { topic: send.topic } : { broadcast: true },
              ),
            ]
          : await app.notifications.enqueue(request, [{ ...send, userId: send.userId }]);
      const body = { id: id as string, status: 'queued' as const };
      await app.settleIdempotency(request, { statusCode: 202, body });
      return reply.code(202).send(body);
    },
  );

  app.post(
    '/notify/batch',
    {
      onRequest: [app.authenticate, app.notifications.refuseUndurable],
      preParsing: [app.notifications.track],
      preValidation: [app.idempotencyCheck, sortBatch],
      config: { rateLimit: app.notifyRateLimit(validItems), jsonItems: BATCH_ITEMS },
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
