/**
 * What `work` settles with, or `late` once `ms` have passed without it: what a caller waits for Redis at
 * most (a frozen Redis keeps its connections and answers nothing). `work` still runs to its end.
 *
 * @example
 * ```ts
 * const counts = await settleWithin(queue.getJobCounts(), 1000, undefined);
 * ```
 */
export async function settleWithin<T, L>(work: Promise<T>, ms: number, late: L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<L>((resolve) => {
    // After the I/O already there (one setImmediate): a process busy longer than `ms` finds the timer due
    // and the answer waiting in its socket at once, and timers run first; the answer came in time.
    timer = setTimeout(() => setImmediate(() => resolve(late)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
