import { isOutOfMemory } from '@herald/config';
import { ErrorCode, type HttpErrorCode, httpStatusOf } from '@herald/protocol';

export { ErrorCode };

/**
 * An error the gateway answers: its status comes from the catalogue (`@herald/protocol`'s `ERRORS`),
 * and the error handler (plugins/app/errors.ts) answers it as JSON
 * `{ error, code, details?, ...extra }` with `headers`.
 *
 * @example
 * ```ts
 * throw new HttpError(ErrorCode.NOT_FOUND, `No notification ${id} for this API key's tenant`);
 * ```
 */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly code: HttpErrorCode;
  readonly details: unknown;
  readonly headers: Record<string, string>;
  readonly extra: Record<string, unknown>;
  constructor(
    code: HttpErrorCode,
    message: string,
    options: {
      details?: unknown;
      headers?: Record<string, string>;
      extra?: Record<string, unknown>;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'HttpError';
    this.statusCode = httpStatusOf(code);
    this.code = code;
    this.details = options.details;
    this.headers = options.headers ?? {};
    this.extra = options.extra ?? {};
  }
}

/** 503 for a Redis that does not answer: the client should retry after `retryAfterSeconds`. */
export function unavailable(what: string, cause: unknown, retryAfterSeconds = 1): HttpError {
  return new HttpError(ErrorCode.UNAVAILABLE, `${what} is unavailable; nothing was accepted. Retry later.`, {
    headers: { 'Retry-After': String(retryAfterSeconds) },
    cause,
  });
}

/**
 * 503 for an enqueue whose outcome is unknown (Redis timed out or dropped the connection after the
 * job was sent): the notification may or may not be in Redis, and the body says so
 * (`maybeAccepted: true`). With an Idempotency-Key a retry is safe: job ids derive from the key, and
 * BullMQ ignores a second add of the same id.
 */
export function enqueueUnsure(cause: unknown, withIdempotencyKey: boolean): HttpError {
  return new HttpError(
    ErrorCode.UNAVAILABLE,
    withIdempotencyKey
      ? 'The queue (Redis) did not confirm in time: the notification may or may not have been accepted. Retry with the same Idempotency-Key: it is never delivered twice.'
      : 'The queue (Redis) did not confirm in time: the notification may or may not have been accepted, and a retry may deliver it twice. Send an Idempotency-Key to make retries safe.',
    { headers: { 'Retry-After': '1' }, extra: { maybeAccepted: true }, cause },
  );
}

/**
 * 503 for a change (a cancel, a mute, a read mark, a subscription, a webhook's settings) Redis failed:
 * "nothing was accepted" only when its command was never sent (or refused for memory); else it was sent
 * and not confirmed in time (Redis paused, frozen, slow, the connection cut), so it may have been done,
 * and the body says so (`maybeAccepted: true`). Each such change is idempotent: sending it again is safe.
 */
export function changeUnavailable(what: string, cause: unknown): HttpError {
  if (neverSent(cause) || isOutOfMemory(cause)) return unavailable(what, cause);
  return new HttpError(
    ErrorCode.UNAVAILABLE,
    `${what} did not confirm in time: the change may or may not have been made. Send it again: it is idempotent.`,
    { headers: { 'Retry-After': '1' }, extra: { maybeAccepted: true }, cause },
  );
}

/** True when Redis refused `error`'s command before sending it (no connection, no offline queue). */
export function neverSent(error: unknown): boolean {
  return error instanceof Error && error.message.includes('enableOfflineQueue');
}

/**
 * 503 for an enqueue Redis refused for memory (`OOM`: it ran none of it): nothing was accepted, and a
 * retry succeeds once the operator has made room.
 */
export function outOfMemory(cause: unknown): HttpError {
  return new HttpError(ErrorCode.UNAVAILABLE, OUT_OF_MEMORY_MESSAGE, {
    headers: { 'Retry-After': '1' },
    cause,
  });
}

/** The `error` of a 503 for a send Redis refused for memory (the enqueue's, or the limiter's). */
export const OUT_OF_MEMORY_MESSAGE =
  'Redis is out of memory; nothing was accepted. Retry later (the operator must free memory or raise maxmemory).';

/**
 * Awaits every one of `writes` (the adds of one enqueue: one per queue partition, or an envelope's job
 * and index) and rejects with the failure that tells what Redis holds: the first one that may have been
 * stored (sent, not confirmed) as it is; when every failure was refused unsent or for memory, the first
 * of them if nothing was stored, else an error that does not say "refused" (part is in Redis). So a
 * `503` says "nothing was accepted" only when that is so.
 */
export async function settleWrites(writes: readonly Promise<unknown>[]): Promise<void> {
  const settled = await Promise.allSettled(writes);
  const failures = settled.flatMap((result) => (result.status === 'rejected' ? [result.reason] : []));
  if (failures.length === 0) return;
  const refused = (error: unknown) => neverSent(error) || isOutOfMemory(error);
  const unsure = failures.find((error) => !refused(error));
  if (unsure !== undefined) throw unsure;
  if (failures.length < settled.length)
    throw new Error('Redis stored part of the enqueue and refused the rest', { cause: failures[0] });
  throw failures[0];
}

/** Thrown when a Redis operation outlives `redisTimeoutMs`. */
export class RedisTimeoutError extends Error {
  readonly code = ErrorCode.REDIS_TIMEOUT;
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
    this.name = 'RedisTimeoutError';
  }
}
