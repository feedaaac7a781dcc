import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  BatchAccepted,
  BatchRequest,
  ErrorResponse,
  NOTIFY_JOB_NAME,
  type NotificationJob,
  NotifyAccepted,
  NotifyRequest,
  PAYLOAD_MAX_BYTES,
} from '@herald/protocol';
import type { JobsOptions } from 'bullmq';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type, { type Static } from 'typebox';
import type { ApiKeyIdentity } from '../api-keys.js';
import { ErrorCode, HttpError, unavailable } from '../errors.js';
import { IDEMPOTENCY_KEY_MAX_LENGTH, IdempotencyStore } from '../idempotency.js';

type NotifyItem = Static<typeof NotifyRequest>;

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
export const notifyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/notify',
    {
      onRequest: app.authenticate,
      schema: {
        summary: 'Send a notification to one user',
        description:
          'Costs one token from the sender (API key) and one from the recipient. 202 means the notification is in Redis.',
        headers: IdempotencyHeaders,
        body: NotifyRequest,
        response: { 202: NotifyAccepted, ...errors },
      },
    },
    async (request, reply) => {
      checkPayloadSize(request.body, 'body.payload');
      return withIdempotency(request, reply, async (derivedId) => {
        const [id] = await accept(request, reply, [request.body], derivedId);
        return { statusCode: 202, body: { id: id as string, status: 'queued' as const } };
      });
    },
  );

  app.post(
    '/notify/batch',
    {
      onRequest: app.authenticate,
      schema: {
        summary: 'Send up to 100 notifications at once',
        description:
          'Costs one token per notification from the sender and from each recipient, taken all at once: a batch the limits cannot take is refused whole (429) and enqueues nothing.',
        headers: IdempotencyHeaders,
        body: BatchRequest,
        response: { 202: BatchAccepted, ...errors },
      },
    },
    async (request, reply) => {
      request.body.notifications.forEach((item, index) =>
        checkPayloadSize(item, `body.notifications.${index}.payload`),
      );
      return withIdempotency(request, reply, async (derivedId) => {
        const ids = await accept(request, reply, request.body.notifications, derivedId);
        return {
          statusCode: 202,
          body: {
            accepted: ids.length,
            results: ids.map((id, index) => ({ index, id, status: 'queued' as const })),
          },
        };
      });
    },
  );

  /**
   * Takes the tokens for `items` in one atomic decision, then enqueues them; resolves with their ids
   * once every job is in Redis.
   */
  async function accept(
    request: FastifyRequest,
    reply: FastifyReply,
    items: readonly NotifyItem[],
    derivedId: string | undefined,
  ): Promise<string[]> {
    const identity = request.apiKey as ApiKeyIdentity;
    const perRecipient = new Map<string, number>();
    for (const item of items) perRecipient.set(item.userId, (perRecipient.get(item.userId) ?? 0) + 1);

    let decision: Awaited<ReturnType<typeof app.limits.check>>;
    try {
      decision = await app.limits.check(identity, perRecipient);
    } catch (error) {
      throw unavailable('The rate limiter (Redis)', error);
    }
    void reply.headers(decision.headers);
    if (!decision.allowed) {
      throw new HttpError(429, ErrorCode.RATE_LIMITED, 'Rate limit exceeded', {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000))) },
        extra: { retryAfterMs: decision.retryAfterMs, policy: decision.policy },
      });
    }

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
        tenantId: identity.tenantId,
        ...optional(item),
      };
      const opts: JobsOptions = { jobId: id };
      if (item.priority !== undefined) opts.priority = item.priority;
      if (item.delayMs !== undefined && item.delayMs > 0) opts.delay = item.delayMs;
      return { name: NOTIFY_JOB_NAME, data, opts };
    });

    const started = process.hrtime.bigint();
    try {
      const [single] = jobs;
      await app.withRedisTimeout<unknown>(
        jobs.length === 1 && single
          ? app.queue.add(single.name, single.data, single.opts)
          : app.queue.addBulk(jobs),
      );
      await app.ensureDurable();
    } catch (error) {
      throw unavailable('The queue (Redis)', error);
    }
    app.metrics.enqueueSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
    request.log.info(
      { notificationIds: jobs.map((job) => job.data.id), tenant: identity.tenantId },
      'queued',
    );
    return jobs.map((job) => job.data.id);
  }

  /** Runs `handle` at most once per (API key, Idempotency-Key, body); replays its answer afterwards. */
  async function withIdempotency<T>(
    request: FastifyRequest<{ Headers: Static<typeof IdempotencyHeaders>; Body: unknown }>,
    reply: FastifyReply,
    handle: (derivedId: string | undefined) => Promise<{ statusCode: number; body: T }>,
  ): Promise<T> {
    const key = request.headers['idempotency-key'];
    if (key === undefined) {
      const { statusCode, body } = await handle(undefined);
      void reply.code(statusCode);
      return body;
    }
    const scope = (request.apiKey as ApiKeyIdentity).id;
    const fingerprint = IdempotencyStore.fingerprint({ route: request.routeOptions.url, body: request.body });
    let begun: Awaited<ReturnType<IdempotencyStore['begin']>>;
    try {
      begun = await app.withRedisTimeout(app.idempotency.begin(scope, key, fingerprint));
    } catch (error) {
      throw unavailable('Redis', error);
    }
    if (begun.state === 'mismatch') {
      throw new HttpError(
        422,
        ErrorCode.IDEMPOTENCY_MISMATCH,
        'This Idempotency-Key was used with a different request body: use a new key for a new request.',
      );
    }
    if (begun.state === 'in-flight') {
      throw new HttpError(
        409,
        ErrorCode.IDEMPOTENCY_IN_FLIGHT,
        'A request with this Idempotency-Key is still being processed: retry in a moment.',
        { headers: { 'Retry-After': '1' } },
      );
    }
    if (begun.state === 'replay') {
      void reply.code(begun.answer.statusCode).header('Idempotency-Replayed', 'true');
      return begun.answer.body as T;
    }
    try {
      const answer = await handle(IdempotencyStore.derivedId(scope, key));
      await app.idempotency.complete(scope, key, fingerprint, answer).catch((error: unknown) => {
        // The jobs are in Redis and their ids derive from the key: a retry cannot enqueue twice.
        request.log.warn({ err: error }, 'could not store the idempotent answer');
      });
      void reply.code(answer.statusCode);
      return answer.body;
    } catch (error) {
      await app.idempotency.abandon(scope, key).catch(() => {});
      throw error;
    }
  }
};

function checkPayloadSize(item: { payload: unknown }, field: string): void {
  const bytes = Buffer.byteLength(JSON.stringify(item.payload));
  if (bytes > PAYLOAD_MAX_BYTES) {
    throw new HttpError(
      413,
      ErrorCode.PAYLOAD_TOO_LARGE,
      `${field} is ${bytes} bytes; at most ${PAYLOAD_MAX_BYTES}`,
      {
        details: [{ field, message: `must be at most ${PAYLOAD_MAX_BYTES} bytes of JSON` }],
      },
    );
  }
}

function optional(item: NotifyItem): Partial<NotificationJob> {
  const options: Partial<NotificationJob> = {};
  if (item.priority !== undefined) options.priority = item.priority;
  if (item.delayMs !== undefined) options.delayMs = item.delayMs;
  if (item.ttlMs !== undefined) options.ttlMs = item.ttlMs;
  if (item.dedupeKey !== undefined) options.dedupeKey = item.dedupeKey;
  if (item.topic !== undefined) options.topic = item.topic;
  if (item.type !== undefined) options.type = item.type;
  return options;
}
