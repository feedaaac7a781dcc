import {
  BATCH_MAX_ITEMS,
  type BatchItemResult,
  NotifyRequest,
  PAYLOAD_MAX_BYTES,
  PAYLOAD_MAX_DEPTH,
} from '@herald/protocol';
import type { FastifyRequest } from 'fastify';
import type { Static } from 'typebox';
import { ErrorCode, HttpError } from '../../errors.js';
import { jsonProblem, RefusedItem } from '../../plugins/app/json-body.js';
import { compileBodySchema, issueDetails } from '../../plugins/app/validation.js';
import { escalationRefusal } from './escalation.js';
import { timingProblem } from './target.js';

export type NotifyItem = Static<typeof NotifyRequest>;

/** A batch split into the items that will be sent and those rejected (each with its own error). */
export interface SortedBatch {
  valid: { index: number; item: NotifyItem }[];
  rejected: Extract<BatchItemResult, { status: 'rejected' }>[];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by {@link sortBatch} on `POST /notify/batch`; read it through {@link sortedBatch}. */
    batch?: SortedBatch;
  }
}

/**
 * Re-serialised, JSON grows only in its numbers, and at most 4× (`1e15` is `1000000000000000`; strings,
 * keys and the rest stay as long or get shorter): a body of at most a quarter of PAYLOAD_MAX_BYTES can
 * carry no payload over it, and its payloads are not serialised to be measured.
 */
const SMALL_BODY_BYTES = PAYLOAD_MAX_BYTES / 4;

/** The request body's length in bytes when its `content-length` gives it (Node's parser holds it to it). */
function bodyBytes(request: FastifyRequest): number {
  const declared = request.headers['content-length'];
  return declared === undefined ? Number.POSITIVE_INFINITY : Number(declared);
}

/**
 * The problem with a payload deeper than 32 levels (400) or over 16 KB (413), or undefined; `inBytes`:
 * the length of the body it came in.
 */
function payloadProblem(
  payload: unknown,
  field: string,
  inBytes: number,
):
  | {
      code: typeof ErrorCode.VALIDATION | typeof ErrorCode.PAYLOAD_TOO_LARGE;
      error: string;
      details: unknown;
    }
  | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  // Depth first: JSON.stringify recurses, and a deep enough payload would overflow it.
  const problem = jsonProblem(payload, field, PAYLOAD_MAX_DEPTH);
  if (problem) {
    return {
      code: ErrorCode.VALIDATION,
      error: `Invalid request: ${problem.field} ${problem.message}`,
      details: [problem],
    };
  }
  if (inBytes <= SMALL_BODY_BYTES) return undefined;
  const bytes = Buffer.byteLength(JSON.stringify(payload));
  if (bytes <= PAYLOAD_MAX_BYTES) return undefined;
  return {
    code: ErrorCode.PAYLOAD_TOO_LARGE,
    error: `${field} is ${bytes} bytes; at most ${PAYLOAD_MAX_BYTES}`,
    details: [{ field, message: `must be at most ${PAYLOAD_MAX_BYTES} bytes of JSON` }],
  };
}

/** Step of `POST /notify`'s `preValidation` (`checkSend`): a payload too deep or over 16 KB is refused before it costs anything. */
export function checkPayload(request: FastifyRequest): void {
  const body = request.body as { payload?: unknown } | null;
  const problem = payloadProblem(body?.payload, 'body.payload', bodyBytes(request));
  if (problem) throw new HttpError(problem.code, problem.error, { details: problem.details });
}

const validateItem = compileBodySchema<NotifyItem>(NotifyRequest);

/** Why a topic send or broadcast is no batch item: each fans out as a job of its own, with its own id and status. */
const FANOUT_IN_BATCH =
  'is required: a batch item goes to one user; send a topic send or broadcast on its own, with POST /notify';

/** An item that asks for a topic send or a broadcast (no `userId`): told so, not only that `userId` is missing. */
function fanoutItem(item: unknown): boolean {
  if (typeof item !== 'object' || item === null || 'userId' in item) return false;
  return 'broadcast' in item || 'topic' in item;
}

/** The route option that has the JSON parser check each item of a batch on its own (see `checkBody`). */
export const BATCH_ITEMS = { field: 'notifications', maxItems: BATCH_MAX_ITEMS };

/**
 * `preValidation` of `POST /notify/batch`: validates every item on its own, as `POST /notify` would, so
 * one bad item is rejected alone (one the JSON parser set aside, too: a lone surrogate, a prototype
 * key, a number out of range, too deep); a batch with no valid item is a 400 naming each item's problem.
 */
export async function sortBatch(request: FastifyRequest): Promise<void> {
  const items = (request.body as { notifications?: unknown } | null)?.notifications;
  // Not an array, empty or too long: the route's schema answers 400.
  if (!Array.isArray(items) || items.length === 0 || items.length > BATCH_MAX_ITEMS) return;
  const sorted: SortedBatch = { valid: [], rejected: [] };
  const inBytes = bodyBytes(request);
  items.forEach((item: unknown, index) => {
    const root = `body.notifications.${index}`;
    if (item instanceof RefusedItem) {
      const { problem } = item;
      sorted.rejected.push({
        index,
        status: 'rejected',
        code: ErrorCode.VALIDATION,
        error: `Invalid notification: ${problem.field} ${problem.message}`,
        details: [problem],
      });
      return;
    }
    if (!validateItem(item)) {
      const details = fanoutItem(item)
        ? [{ field: `${root}.userId`, message: FANOUT_IN_BATCH }]
        : issueDetails(root, validateItem.errors ?? []);
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
    const timing = timingProblem(item, root);
    const problem =
      payloadProblem(item.payload, `${root}.payload`, inBytes) ??
      (timing && {
        code: ErrorCode.VALIDATION,
        error: `Invalid notification: ${timing.field} ${timing.message}`,
        details: [timing],
      }) ??
      escalationRefusal(request, item, `${root}.escalateAfterMs`);
    if (problem) {
      const { code, error, details } = problem;
      sorted.rejected.push({ index, status: 'rejected', code, error, details });
      return;
    }
    sorted.valid.push({ index, item });
  });
  if (sorted.valid.length === 0) {
    throw new HttpError(ErrorCode.VALIDATION, 'Invalid request: no notification of the batch is valid', {
      details: sorted.rejected.flatMap((result) => (Array.isArray(result.details) ? result.details : [])),
    });
  }
  request.batch = sorted;
}

/** The batch {@link sortBatch} sorted (its route runs it in `preValidation`). */
export function sortedBatch(request: FastifyRequest): SortedBatch {
  const { batch } = request;
  if (batch === undefined) throw new Error('request.batch read on a route without sortBatch');
  return batch;
}

/** The valid notifications of the batch: what the limiter charges for and what is enqueued. */
export function validItems(request: FastifyRequest): NotifyItem[] {
  return sortedBatch(request).valid.map(({ item }) => item);
}
