import { ErrorCode } from '@herald/protocol/error-codes';

/**
 * Every error code of `@herald/rate-limiter`. Stable: callers may branch on them.
 *
 * @example
 * ```ts
 * if (error instanceof RateLimiterError && error.code === RateLimiterErrorCode.COST_EXCEEDS_CAPACITY) {
 *   return reply.code(400).send({ error: error.message, code: error.code });
 * }
 * ```
 */
export const RateLimiterErrorCode = {
  /** A call asked for more than a policy's capacity: it could never be allowed. */
  COST_EXCEEDS_CAPACITY: ErrorCode.RATE_LIMITER_COST_EXCEEDS_CAPACITY,
  /** A cost that is not a finite number >= 0. */
  INVALID_COST: ErrorCode.RATE_LIMITER_INVALID_COST,
  /** A call that does not name an id for every policy, or names an unknown policy. */
  INVALID_KEY: ErrorCode.RATE_LIMITER_INVALID_KEY,
  /** Options rejected at construction. */
  INVALID_OPTIONS: ErrorCode.RATE_LIMITER_INVALID_OPTIONS,
  /** Several ids in one call on Redis Cluster without a `hashTag`: their keys would sit in different slots. */
  CROSS_SLOT: ErrorCode.RATE_LIMITER_CROSS_SLOT,
  /** Redis failed or was too slow and the failure mode is `throw` (or the call was a `peek`/`reset`). */
  UNAVAILABLE: ErrorCode.RATE_LIMITER_UNAVAILABLE,
  /** The script answered something this version does not understand (a different script under the same name?). */
  UNEXPECTED_REPLY: ErrorCode.RATE_LIMITER_UNEXPECTED_REPLY,
} as const;
/** One of {@link RateLimiterErrorCode}'s values. */
export type RateLimiterErrorCode = (typeof RateLimiterErrorCode)[keyof typeof RateLimiterErrorCode];

/**
 * Base class of every error this package throws: a stable `code` and, when another error caused it, `cause`.
 *
 * @example
 * ```ts
 * try {
 *   await limiter.consume('user-42', 500);
 * } catch (error) {
 *   if (error instanceof RateLimiterError) log.warn({ code: error.code }, error.message);
 * }
 * ```
 */
export class RateLimiterError extends Error {
  readonly code: RateLimiterErrorCode;
  constructor(code: RateLimiterErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'RateLimiterError';
    this.code = code;
  }
}

/**
 * A cost larger than a policy's capacity: the bucket can never hold that many tokens, so the call is
 * refused with this error instead of a silent, permanent deny. Answer it as a client error (HTTP 400).
 *
 * @example
 * ```ts
 * try {
 *   await limiter.consume('user-42', 1000);
 * } catch (error) {
 *   if (error instanceof CostExceedsCapacityError) console.log(error.policy, error.cost, error.capacity);
 * }
 * ```
 */
export class CostExceedsCapacityError extends RateLimiterError {
  /** The HTTP status to answer it with (Fastify's default error handler reads it). */
  readonly statusCode = 400;
  readonly policy: string;
  readonly cost: number;
  readonly capacity: number;
  constructor(policy: string, cost: number, capacity: number) {
    super(
      RateLimiterErrorCode.COST_EXCEEDS_CAPACITY,
      `Cost ${cost} exceeds the capacity ${capacity} of policy "${policy}": such a call can never be allowed. ` +
        'Split the work into smaller calls or raise the capacity.',
    );
    this.name = 'CostExceedsCapacityError';
    this.policy = policy;
    this.cost = cost;
    this.capacity = capacity;
  }
}

/**
 * Redis failed, or did not answer within the limiter's timeout, and the limiter was told to throw
 * (failure mode `throw`, and always for `peek` and `reset`). Answer it as HTTP 503.
 *
 * @example
 * ```ts
 * try {
 *   await limiter.peek('user-42');
 * } catch (error) {
 *   if (error instanceof RateLimiterUnavailableError) reply.code(503);
 * }
 * ```
 */
export class RateLimiterUnavailableError extends RateLimiterError {
  /** The HTTP status to answer it with (Fastify's default error handler reads it). */
  readonly statusCode = 503;
  /** `timeout`, `error` (Redis answered an error or the connection failed) or `not-connected`. */
  readonly reason: FailureReason;
  constructor(reason: FailureReason, options: { cause?: unknown } = {}) {
    super(
      RateLimiterErrorCode.UNAVAILABLE,
      `The rate limiter's Redis is unavailable (${reason}); nothing was consumed. Retry later.`,
      options,
    );
    this.name = 'RateLimiterUnavailableError';
    this.reason = reason;
  }
}

/**
 * Why a decision did not come from Redis.
 *
 * @example
 * ```ts
 * const reason: FailureReason = 'timeout';
 * ```
 */
export type FailureReason = 'timeout' | 'error' | 'not-connected';
