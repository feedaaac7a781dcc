/**
 * Thrown by your `getToken()` when the user may not have a token (signed out, forbidden): the client
 * stops retrying and its connection state becomes `unauthorized`, until `reconnect()` is called.
 *
 * @example
 * ```ts
 * getToken: async () => {
 *   const response = await fetch('/api/herald-token', { method: 'POST' });
 *   if (response.status === 401 || response.status === 403) throw new HeraldUnauthorizedError('signed out');
 *   return (await response.json()).token;
 * }
 * ```
 */
export class HeraldUnauthorizedError extends Error {
  readonly code = 'HERALD_ERR_UNAUTHORIZED';
  constructor(message = 'Not allowed to connect to Herald', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HeraldUnauthorizedError';
  }
}

/** A command the realtime server refused or could not answer; `code` is the server's (`HERALD_ERR_…`). */
export class HeraldError extends Error {
  // `declare`: set in the constructor, no class field emitted as well (bytes of the browser bundle).
  declare readonly code: string;
  /** With `HERALD_ERR_RATE_LIMITED`: when the command may be sent again. */
  declare readonly retryAfterMs: number | undefined;
  constructor(code: string, message: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(message, options);
    this.name = 'HeraldError';
    this.code = code;
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/**
 * The value of a realtime server's reply to a command (`ok` left out); its refusal, or an answer of
 * no reply's shape (`HERALD_ERR_BAD_RESPONSE`), thrown as a {@link HeraldError}.
 */
export function replyValue(op: string, reply: unknown): Record<string, unknown> {
  const { ok, ...value } = (reply ?? {}) as {
    ok?: boolean;
    code?: string;
    error?: string;
    retryAfterMs?: number;
  };
  // The refusal is the error's options: its `retryAfterMs` goes along (it has no `cause`).
  if (ok !== true)
    throw new HeraldError(
      value.code ?? 'HERALD_ERR_BAD_RESPONSE',
      value.error ?? `No reply of Herald's shape to ${op}.`,
      value,
    );
  return value;
}
