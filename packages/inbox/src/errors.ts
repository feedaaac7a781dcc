import { ErrorCode } from '@herald/protocol/error-codes';

/**
 * Stable codes of every error `@herald/inbox` throws.
 *
 * @example
 * ```ts
 * if (error instanceof InboxError && error.code === InboxErrorCode.INVALID_OFFSET) reply.code(400);
 * ```
 */
export const InboxErrorCode = {
  /** An offset that is not `<ms>-<seq>`: the caller passes what it got from a notification. */
  INVALID_OFFSET: ErrorCode.INBOX_INVALID_OFFSET,
  /** A user id, id list, limit or option out of range. */
  INVALID_ARGUMENT: ErrorCode.INBOX_INVALID_ARGUMENT,
  /** A mute that would give the user more than `MUTES_MAX` mutes: nothing was added (answer 409). */
  TOO_MANY_MUTES: ErrorCode.TOO_MANY_MUTES,
  /** A Lua script answered something it never answers: a bug or a foreign script under the same name. */
  UNEXPECTED_REPLY: ErrorCode.INBOX_UNEXPECTED_REPLY,
} as const;
export type InboxErrorCode = (typeof InboxErrorCode)[keyof typeof InboxErrorCode];

/**
 * An inbox operation that cannot be done as asked; `message` says what to change.
 *
 * @example
 * ```ts
 * throw new InboxError(InboxErrorCode.INVALID_ARGUMENT, 'limit must be 1..1000');
 * ```
 */
export class InboxError extends Error {
  readonly code: InboxErrorCode;
  constructor(code: InboxErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InboxError';
    this.code = code;
  }
}

/**
 * `value` as an error message shows it: a string quoted and cut at 64 characters, anything else by its
 * kind (`an array`, `an object`, `a number`, `null`, …). Never stringified: a value from a client may be
 * nested deep enough that `String()` overflows the stack, or carry a `toString` of its own.
 *
 * @example
 * ```ts
 * shown('orders eu'); // '"orders eu"'
 * shown([['x']]);     // 'an array'
 * ```
 */
export function shown(value: unknown): string {
  if (typeof value === 'string') return `"${value.length > 64 ? `${value.slice(0, 64)}…` : value}"`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (value === undefined) return 'undefined';
  const kind = typeof value;
  return kind === 'object' ? 'an object' : `a ${kind}`;
}
