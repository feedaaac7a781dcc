import type { InboxOffset, NotificationEvent, UnreadEvent } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { toEvent } from './checks.js';
import type { InboxKeys } from './keys.js';
import { readReplies } from './reads.js';
import { type InboxListing, type InboxPage, PAGE_BYTES } from './types.js';

/** Entries the first command of a page asks for: at most ~1 MB of the largest notifications. */
const FIRST_CHUNK = 64;

type RawEntry = [string, string[]];

/** The bytes of an entry's fields as Redis stores them (its id and its JSON). */
function sizeOf([, fields]: RawEntry): number {
  let bytes = 0;
  for (const field of fields) bytes += field.length;
  return bytes;
}

/**
 * Up to `limit` entries of `stream` from `start` towards `end` (XRANGE, or XREVRANGE `backwards`), in
 * commands of a bounded size, stopping once they hold {@link PAGE_BYTES}: the first asks for
 * {@link FIRST_CHUNK}, the next for what the average entry so far leaves room for. `more`: cut by the
 * limit or the size with an entry after it; false once the stream ends within the page.
 */
export async function rangeWithin(
  redis: Redis | Cluster,
  stream: string,
  start: string,
  end: string,
  limit: number,
  backwards = false,
): Promise<{ raw: RawEntry[]; more: boolean }> {
  const raw: RawEntry[] = [];
  let bytes = 0;
  let from = start;
  let ask = Math.min(limit, FIRST_CHUNK);
  for (;;) {
    const chunk = (await (backwards
      ? redis.xrevrange(stream, from, end, 'COUNT', ask)
      : redis.xrange(stream, from, end, 'COUNT', ask))) as RawEntry[];
    for (const entry of chunk) {
      raw.push(entry);
      bytes += sizeOf(entry);
    }
    const last = chunk.at(-1);
    if (last === undefined || chunk.length < ask) return { raw, more: false };
    if (raw.length >= limit || bytes >= PAGE_BYTES) {
      // Cut by the limit or the size: more only if an entry follows (a page that ends exactly at the
      // stream's end said more, and the next page was empty).
      const after = `(${last[0]}`;
      const next = (await (backwards
        ? redis.xrevrange(stream, after, end, 'COUNT', 1)
        : redis.xrange(stream, after, end, 'COUNT', 1))) as RawEntry[];
      return { raw, more: next.length > 0 };
    }
    from = `(${last[0]}`;
    ask = Math.min(limit - raw.length, Math.max(1, Math.floor((PAGE_BYTES - bytes) / (bytes / raw.length))));
  }
}

/**
 * {@link Inbox.list}'s page: `page`'s entries with whether each is read (one `SMISMEMBER` of the unread
 * set) and when it was delivered (its marker's `deliveredAt`), in one round trip (a pipeline); `nextAfter` set when
 * the page was cut (by its limit or its size: `page.more`).
 */
export async function listingOf(
  redis: Redis | Cluster,
  keys: InboxKeys,
  page: InboxPage,
  unread: UnreadEvent,
): Promise<InboxListing> {
  if (page.entries.length === 0) return { items: [], nextAfter: null, trimmed: page.trimmed, unread };
  const ids = page.entries.map((entry) => entry.id);
  // A pipeline: a full Redis (maxmemory) refuses a MULTI's reads too.
  const [unreadFlags, ...delivered] = (await readReplies(redis, (client) => [
    client.smismember(keys.unread, ...ids),
    ...ids.map((id) => client.hmget(keys.marker(id), 'deliveredAt', 'state')),
  ])) as [number[], ...(string | null)[][]];
  // Routed ids without a marker there: stored by a worker from before routed ids, under the user's keys.
  const legacy = ids.flatMap((id, index) =>
    delivered[index]?.[1] == null && keys.routes(id) ? [index] : [],
  );
  if (legacy.length > 0) {
    const found = await readReplies(redis, (client) =>
      legacy.map((index) => client.hmget(keys.legacyMarker(ids[index] ?? ''), 'deliveredAt', 'state')),
    );
    legacy.forEach((index, i) => {
      delivered[index] = found[i] ?? [];
    });
  }
  const items = page.entries.map((entry, index) => {
    const deliveredAt = delivered[index]?.[0];
    return {
      ...entry,
      read: unreadFlags[index] !== 1,
      deliveredAt: deliveredAt ? new Date(Number(deliveredAt)).toISOString() : null,
    };
  });
  return { items, nextAfter: page.more ? page.lastOffset : null, trimmed: page.trimmed, unread };
}

/**
 * The entries of a page read backwards ({@link Inbox.list} with `newest` or `before`): the `limit`
 * newest, or the `limit` just before `before` (exclusive), at most {@link PAGE_BYTES} of them, oldest
 * first; `more` when cut (more may come before the first).
 */
export async function entriesBefore(
  redis: Redis | Cluster,
  keys: InboxKeys,
  before: InboxOffset | undefined,
  limit: number,
): Promise<{ entries: NotificationEvent[]; more: boolean }> {
  const { raw, more } = await rangeWithin(
    redis,
    keys.stream,
    before === undefined ? '+' : `(${before}`,
    '-',
    limit,
    true,
  );
  return { entries: raw.reverse().map(([offset, fields]) => toEvent(offset, fields)), more };
}
