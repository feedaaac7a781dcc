import type { ChainableCommander } from 'ioredis';

/**
 * The replies of `pipeline` (reads of one slot), in order; when Redis answered any of them with an error,
 * those of `again` (the same reads, one command each) instead, or what it throws. On a Cluster whose
 * slot moved since the client read its table (a resharding, a master restarted), the keyed commands of
 * a pipeline come back `MOVED` or `ASK` while a keyless one (`TIME`) is answered, and ioredis replays a
 * pipeline only when every command of it was redirected; a command of its own is redirected and
 * retried. Those errors were read as empty replies: an unread count of 0, a notification not found.
 *
 * @example
 * ```ts
 * const [uv, count] = await readReplies(redis.pipeline().hget(meta, 'uv').scard(unread), () =>
 *   Promise.all([redis.hget(meta, 'uv'), redis.scard(unread)]),
 * );
 * ```
 */
export async function readReplies<T extends unknown[]>(
  pipeline: ChainableCommander,
  again: () => Promise<T>,
): Promise<T> {
  const results = (await pipeline.exec()) ?? [];
  if (results.some(([error]) => error)) return await again();
  return results.map(([, value]) => value) as T;
}
