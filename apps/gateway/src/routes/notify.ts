import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  BATCH_MAX_ITEMS,
  BatchAccepted,
  type BatchItemResult,
  BatchRequest,
  ErrorResponse,
  NOTIFY_JOB_NAME,
  type NotificationJob,
  NotifyAccepted,
  NotifyRequest,
  notificationJobOptions,
  PAYLOAD_MAX_BYTES,
  PAYLOAD_MAX_DEPTH,
  userKey,
} from '@herald/protocol';
import type { JobsOptions } from 'bullmq';
import type { FastifyRequest } from 'fastify';
import Type, { type Static } from 'typebox';
import { ErrorCode, enqueueUnsure, HttpError, neverSent, unavailable } from '../errors.js';
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '../idempotency.js';
import { RECIPIENT_POLICY, SENDER_POLICY } from '../limits.js';
import { fieldOf, messageOf } from '../plugins/error-handler.js';
import { idempotencyPreValidation, settleIdempotency } from '../plugins/idempotency-hooks.js';
import { jsonProblem } from '../plugins/json-body.js';
import { compileBodySchema } from '../plugins/validation.js';

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

/** The problem with a payload deeper than 32 levels (400) or over 16 KB (413), or undefined. */
function payloadProblem(
  payload: unknown,
  field: string,
): { statusCode: 400 | 413; code: ErrorCode; error: string; details: unknown } | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  // Depth first: JSON.stringify recurses, and a deep enough payload would overflow it.
  const problem = jsonProblem(payload, field, PAYLOAD_MAX_DEPTH);
  if (problem) {
    return {
      statusCode: 400,
      code: ErrorCode.VALIDATION,
      error: `Invalid request: ${problem.field} ${problem.message}`,
      details: [problem],
    };
  }
  const bytes = Buffer.byteLength(JSON.stringify(payload));
  if (bytes <= PAYLOAD_MAX_BYTES) return undefined;
  return {
    statusCode: 413,
    code: ErrorCode.PAYLOAD_TOO_LARGE,
    error: `${field} is ${bytes} bytes; at most ${PAYLOAD_MAX_BYTES}`,
    details: [{ field, message: `must be at most ${PAYLOAD_MAX_BYTES} bytes of JSON` }],
  };
}

/** `preValidation` of `POST /notify`: a payload too deep or over 16 KB is refused before it costs anything. */
async function checkPayload(request: FastifyRequest): Promise<void> {
  const body = request.body as { payload?: unknown } | null;
  const problem = payloadProblem(body?.payload, 'body.payload');
  if (problem) {
    throw new HttpError(problem.statusCode, problem.code, problem.error, { details: problem.details });
  }
}

/** A batch split into the items that will be sent and those rejected (each with its own error). */
interface SortedBatch {
  valid: { index: number; item: NotifyItem }[];
  rejected: Extract<BatchItemResult, { status: 'rejected' }>[];
}

declare module 'fastify' {
  interface FastifyRequest {
    batch?: SortedBatch;
  }
}

const validateItem = compileBodySchema(NotifyRequest);

/**
 * `preValidation` of `POST /notify/batch`: validates every item on its own, as `POST /notify` would, so
 * one bad item is rejected alone; a batch with no valid item is a 400 naming each item's problem.
 */
async function sortBatch(request: FastifyRequest): Promise<void> {
  const items = (request.body as { notifications?: unknown } | null)?.notifications;
  // Not an array, empty or too long: the route's schema answers 400.
  if (!Array.isArray(items) || items.length === 0 || items.length > BATCH_MAX_ITEMS) return;
  const sorted: SortedBatch = { valid: [], rejected: [] };
  items.forEach((item: unknown, index) => {
    const root = `body.notifications.${index}`;
    if (!validateItem(item)) {
      const details = (validateItem.errors ?? []).map((issue) => ({
        field: fieldOf(root, issue.instancePath, issue.params),
        message: messageOf(issue.keyword, issue.message),
      }));
      const first = details[0];
      sorted.rejected.push({
        index,
        status: 'rejected',
        code: ErrorCode.VALIDATION,
        error: first ? `Invalid notification: ${first.field} ${first.message}` : 'Invalid notification',
        details,
      });
      return;
    }
    const problem = payloadProblem((item as NotifyItem).payload, `${root}.payload`);
    if (problem) {
      const { code, error, details } = problem;
      sorted.rejected.push({ index, status: 'rejected', code, error, details });
      return;
    }
    sorted.valid.push({ index, item: item as NotifyItem });
  });
  if (sorted.valid.length === 0) {
    throw new HttpError(400, ErrorCode.VALIDATION, 'Invalid request: no notification of the batch is valid', {
      details: sorted.rejected.flatMap((result) => (Array.isArray(result.details) ? result.details : [])),
    });
  }
  request.batch = sorted;
}

function validItems(request: FastifyRequest): NotifyItem[] {
  return (request.batch as SortedBatch).valid.map(({ item }) => item);
}

/** The ids and costs of one decision: the sender pays for every item, each recipient for its own. */
type LimitCall = {
  key: Record<string, string | string[]>;
  cost: Record<string, number | number[]>;
};
/** The plugin asks for the key and then the cost of one request: computed once. */
const limitCalls = new WeakMap<FastifyRequest, LimitCall>();

function limitCall(request: FastifyRequest, items: readonly NotifyItem[]): LimitCall {
  const known = limitCalls.get(request);
  if (known) return known;
  const call = computeLimitCall(request, items);
  limitCalls.set(request, call);
  return call;
}

function computeLimitCall(request: FastifyRequest, items: readonly NotifyItem[]): LimitCall {
  // A single notification to one recipient: no map, no arrays.
  // The recipient's bucket is its tenant's user's (`<tenant>/<user>`): another tenant cannot drain it.
  const { id: sender, tenantId } = request.identity;
  const only = items.length === 1 ? items[0] : undefined;
  if (only) {
    return {
      key: { [SENDER_POLICY]: sender, [RECIPIENT_POLICY]: userKey(tenantId, only.userId) },
      cost: { [SENDER_POLICY]: 1, [RECIPIENT_POLICY]: 1 },
    };
  }
  const perRecipient = new Map<string, number>();
  for (const item of items) {
    const recipient = userKey(tenantId, item.userId);
    perRecipient.set(recipient, (perRecipient.get(recipient) ?? 0) + 1);
  }
  return {
    key: {
      [SENDER_POLICY]: sender,
      [RECIPIENT_POLICY]: [...perRecipient.keys()],
    },
    cost: { [SENDER_POLICY]: items.length, [RECIPIENT_POLICY]: [...perRecipient.values()] },
  };
}

/** `POST /notify` and `POST /notify/batch`: authenticate, limit, enqueue durably, answer 202. */
export const notifyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const idempotency = idempotencyPreValidation(app);
  const limiterOf = (request: FastifyRequest) => app.limits.for(request.identity);
  // A sender (API key) that is being denied is refused before its body is read: a flood from a key
  // over its limit costs the gateway the least it can, and Redis nothing.
  // A request with an Idempotency-Key is not refused early: a retry of an accepted request must reach
  // its stored answer (a replay costs no tokens), and a new key still meets the full decision.
  const senderOf = (request: FastifyRequest) =>
    request.headers['idempotency-key'] === undefined ? { [SENDER_POLICY]: request.identity.id } : undefined;

  app.post(
    '/notify',
    {
      onRequest: app.authenticate,
      preValidation: [checkPayload, idempotency],
      config: {
        rateLimit: {
          limiter: limiterOf,
          precheck: senderOf,
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
      preValidation: [idempotency, sortBatch],
      config: {
        rateLimit: {
          limiter: limiterOf,
          precheck: senderOf,
          key: (request) => limitCall(request, validItems(request)).key,
          cost: (request) => limitCall(request, validItems(request)).cost,
        },
      },
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
      const sorted = request.batch as SortedBatch;
      const ids = await enqueue(
        request,
        sorted.valid.map(({ item }) => item),
      );
      const results: BatchItemResult[] = [
        ...sorted.valid.map(({ index }, n) => ({ index, status: 'queued' as const, id: ids[n] as string })),
        ...sorted.rejected,
      ].sort((a, b) => a.index - b.index);
      const body = { accepted: ids.length, rejected: sorted.rejected.length, results };
      await settleIdempotency(app, request, { statusCode: 202, body });
      return reply.code(202).send(body);
    },
  );

  /** Enqueues `items`; resolves with their ids once every job is in Redis. */
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
        tenantId: identity.tenantId,
        ...(identity.inbox ? { inbox: identity.inbox } : {}),
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
      // Refused before it was sent: nothing was accepted. A timeout or a dropped connection: unknown.
      if (neverSent(error)) throw unavailable('The queue (Redis)', error);
      throw enqueueUnsure(error, derivedId !== undefined);
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
