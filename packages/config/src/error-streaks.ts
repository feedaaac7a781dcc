/** What {@link connectionErrorLog} writes to: a pino (or Fastify) logger's `warn`. */
export interface WarnLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * An `error` listener for a Redis connection (ioredis, or a BullMQ queue or worker) that logs the first
 * error of a streak whole, then at most one line every `everyMs` (30 s) saying how many more came. A
 * connection that retries every 500 ms while Redis is down otherwise logged two stack traces a second,
 * each of a process's ~10 connections: ~20 lines a second from one worker, ~70,000 an hour of outage.
 *
 * @example
 * ```ts
 * redis.on('error', connectionErrorLog(log, 'redis connection error'));
 * ```
 */
export function connectionErrorLog(
  log: WarnLog,
  message: string,
  fields: Record<string, unknown> = {},
  options: { everyMs?: number; now?: () => number } = {},
): (error: Error) => void {
  const everyMs = options.everyMs ?? 30_000;
  const now = options.now ?? Date.now;
  let lastLoggedAt: number | undefined;
  let unlogged = 0;
  return (error: Error) => {
    const at = now();
    if (lastLoggedAt !== undefined && at - lastLoggedAt < everyMs) {
      unlogged++;
      return;
    }
    if (unlogged > 0) {
      log.warn(
        { ...fields, err: error, repeated: unlogged },
        `${message} (${unlogged} more like it since the last line)`,
      );
    } else {
      log.warn({ ...fields, err: error }, message);
    }
    lastLoggedAt = at;
    unlogged = 0;
  };
}
