import { userKey } from '@herald/protocol';
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';

/** A BullMQ queue as Herald names it: its keys are `<prefix>:<name>:…`. */
export interface QueueRef {
  name: string;
  prefix: string;
}

/** The notification queue's settings: `HERALD_QUEUE_NAME`, `HERALD_QUEUE_PREFIX`, `HERALD_QUEUE_PARTITIONS`. */
export interface QueueSettings extends QueueRef {
  /** How many queues the notifications are spread over (1: the one queue of before). */
  partitions: number;
}

/** Redis Cluster's hash slots. */
const SLOTS = 16_384;
/** The most partitions `HERALD_QUEUE_PARTITIONS` accepts (16 slots each). */
export const MAX_QUEUE_PARTITIONS = 1024;

/**
 * The queue of each partition of `queue`, by partition index. Partition 0 is the queue itself
 * (`{herald}:notifications`, so a deployment that goes from one partition to more keeps its queue);
 * partition i ≥ 1 changes the hash tag of the prefix (`{herald}` → `{herald-i}`, `{herald-i-k}`): the
 * tag is the first whose slot lies in the middle half of a window of 16,384 / N slots of its own, the
 * windows tiling the slot ring. With the default slot ranges of a cluster (even, contiguous, as
 * `redis-cli --cluster create` assigns them) and N a multiple of the masters, each master holds exactly
 * N / masters partitions. A prefix without a hash tag (a single Redis) gets `-i` appended.
 * Deterministic: every app computes the same names from the same settings.
 *
 * @example
 * ```ts
 * queuePartitions({ name: 'notifications', prefix: '{herald}', partitions: 3 });
 * // [{ name: 'notifications', prefix: '{herald}' }, { …, prefix: '{herald-1-4}' }, { …, prefix: '{herald-2}' }]
 * ```
 */
export function queuePartitions(queue: QueueSettings): QueueRef[] {
  const count = queue.partitions;
  if (!Number.isInteger(count) || count < 1 || count > MAX_QUEUE_PARTITIONS) {
    throw new RangeError(`partitions must be an integer from 1 to ${MAX_QUEUE_PARTITIONS}, not ${count}`);
  }
  const { name, prefix } = queue;
  if (count === 1) return [{ name, prefix }];
  const tag = hashTagOf(prefix);
  if (tag === undefined) {
    return Array.from({ length: count }, (_unused, index) => ({
      name,
      prefix: index === 0 ? prefix : `${prefix}-${index}`,
    }));
  }
  const width = SLOTS / count;
  const windowOf = (slot: number) => Math.floor(slot / width);
  // Partition 0 keeps its slot, whichever window that is; the others take the other windows in order.
  const taken = windowOf(calculateSlot(tag.tag));
  const windows = Array.from({ length: count }, (_unused, index) => index).filter((w) => w !== taken);
  const partitions: QueueRef[] = [{ name, prefix }];
  for (const [offset, window] of windows.entries()) {
    const index = offset + 1;
    // The middle half of the window: a slot that a master boundary (at a window's edge) never splits.
    const low = Math.ceil((window + 0.25) * width);
    const high = Math.max(low, Math.floor((window + 0.75) * width));
    let candidate = `${tag.tag}-${index}`;
    for (let attempt = 1; !inRange(calculateSlot(candidate), low, high); attempt++) {
      candidate = `${tag.tag}-${index}-${attempt}`;
    }
    partitions.push({ name, prefix: `${prefix.slice(0, tag.start)}${candidate}${prefix.slice(tag.end)}` });
  }
  return partitions;
}

/**
 * The partition of `(tenantId, userId)` among `partitions`: always the same, so one user's
 * notifications share a queue and keep their order.
 *
 * @example
 * ```ts
 * const queue = queues[partitionOf('acme', 'alice', queues.length)];
 * ```
 */
export function partitionOf(tenantId: string, userId: string, partitions: number): number {
  return partitions <= 1 ? 0 : calculateSlot(userKey(tenantId, userId)) % partitions;
}

/**
 * The partitions a worker consumes, from `HERALD_WORKER_PARTITIONS` (`all`, or indexes and ranges such
 * as `0-3,8`), in order; throws a `RangeError` naming what is wrong (an index past the last partition,
 * a reversed range, an empty list).
 *
 * @example
 * ```ts
 * partitionShare('0-2,5', 8); // [0, 1, 2, 5]
 * ```
 */
export function partitionShare(spec: string, partitions: number): number[] {
  const text = spec.trim();
  if (text === '' || text === 'all') return Array.from({ length: partitions }, (_unused, index) => index);
  const chosen = new Set<number>();
  for (const part of text.split(',')) {
    const match = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (!match) throw new RangeError(`"${part}" is not a partition index or range (such as 0-3)`);
    const from = Number(match[1]);
    const to = match[2] === undefined ? from : Number(match[2]);
    if (to < from) throw new RangeError(`range "${part.trim()}" ends before it starts`);
    if (to >= partitions) {
      throw new RangeError(
        `partition ${to} does not exist: HERALD_QUEUE_PARTITIONS=${partitions} makes partitions 0 to ${partitions - 1}`,
      );
    }
    for (let index = from; index <= to; index++) chosen.add(index);
  }
  return [...chosen].sort((a, b) => a - b);
}

/** A key in `queue`'s slot (BullMQ's job id counter): where WAIT and WAITAOF find its master. */
export function queueSlotKey(queue: QueueRef): string {
  return `${queue.prefix}:${queue.name}:id`;
}

/**
 * The hash, in partition 0's slot, where the gateways record every `HERALD_QUEUE_PARTITIONS` they
 * enqueue with (field: the count; value: ms since epoch of the last record), so that the workers of a
 * later count find the partitions of an earlier one and drain what is still queued there: a change of
 * the count renames the partitions (their tags are chosen per count), and a job nobody consumes would
 * be lost.
 */
export function layoutRegistryKey(queue: QueueRef): string {
  return `${queue.prefix}:${queue.name}:herald-layouts`;
}

/**
 * Records that `queue.partitions` is in use now (a gateway does at start and then every minute).
 *
 * @example
 * ```ts
 * await recordLayout(redis, config.queue);
 * ```
 */
export async function recordLayout(
  redis: Redis | Cluster,
  queue: QueueSettings,
  now = Date.now(),
): Promise<void> {
  await redis.hset(layoutRegistryKey(queue), String(queue.partitions), String(now));
}

/** A partition count recorded in the registry other than the current one, and its partitions that are not the current ones'. */
export interface EarlierLayout {
  partitions: number;
  /** ms since epoch of its last record. */
  recordedAt: number;
  /** Its partitions whose queues are not among the current count's (those are consumed anyway). */
  leftovers: QueueRef[];
}

/**
 * The counts recorded in `queue`'s registry other than `queue.partitions`, with their partitions that
 * the current count does not have. A field that is not a valid count is skipped.
 *
 * @example
 * ```ts
 * for (const layout of await earlierLayouts(redis, config.queue)) console.log(layout.leftovers);
 * ```
 */
export async function earlierLayouts(redis: Redis | Cluster, queue: QueueSettings): Promise<EarlierLayout[]> {
  const recorded = await redis.hgetall(layoutRegistryKey(queue));
  const current = new Set(queuePartitions(queue).map((ref) => `${ref.prefix}:${ref.name}`));
  const layouts: EarlierLayout[] = [];
  for (const [field, at] of Object.entries(recorded)) {
    const partitions = Number(field);
    if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_QUEUE_PARTITIONS) continue;
    if (partitions === queue.partitions) continue;
    const leftovers = queuePartitions({ ...queue, partitions }).filter(
      (ref) => !current.has(`${ref.prefix}:${ref.name}`),
    );
    layouts.push({ partitions, recordedAt: Number(at) || 0, leftovers });
  }
  return layouts.sort((a, b) => a.partitions - b.partitions);
}

/** The hash tag of `key` as Redis reads it (the first `{…}` with something inside), and where it sits. */
function hashTagOf(key: string): { tag: string; start: number; end: number } | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  if (close <= open + 1) return undefined;
  return { tag: key.slice(open + 1, close), start: open + 1, end: close };
}

function inRange(value: number, low: number, high: number): boolean {
  return value >= low && value <= high;
}

/** What {@link jobCountsOf} reads of a queue (a BullMQ `Queue`). */
export interface CountedQueue {
  getJobCounts(...types: string[]): Promise<Record<string, number>>;
}

/**
 * BullMQ's job counts (`types`, as `Queue.getJobCounts` takes them) summed over every partition of the
 * notification queue: the queue depth a dashboard or `/metrics` shows. BullMQ's `prioritized` jobs are
 * counted as `waiting`: every Herald job has a priority (`DEFAULT_PRIORITY` of `@herald/protocol`, so
 * that one sent with `priority: 1` goes first), and the prioritized set is where BullMQ keeps them while
 * they wait for a worker.
 *
 * @example
 * ```ts
 * const { waiting, failed } = await jobCountsOf(queues, 'waiting', 'failed');
 * ```
 */
export async function jobCountsOf(
  queues: readonly CountedQueue[],
  ...types: string[]
): Promise<Record<string, number>> {
  const counts = await Promise.all(queues.map((queue) => queue.getJobCounts(...types)));
  const sum: Record<string, number> = {};
  for (const partition of counts) {
    for (const [type, count] of Object.entries(partition)) {
      const as = type === 'prioritized' ? 'waiting' : type;
      sum[as] = (sum[as] ?? 0) + count;
    }
  }
  return sum;
}
