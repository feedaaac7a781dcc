import { InboxError } from '@herald/inbox';
import { type CommandReply, ErrorCode } from '@herald/protocol';
import type { Logger } from 'pino';

type Reply = (answer: CommandReply) => void;

/**
 * The body and acknowledgement of a client command. A client that sends no body
 * (`socket.emit('read-all', ack)`) puts its callback in the body's place: it is the acknowledgement.
 */
export function commandArgs(args: readonly unknown[]): [body: unknown, reply: Reply | undefined] {
  const [first, second] = args;
  if (typeof first === 'function') return [undefined, first as Reply];
  return [first, typeof second === 'function' ? (second as Reply) : undefined];
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
 * `HERALD_ERR_UNAVAILABLE` (Redis).
 */
export function answerCommand<Answer>(
  args: readonly unknown[],
  run: (body: unknown) => Promise<Answer>,
  log: Logger,
): void {
  const [body, reply] = commandArgs(args) as [unknown, ((answer: unknown) => void) | undefined];
  run(body).then(
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
