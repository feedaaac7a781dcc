/** Every error code the gateway answers with. Stable: clients may branch on them. */
export const ErrorCode = {
  VALIDATION: 'HERALD_ERR_VALIDATION',
  UNAUTHORIZED: 'HERALD_ERR_UNAUTHORIZED',
  RATE_LIMITED: 'HERALD_ERR_RATE_LIMITED',
  IDEMPOTENCY_MISMATCH: 'HERALD_ERR_IDEMPOTENCY_MISMATCH',
  IDEMPOTENCY_IN_FLIGHT: 'HERALD_ERR_IDEMPOTENCY_IN_FLIGHT',
  PAYLOAD_TOO_LARGE: 'HERALD_ERR_PAYLOAD_TOO_LARGE',
  NOT_FOUND: 'HERALD_ERR_NOT_FOUND',
  BODY_TOO_LARGE: 'HERALD_ERR_BODY_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE',
  BAD_REQUEST: 'HERALD_ERR_BAD_REQUEST',
  /** A method the path does not serve (the `Allow` header lists those it does). */
  METHOD_NOT_ALLOWED: 'HERALD_ERR_METHOD_NOT_ALLOWED',
  /** A path (or a path parameter) longer than the gateway reads. */
  URI_TOO_LONG: 'HERALD_ERR_URI_TOO_LONG',
  /** Request headers larger than Node's limit (16 KB). */
  HEADERS_TOO_LARGE: 'HERALD_ERR_HEADERS_TOO_LARGE',
  /** Headers or body not received within the gateway's request timeouts. */
  REQUEST_TIMEOUT: 'HERALD_ERR_REQUEST_TIMEOUT',
  /** A batch that asks one bucket for more tokens than its burst: it can never be accepted as it is. */
  BATCH_EXCEEDS_BURST: 'HERALD_ERR_BATCH_EXCEEDS_BURST',
  UNAVAILABLE: 'HERALD_ERR_UNAVAILABLE',
  /** `/readyz`: this gateway and another app of its deployment disagree on a setting they must share. */
  DEPLOYMENT_MISMATCH: 'HERALD_ERR_DEPLOYMENT_MISMATCH',
  INTERNAL: 'HERALD_ERR_INTERNAL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * An error with an HTTP status; the error handler answers it as JSON
 * `{ error, code, details?, ...extra }` with `headers`.
 */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly code: ErrorCode;
  readonly details: unknown;
  readonly headers: Record<string, string>;
  readonly extra: Record<string, unknown>;
  constructor(
    statusCode: number,
    code: ErrorCode,
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
    this.statusCode = statusCode;
    this.code = code;
    this.details = options.details;
    this.headers = options.headers ?? {};
    this.extra = options.extra ?? {};
  }
}

/** 503 for a Redis that does not answer: the client should retry after `retryAfterSeconds`. */
export function unavailable(what: string, cause: unknown, retryAfterSeconds = 1): HttpError {
  return new HttpError(
    503,
    ErrorCode.UNAVAILABLE,
    `${what} is unavailable; nothing was accepted. Retry later.`,
    {
      headers: { 'Retry-After': String(retryAfterSeconds) },
      cause,
    },
  );
}

/**
 * 503 for an enqueue whose outcome is unknown (Redis timed out or dropped the connection after the
 * job was sent): the notification may or may not be in Redis, and the body says so
 * (`maybeAccepted: true`). With an Idempotency-Key a retry is safe: job ids derive from the key, and
 * BullMQ ignores a second add of the same id.
 */
export function enqueueUnsure(cause: unknown, withIdempotencyKey: boolean): HttpError {
  return new HttpError(
    503,
    ErrorCode.UNAVAILABLE,
    withIdempotencyKey
      ? 'The queue (Redis) did not confirm in time: the notification may or may not have been accepted. Retry with the same Idempotency-Key: it is never enqueued twice.'
      : 'The queue (Redis) did not confirm in time: the notification may or may not have been accepted, and a retry may deliver it twice. Send an Idempotency-Key to make retries safe.',
    { headers: { 'Retry-After': '1' }, extra: { maybeAccepted: true }, cause },
  );
}

/** True when Redis refused `error`'s command before sending it (no connection, no offline queue). */
export function neverSent(error: unknown): boolean {
  return error instanceof Error && error.message.includes('enableOfflineQueue');
}
