import type { Cluster, Redis } from 'ioredis';

/**
 * The replies of `reads` (commands of one slot), sent in one pipeline; when Redis answered any of them
 * with an error, the same reads again, one command each, or what they throw. On a Cluster whose slot
 * moved since the client read its table (a resharding, a master restarted), the keyed commands of a
 * pipeline come back `MOVED` or `ASK` while a keyless one (`TIME`) is answered, and ioredis replays a
 * pipeline only when every command of it was redirected; a command of its own is redirected and
 * retried. Those errors were read as empty replies: an unread count of 0, a notification not found.
 * `reads` is called on the pipeline first (what it returns there is not used), so that the commands are
 * written once.
 *
 * @example
 * ```ts
 * const [uv, count] = await readReplies(redis, (r) => [r.hget(meta, 'uv'), r.scard(unread)]);
 * ```
 */
export async function readReplies<T extends readonly Promise<unknown>[] | []>(
  redis: Redis | Cluster,
  reads: (client: Redis | Cluster) => T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  type Replies = { -readonly [K in keyof T]: Awaited<T[K]> };
  const pipeline = redis.pipeline();
  // A pipeline takes the same calls as a client (each queues its command and returns the pipeline).
  reads(pipeline as unknown as Redis);
  const results = (await pipeline.exec()) ?? [];
  if (results.some(([error]) => error)) return (await Promise.all(reads(redis))) as Replies;
  return results.map(([, value]) => value) as Replies;
}
