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
  notificationJobOptions,
  PAYLOAD_MAX_BYTES,
} from '@herald/protocol';
import type { JobsOptions } from 'bullmq';
import type { FastifyRequest } from 'fastify';
import Type, { type Static } from 'typebox';
import type { ApiKeyIdentity } from '../api-keys.js';
import { ErrorCode, HttpError, unavailable } from '../errors.js';
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '../idempotency.js';
import { RECIPIENT_POLICY, SENDER_POLICY } from '../limits.js';
import { idempotencyPreValidation, settleIdempotency } from '../plugins/idempotency-hooks.js';

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

/** The notifications of a request body, whether single or batch (before validation: best effort). */
function itemsOf(body: unknown): { item: unknown; field: string }[] {
  if (typeof body !== 'object' || body === null) return [];
  const notifications = (body as { notifications?: unknown }).notifications;
  if (Array.isArray(notifications)) {
    return notifications.map((item, index) => ({ item, field: `body.notifications.${index}.payload` }));
  }
  return [{ item: body, field: 'body.payload' }];
}

/** `preValidation`: a payload over 16 KB is refused before it costs anything. */
async function checkPayloadSizes(request: FastifyRequest): Promise<void> {
  for (const { item, field } of itemsOf(request.body)) {
    const payload =
      typeof item === 'object' && item !== null ? (item as { payload?: unknown }).payload : undefined;
    if (typeof payload !== 'object' || payload === null) continue;
    const bytes = Buffer.byteLength(JSON.stringify(payload));
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
}

/** The ids and costs of one decision: the sender pays for every item, each recipient for its own. */
function limitCall(request: FastifyRequest, items: readonly NotifyItem[]) {
  const perRecipient = new Map<string, number>();
  for (const item of items) perRecipient.set(item.userId, (perRecipient.get(item.userId) ?? 0) + 1);
  return {
    key: {
      [SENDER_POLICY]: (request.apiKey as ApiKeyIdentity).id,
      [RECIPIENT_POLICY]: [...perRecipient.keys()],
    },
    cost: { [SENDER_POLICY]: items.length, [RECIPIENT_POLICY]: [...perRecipient.values()] },
  };
}

/** `POST /notify` and `POST /notify/batch`: authenticate, limit, enqueue durably, answer 202. */
export const notifyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const idempotency = idempotencyPreValidation(app);
  const limiterOf = (request: FastifyRequest) => app.limits.for(request.apiKey as ApiKeyIdentity);

  app.post(
    '/notify',
    {
      onRequest: app.authenticate,
      preValidation: [checkPayloadSizes, idempotency],
      config: {
        rateLimit: {
          limiter: limiterOf,
          key: (request) => limitCall(request, [request.body as NotifyItem]).key,
          cost: (request) => limitCall(request, [request.body as NotifyItem]).cost,
        },
      },
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
      const [id] = await enqueue(request, [request.body]);
      const body = { id: id as string, status: 'queued' as const };
      await settleIdempotency(app, request, { statusCode: 202, body });
      return reply.code(202).send(body);
    },
  );

  app.post(
    '/notify/batch',
    {
      onRequest: app.authenticate,
      preValidation: [checkPayloadSizes, idempotency],
      config: {
        rateLimit: {
          limiter: limiterOf,
          key: (request) => limitCall(request, (request.body as BatchRequest).notifications).key,
          cost: (request) => limitCall(request, (request.body as BatchRequest).notifications).cost,
        },
      },
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
      const ids = await enqueue(request, request.body.notifications);
      const body = {
        accepted: ids.length,
        results: ids.map((id, index) => ({ index, id, status: 'queued' as const })),
      };
      await settleIdempotency(app, request, { statusCode: 202, body });
      return reply.code(202).send(body);
    },
  );

  /** Enqueues `items`; resolves with their ids once every job is in Redis. */
  async function enqueue(request: FastifyRequest, items: readonly NotifyItem[]): Promise<string[]> {
    const identity = request.apiKey as ApiKeyIdentity;
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
        tenantId: identity.tenantId,
        ...optional(item),
      };
      // jobId = notification id, delay, priority, exponential backoff with jitter, failed jobs kept.
      const opts: JobsOptions = notificationJobOptions(data, {
        attempts: app.config.jobAttempts,
        backoffMs: app.config.jobBackoffMs,
        jitter: 0.5,
      });
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
};

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
