import type { InboxOffset, NotificationEvent, UnreadEvent } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { toEvent } from './checks.js';
import type { InboxKeys } from './keys.js';
import type { InboxListing, InboxPage } from './types.js';

/**
 * {@link Inbox.list}'s page: `page`'s entries with whether each is read (one `SMISMEMBER` of the unread
 * set) and when it was delivered (its marker's `deliveredAt`), in one round trip (a pipeline); `nextAfter` set when
 * the page is full (`limit`).
 */
export async function listingOf(
  redis: Redis | Cluster,
  keys: InboxKeys,
  page: InboxPage,
  limit: number,
  unread: UnreadEvent,
): Promise<InboxListing> {
  if (page.entries.length === 0) return { items: [], nextAfter: null, trimmed: page.trimmed, unread };
  const ids = page.entries.map((entry) => entry.id);
  // A pipeline: a full Redis (maxmemory) refuses a MULTI's reads too.
  const pipeline = redis.pipeline().smismember(keys.unread, ...ids);
  for (const id of ids) pipeline.hget(keys.marker(id), 'deliveredAt');
  const results = (await pipeline.exec()) ?? [];
  const unreadFlags = (results[0]?.[1] ?? []) as number[];
  const items = page.entries.map((entry, index) => {
    const deliveredAt = results[index + 1]?.[1] as string | null | undefined;
    return {
      ...entry,
      read: unreadFlags[index] !== 1,
      deliveredAt: deliveredAt ? new Date(Number(deliveredAt)).toISOString() : null,
    };
  });
  return { items, nextAfter: items.length === limit ? page.lastOffset : null, trimmed: page.trimmed, unread };
}

/**
 * The entries of a page read backwards ({@link Inbox.list} with `newest` or `before`): the `limit`
 * newest, or the `limit` just before `before` (exclusive), oldest first.
 */
export async function entriesBefore(
  redis: Redis | Cluster,
  keys: InboxKeys,
  before: InboxOffset | undefined,
  limit: number,
): Promise<NotificationEvent[]> {
  const raw = (await redis.xrevrange(
    keys.stream,
    before === undefined ? '+' : `(${before}`,
    '-',
    'COUNT',
    limit,
  )) as [string, string[]][];
  return raw.reverse().map(([offset, fields]) => toEvent(offset, fields));
}
