import { settleWithin } from '@herald/config';
import { InboxError, isOffset } from '@herald/inbox';
import { type CommandReply, ErrorCode, type InboxOffset } from '@herald/protocol';
import type { Logger } from 'pino';

type Reply = (answer: CommandReply) => void;

/**
 * Longest a client command waits for Redis, ms: then it is answered `HERALD_ERR_UNAVAILABLE`, as when
 * Redis is down. A frozen Redis (a paused host, a hung failover) keeps its connections and answers
 * nothing; without a bound a client with no timeout of its own waits for as long. The command still
 * runs to its end (every one is safe to send again).
 */
export const COMMAND_REDIS_MS = 2000;

/** Why {@link withinCommandTime} gave up: answered as Redis unavailable. */
export class CommandTimeoutError extends Error {
  constructor() {
    super(`Redis did not answer within ${COMMAND_REDIS_MS} ms`);
    this.name = 'CommandTimeoutError';
  }
}

const TIMED_OUT = Symbol('timed out');

/** `work`, or a {@link CommandTimeoutError} once {@link COMMAND_REDIS_MS} have passed without it. */
export async function withinCommandTime<T>(work: Promise<T>): Promise<T> {
  const result = await settleWithin(work, COMMAND_REDIS_MS, TIMED_OUT);
  if (result === TIMED_OUT) throw new CommandTimeoutError();
  return result as T;
}

/**
 * The body and acknowledgement of a client command. A client that sends no body
 * (`socket.emit('read-all', ack)`) puts its callback in the body's place: it is the acknowledgement.
 */
export function commandArgs(args: readonly unknown[]): [body: unknown, reply: Reply | undefined] {
  const [first, second] = args;
  if (typeof first === 'function') return [undefined, first as Reply];
  return [first, typeof second === 'function' ? (second as Reply) : undefined];
}

/**
 * Socket middleware (after the budgets): a command is a body and a callback (`emit('ack', { ids },
 * callback)`), the callback last. One with more arguments before its callback is answered
 * `HERALD_ERR_BAD_REQUEST` naming the event, not run: {@link commandArgs} would take the second argument
 * for the callback, find none, and the caller would wait out its own timeout.
 */
export function refuseExtraArguments(packet: unknown[], next: (error?: Error) => void): void {
  const [event, ...args] = packet;
  const reply = args.at(-1);
  if (typeof reply !== 'function' || args.length <= 2) {
    next();
    return;
  }
  (reply as Reply)({
    ok: false,
    code: ErrorCode.BAD_REQUEST,
    error: `${JSON.stringify(String(event).slice(0, 64))} takes one body and a callback; ${args.length - 1} arguments came before the callback.`,
  });
}

/** A command the client cannot have as asked: answered `{ ok: false, code, error }`. */
export class CommandError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'CommandError';
    this.code = code;
  }
}

/**
 * Runs the command of `args` and acknowledges it (when the client asked): what `run` answers, or
 * `{ ok: false, code, error }` for bad input (`InboxError`, `CommandError`), else
 * `HERALD_ERR_UNAVAILABLE` (Redis failed, or did not answer within {@link COMMAND_REDIS_MS}).
 */
export function answerCommand<Answer>(
  args: readonly unknown[],
  run: (body: unknown) => Promise<Answer>,
  log: Logger,
): void {
  const [body, reply] = commandArgs(args) as [unknown, ((answer: unknown) => void) | undefined];
  withinCommandTime(run(body)).then(
    (result) => reply?.(result),
    (error: unknown) => {
      if (error instanceof InboxError || error instanceof CommandError) {
        reply?.({ ok: false, code: error.code, error: error.message });
        return;
      }
      log.warn({ err: error }, 'command failed');
      reply?.({ ok: false, code: ErrorCode.UNAVAILABLE, error: 'Redis unavailable: retry shortly.' });
    },
  );
}

/**
 * Answers an event the server does not know (a typo: `mark-read`), when it came with a callback,
 * `{ ok: false, code: HERALD_ERR_BAD_REQUEST, error }` naming it: without an answer the caller waits out
 * its own timeout and never learns why. (It cost its budgets like any event, in `socket.use`.)
 */
export function answerUnknownEvents(socket: {
  onAny(listener: (event: unknown, ...args: unknown[]) => void): void;
  eventNames(): (string | symbol)[];
  listenerCount(event: string): number;
}): void {
  socket.onAny((event, ...args) => {
    const reply = args.at(-1);
    // Known: a handler is registered for it (the events this server answers, whoever registered them),
    // but Socket.IO's own (`error`), which a client can send too and no handler of Herald's answers.
    if (typeof reply !== 'function') return;
    if (typeof event === 'string' && !RESERVED.has(event) && socket.listenerCount(event) > 0) return;
    const name = JSON.stringify(String(event).slice(0, 64));
    const known = socket.eventNames().filter((known) => typeof known === 'string' && !RESERVED.has(known));
    (reply as Reply)({
      ok: false,
      code: ErrorCode.BAD_REQUEST,
      error: `Unknown event ${name}: the events a client sends are ${known.join(', ')}.`,
    });
  });
}

/** Socket.IO's own events on a server socket, which no client sends. */
const RESERVED: ReadonlySet<string> = new Set([
  'disconnect',
  'disconnecting',
  'error',
  'newListener',
  'removeListener',
]);

/**
 * The `upTo` of a `read-all` body: none (everything) for no body or `{}`; anything but an object
 * (`['id']`: a `read` sent as `read-all`) is refused rather than taken as "everything".
 */
export function upToOf(body: unknown): InboxOffset | undefined {
  if (body === undefined || body === null) return undefined;
  if (!isPlainBody(body))
    throw new InboxError(
      ErrorCode.INBOX_INVALID_ARGUMENT,
      'Expected { upTo?: offset } (read-all), or no body',
    );
  // Another key is a mistake that would mark everything read: `ids` (a read sent as read-all), a typo.
  refuseOtherKeys(body, 'read-all', ['upTo']);
  const upTo = (body as { upTo?: unknown }).upTo;
  if (upTo !== undefined && !isOffset(upTo))
    throw new InboxError(ErrorCode.INBOX_INVALID_OFFSET, 'upTo is not an offset');
  return upTo;
}

/** A body that is a plain object: not an array, not a binary attachment (a Buffer or an ArrayBuffer). */
export function isPlainBody(body: unknown): body is Record<string, unknown> {
  return (
    typeof body === 'object' &&
    body !== null &&
    !Array.isArray(body) &&
    !ArrayBuffer.isView(body) &&
    !(body instanceof ArrayBuffer)
  );
}

/** Refuses a key of `body` other than `allowed`, naming it (a typo would silently change the command). */
export function refuseOtherKeys(
  body: Record<string, unknown>,
  event: string,
  allowed: readonly string[],
): void {
  const other = Object.keys(body).filter((key) => !allowed.includes(key));
  if (other.length === 0) return;
  throw new InboxError(
    ErrorCode.INBOX_INVALID_ARGUMENT,
    `${event} takes ${allowed.join(', ')} only, not ${other
      .slice(0, 5)
      .map((key) => JSON.stringify(key.slice(0, 64)))
      .join(', ')}`,
  );
}
