import type { Cluster, Redis } from 'ioredis';
import { type QueueRef, queueSlotKey } from './partitions.js';

/**
 * What an operator reads when Redis refuses writes for memory: the cause and what to do. Redis at
 * `maxmemory` with `maxmemory-policy noeviction` (what Herald requires) answers every command that may
 * grow memory with `OOM command not allowed…` and runs none of it (a script is refused at its first
 * write, before anything is written).
 */
export const OUT_OF_MEMORY_ADVICE =
  'Redis is out of memory (used memory above maxmemory, maxmemory-policy noeviction): it refuses every write. Free memory or raise maxmemory (docs/operations.md, Sizing)';

/** Redis refused a command for memory (its reply `OOM …`): nothing of that command was done. */
export class RedisOutOfMemoryError extends Error {
  readonly code = 'HERALD_ERR_REDIS_OUT_OF_MEMORY';
  constructor(options: { cause?: unknown } = {}) {
    super(OUT_OF_MEMORY_ADVICE, options);
    this.name = 'RedisOutOfMemoryError';
  }
}

/**
 * True when `error` is Redis refusing a command for memory: an `OOM` reply, a transaction Redis
 * discarded because a command of it was refused so (`EXECABORT`, ioredis's `previousErrors`), or a
 * {@link RedisOutOfMemoryError}. Each means Redis did none of that command (or transaction).
 */
export function isOutOfMemory(error: unknown): boolean {
  if (error instanceof RedisOutOfMemoryError) return true;
  if (!(error instanceof Error)) return false;
  if (error.message.startsWith('OOM ')) return true;
  const previous = (error as { previousErrors?: unknown[] }).previousErrors;
  return (
    error.message.startsWith('EXECABORT') &&
    Array.isArray(previous) &&
    previous.length > 0 &&
    previous.every(isOutOfMemory)
  );
}

/**
 * Resolves when Redis takes writes in `queue`'s slot (where every send goes); rejects with a
 * {@link RedisOutOfMemoryError} when it refuses them for memory, with the error itself otherwise. A
 * `PING` answers on a full Redis too: readiness asks this as well, so that a full Redis takes the
 * instances out of rotation as a stopped one does. The probe is `SET <key> '' XX` on a key nobody
 * writes: Redis checks memory before any command that may grow it, and `XX` on a missing key then
 * writes nothing.
 *
 * @example
 * ```ts
 * ready: () => Promise.all([redis.ping(), checkWritable(redis, config.queue)]),
 * ```
 */
export async function checkWritable(redis: Redis | Cluster, queue: QueueRef): Promise<void> {
  try {
    await redis.set(`${queueSlotKey(queue)}:herald-write-probe`, '', 'XX');
  } catch (error) {
    throw isOutOfMemory(error) ? new RedisOutOfMemoryError({ cause: error }) : error;
  }
}
