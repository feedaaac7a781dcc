/**
 * Herald's one catalogue of error codes: every code any package or app raises or answers with, its
 * HTTP status when it is an HTTP answer of the gateway (README.md's error tables list exactly those),
 * and a default message. Stable wire contract: clients branch on `code`, so a code is never renamed.
 * Codes without `status` travel elsewhere: Socket.IO `connect_error` / `goodbye` / command replies
 * (`socket`), or errors thrown by a library to its caller (`library`).
 *
 * @example
 * ```ts
 * import { ErrorCode, errorSpec } from '@herald/protocol/error-codes';
 *
 * if (body.code === ErrorCode.RATE_LIMITED) await sleep(body.retryAfterMs);
 * errorSpec(ErrorCode.NOT_FOUND).status; // 404
 * ```
 */
export const ERRORS = {
  // HTTP answers of the gateway (README.md, "Answers to POST /notify" and "On any path").
  VALIDATION: {
    code: 'HERALD_ERR_VALIDATION',
    status: 400,
    message: 'Invalid request: `details` names each field and what is wrong with it.',
  },
  BATCH_EXCEEDS_BURST: {
    code: 'HERALD_ERR_BATCH_EXCEEDS_BURST',
    status: 400,
    message:
      'The batch asks one bucket for more tokens than its burst: it can never pass as it is, split it.',
  },
  WEBHOOK_URL_REFUSED: {
    code: 'HERALD_ERR_WEBHOOK_URL_REFUSED',
    status: 400,
    message:
      'The webhook URL points to a loopback or private address: use a public one (or the operator sets HERALD_WEBHOOK_ALLOW_PRIVATE=true).',
  },
  BAD_REQUEST: {
    code: 'HERALD_ERR_BAD_REQUEST',
    status: 400,
    message: 'Malformed HTTP request: check the request line, headers, encoding and path.',
  },
  UNAUTHORIZED: {
    code: 'HERALD_ERR_UNAUTHORIZED',
    status: 401,
    message: 'Missing, unknown or revoked API key: send "Authorization: Bearer <api key>".',
  },
  NOT_FOUND: { code: 'HERALD_ERR_NOT_FOUND', status: 404, message: 'Not found.' },
  ADMIN_DISABLED: {
    code: 'HERALD_ERR_ADMIN_DISABLED',
    status: 404,
    message: 'The admin API is off: set HERALD_ADMIN_KEY on the gateway to turn it on.',
  },
  METHOD_NOT_ALLOWED: {
    code: 'HERALD_ERR_METHOD_NOT_ALLOWED',
    status: 405,
    message: 'The path does not serve this method: `Allow` lists those it does.',
  },
  REQUEST_TIMEOUT: {
    code: 'HERALD_ERR_REQUEST_TIMEOUT',
    status: 408,
    message: 'The request did not arrive in time: send it again, faster.',
  },
  NOT_FAILED: {
    code: 'HERALD_ERR_NOT_FAILED',
    status: 409,
    message: 'The notification is not in the failed set (it is queued, delivered or retried already).',
  },
  NOT_CANCELLABLE: {
    code: 'HERALD_ERR_NOT_CANCELLABLE',
    status: 409,
    message:
      'The notification can no longer be cancelled: a worker has stored it in the inbox already, or it failed or expired.',
  },
  /** Also a command reply of realtime (`mute`). */
  TOO_MANY_MUTES: {
    code: 'HERALD_ERR_TOO_MANY_MUTES',
    status: 409,
    message: 'The user would hold more than 1,000 mutes: unmute some first (nothing was added).',
  },
  WEBHOOK_NOT_PARKED: {
    code: 'HERALD_ERR_WEBHOOK_NOT_PARKED',
    status: 409,
    message: 'The webhook is not parked: it is delivering, there is nothing to resume.',
  },
  IDEMPOTENCY_IN_FLIGHT: {
    code: 'HERALD_ERR_IDEMPOTENCY_IN_FLIGHT',
    status: 409,
    message: 'A request with this Idempotency-Key is still being processed: retry in a moment.',
  },
  BODY_TOO_LARGE: {
    code: 'HERALD_ERR_BODY_TOO_LARGE',
    status: 413,
    message: 'The request body is larger than the gateway reads.',
  },
  PAYLOAD_TOO_LARGE: {
    code: 'HERALD_ERR_PAYLOAD_TOO_LARGE',
    status: 413,
    message: 'The notification payload is larger than a notification may carry.',
  },
  URI_TOO_LONG: {
    code: 'HERALD_ERR_URI_TOO_LONG',
    status: 414,
    message: 'A path parameter is longer than the gateway reads.',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    code: 'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE',
    status: 415,
    message: 'Send JSON in UTF-8, uncompressed, with "Content-Type: application/json".',
  },
  EXPECTATION_FAILED: {
    code: 'HERALD_ERR_EXPECTATION_FAILED',
    status: 417,
    message: 'The gateway meets no `Expect` but `100-continue`: send the request without that header.',
  },
  IDEMPOTENCY_MISMATCH: {
    code: 'HERALD_ERR_IDEMPOTENCY_MISMATCH',
    status: 422,
    message:
      'This Idempotency-Key was used with another request (a different body, or another route): use a new key for a new request.',
  },
  /** Also the reply of realtime's `push-key` and `push-subscribe` when push is off. */
  PUSH_NOT_CONFIGURED: {
    code: 'HERALD_ERR_PUSH_NOT_CONFIGURED',
    status: 422,
    message:
      'Web Push is not configured on this deployment: the operator sets HERALD_VAPID_PUBLIC_KEY, HERALD_VAPID_PRIVATE_KEY and HERALD_VAPID_SUBJECT (send without escalateAfterMs meanwhile).',
  },
  /** Also a Socket.IO `connect_error` and command reply of realtime (with `retryAfterMs`). */
  RATE_LIMITED: { code: 'HERALD_ERR_RATE_LIMITED', status: 429, message: 'Rate limit exceeded' },
  HEADERS_TOO_LARGE: {
    code: 'HERALD_ERR_HEADERS_TOO_LARGE',
    status: 431,
    message:
      'The request line and headers are larger than 16 KB: send a shorter URL or fewer, shorter headers.',
  },
  INTERNAL: {
    code: 'HERALD_ERR_INTERNAL',
    status: 500,
    message: 'Internal error; the log has the details.',
  },
  /** Also the 503 of every app's `/readyz` and a Socket.IO `connect_error` / command reply of realtime. */
  UNAVAILABLE: {
    code: 'HERALD_ERR_UNAVAILABLE',
    status: 503,
    message: 'A dependency (Redis) is unavailable; nothing was accepted. Retry later.',
  },
  DEPLOYMENT_MISMATCH: {
    code: 'HERALD_ERR_DEPLOYMENT_MISMATCH',
    status: 503,
    message:
      'Not ready: the apps of this deployment disagree on a setting they must share (`mismatches` names each).',
  },

  // Socket.IO (`connect_error` data, `goodbye`) of realtime.
  TOKEN_MISSING: {
    code: 'HERALD_ERR_TOKEN_MISSING',
    surface: 'socket',
    message: 'Missing user token: pass the token from POST /tokens as `auth.token`.',
  },
  TOKEN_EXPIRED: {
    code: 'HERALD_ERR_TOKEN_EXPIRED',
    surface: 'socket',
    message: 'The user token has expired: get a new one from your backend.',
  },
  TOKEN_INVALID: {
    code: 'HERALD_ERR_TOKEN_INVALID',
    surface: 'socket',
    message: 'The user token is invalid: get a new one from your backend.',
  },
  /** The API key that minted the token was revoked. */
  TOKEN_REVOKED: {
    code: 'HERALD_ERR_TOKEN_REVOKED',
    surface: 'socket',
    message: 'The API key that issued this token was revoked: get a new token.',
  },
  OFFSET_INVALID: {
    code: 'HERALD_ERR_OFFSET_INVALID',
    surface: 'socket',
    message: '`lastOffset` is not an inbox offset `<ms>-<seq>`.',
  },
  TOO_MANY_CONNECTIONS: {
    code: 'HERALD_ERR_TOO_MANY_CONNECTIONS',
    surface: 'socket',
    message: 'This user has too many connections on this instance: close some tabs.',
  },
  /** Reply of `push-subscribe`: not a PushSubscription's JSON (`endpoint`, `keys.p256dh`, `keys.auth`). */
  PUSH_SUBSCRIPTION_INVALID: {
    code: 'HERALD_ERR_PUSH_SUBSCRIPTION_INVALID',
    surface: 'socket',
    message:
      'Not a push subscription: send PushSubscription.toJSON() ({ endpoint, keys: { p256dh, auth } }).',
  },
  /** Reply of `push-subscribe`: an endpoint that is not https:// or points to a loopback or private address. */
  PUSH_ENDPOINT_REFUSED: {
    code: 'HERALD_ERR_PUSH_ENDPOINT_REFUSED',
    surface: 'socket',
    message:
      'The push endpoint must be an https:// URL of a public push service (the operator may allow private addresses with HERALD_PUSH_ALLOW_PRIVATE=true).',
  },
  /** A `subscribe` / `unsubscribe` for a topic the user token does not list (its `topics`). */
  TOPIC_NOT_ALLOWED: {
    code: 'HERALD_ERR_TOPIC_NOT_ALLOWED',
    surface: 'socket',
    message:
      'This user token does not let its user subscribe to that topic: your backend lists those it allows in POST /tokens `topics`.',
  },
  /** Not an error: `goodbye` of an instance that shuts down (reconnect, another instance takes over). */
  SERVER_SHUTDOWN: {
    code: 'HERALD_SERVER_SHUTDOWN',
    surface: 'socket',
    message: 'The server is shutting down: reconnect.',
  },

  // Thrown by libraries and apps to their callers (never an HTTP body as such).
  CONFIG: {
    code: 'HERALD_ERR_CONFIG',
    surface: 'library',
    message: 'Invalid configuration: fix the variables named.',
  },
  REDIS_TIMEOUT: {
    code: 'HERALD_ERR_REDIS_TIMEOUT',
    surface: 'library',
    message: 'Redis did not answer in time.',
  },
  RATE_LIMITER_COST_EXCEEDS_CAPACITY: {
    code: 'HERALD_ERR_RATE_LIMITER_COST_EXCEEDS_CAPACITY',
    surface: 'library',
    message: "A call asked for more than a policy's capacity: it could never be allowed.",
  },
  RATE_LIMITER_INVALID_COST: {
    code: 'HERALD_ERR_RATE_LIMITER_INVALID_COST',
    surface: 'library',
    message: 'A cost must be a finite number >= 0.',
  },
  RATE_LIMITER_INVALID_KEY: {
    code: 'HERALD_ERR_RATE_LIMITER_INVALID_KEY',
    surface: 'library',
    message: 'A call must name an id for every policy, and only known policies.',
  },
  RATE_LIMITER_INVALID_OPTIONS: {
    code: 'HERALD_ERR_RATE_LIMITER_INVALID_OPTIONS',
    surface: 'library',
    message: 'Invalid rate limiter options.',
  },
  RATE_LIMITER_CROSS_SLOT: {
    code: 'HERALD_ERR_RATE_LIMITER_CROSS_SLOT',
    surface: 'library',
    message: 'Several ids in one call on Redis Cluster need a `hashTag`.',
  },
  RATE_LIMITER_UNAVAILABLE: {
    code: 'HERALD_ERR_RATE_LIMITER_UNAVAILABLE',
    surface: 'library',
    message: "The rate limiter's Redis is unavailable; nothing was consumed.",
  },
  RATE_LIMITER_UNEXPECTED_REPLY: {
    code: 'HERALD_ERR_RATE_LIMITER_UNEXPECTED_REPLY',
    surface: 'library',
    message: 'The rate limiter script answered something this version does not understand.',
  },
  INBOX_INVALID_OFFSET: {
    code: 'HERALD_ERR_INBOX_INVALID_OFFSET',
    surface: 'library',
    message: 'An inbox offset must be `<ms>-<seq>`.',
  },
  INBOX_INVALID_ARGUMENT: {
    code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
    surface: 'library',
    message: 'A user id, id list, limit or option out of range.',
  },
  INBOX_UNEXPECTED_REPLY: {
    code: 'HERALD_ERR_INBOX_UNEXPECTED_REPLY',
    surface: 'library',
    message: 'An inbox script answered something it never answers.',
  },
} as const satisfies Record<string, ErrorSpec>;

/** One entry of {@link ERRORS}: an HTTP answer (`status`) or a code of another surface. */
export type ErrorSpec =
  | { readonly code: string; readonly status: number; readonly message: string }
  | { readonly code: string; readonly surface: 'socket' | 'library'; readonly message: string };

/** A name of {@link ERRORS} (`RATE_LIMITED`). */
export type ErrorName = keyof typeof ERRORS;

/**
 * The codes of {@link ERRORS} by name: `ErrorCode.RATE_LIMITED === 'HERALD_ERR_RATE_LIMITED'`.
 *
 * @example
 * ```ts
 * throw new HttpError(ErrorCode.NOT_FOUND, `No notification ${id}`);
 * ```
 */
export const ErrorCode = Object.freeze(
  Object.fromEntries(Object.entries(ERRORS).map(([name, spec]) => [name, spec.code])),
) as { readonly [K in ErrorName]: (typeof ERRORS)[K]['code'] };
/** One of {@link ErrorCode}'s values. */
export type ErrorCode = (typeof ErrorCode)[ErrorName];

/** The codes that are HTTP answers, and their status. */
export type HttpErrorCode = {
  [K in ErrorName]: (typeof ERRORS)[K] extends { status: number } ? (typeof ERRORS)[K]['code'] : never;
}[ErrorName];

const byCode = new Map<string, ErrorSpec>(Object.values(ERRORS).map((spec) => [spec.code, spec]));

/**
 * The catalogue entry of `code`.
 *
 * @example
 * ```ts
 * errorSpec('HERALD_ERR_RATE_LIMITED'); // { code, status: 429, message: 'Rate limit exceeded' }
 * ```
 */
export function errorSpec(code: ErrorCode): ErrorSpec {
  return byCode.get(code) as ErrorSpec;
}

/**
 * The HTTP status of `code`, an HTTP answer of the gateway.
 *
 * @example
 * ```ts
 * httpStatusOf(ErrorCode.IDEMPOTENCY_MISMATCH); // 422
 * ```
 */
export function httpStatusOf(code: HttpErrorCode): number {
  return (byCode.get(code) as { status: number }).status;
}
