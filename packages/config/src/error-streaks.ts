/** What {@link connectionErrorLog} writes to: a pino (or Fastify) logger's `warn`. */
export interface WarnLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * An `error` listener for a Redis connection (ioredis, or a BullMQ queue or worker) that logs the first
 * error of a streak (the same message again and again) whole, then at most one line every `everyMs`
 * (30 s) saying how many more came; each message has its streak (another one is logged at once). A
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
): (error: Error, to?: WarnLog) => void {
  const everyMs = options.everyMs ?? 30_000;
  const now = options.now ?? Date.now;
  // By message: when it was last logged, and how many came since. Another message (a refused password,
  // a database Redis does not have, named by a listener of createRedis after the raw error; or two
  // errors an outage alternates) has a streak of its own. At most 20 kept, the oldest forgotten.
  const streaks = new Map<string, { loggedAt: number; unlogged: number }>();
  // `to`: where this line goes, when not `log` (a request's own logger, which carries its id).
  return (error: Error, to: WarnLog = log) => {
    const at = now();
    const streak = streaks.get(error.message);
    if (streak !== undefined && at - streak.loggedAt < everyMs) {
      streak.unlogged++;
      return;
    }
    const unlogged = streak?.unlogged ?? 0;
    if (unlogged > 0) {
      to.warn(
        { ...fields, err: error, repeated: unlogged },
        `${message} (${unlogged} more like it since the last line)`,
      );
    } else {
      to.warn({ ...fields, err: error }, message);
    }
    streaks.delete(error.message);
    streaks.set(error.message, { loggedAt: at, unlogged: 0 });
    if (streaks.size > 20) streaks.delete(streaks.keys().next().value as string);
  };
}
