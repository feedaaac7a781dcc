import { type FanoutAudience, type RecipientCounts, TOPIC_MAX_LENGTH, TOPIC_PATTERN } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { checkUserId } from './checks.js';
import { InboxError, InboxErrorCode, shown } from './errors.js';
import { escapeTag, tenantLayout } from './keys.js';
import { DEFAULT_INBOX_PREFIX } from './types.js';

/** A page of an audience (a topic's subscribers or a tenant's users), in user id order. */
export interface AudiencePage {
  userIds: string[];
  /** The last user id of the page: pass it as `after` for the next; null when the page reached the end. */
  nextAfter: string | null;
}

/** The field of a fan-out's record that says why a recipient failed: this, then the user id. */
const FAILED_FIELD = 'failed:';
/** Most characters of a recipient's failure kept in a fan-out's record (`failed:<user id>`). */
const FAILURE_MAX_LENGTH = 500;

/** Progress of one fan-out (topic send or broadcast), its checkpoint and its status record. */
export interface FanoutRecord extends RecipientCounts {
  /** Who it goes to (kept with the record: the job may be gone). */
  audience: FanoutAudience;
  /** `fanning-out` until the last chunk is done, then `sent`. */
  state: 'fanning-out' | 'sent';
  /** The last user id done: the fan-out resumes after it (absent before the first chunk). */
  cursor: string | undefined;
  /** When it was sent (ms since epoch), once `sent`. */
  sentAtMs: number | undefined;
  /** Why each recipient whose inbox Redis refused failed (user id → error), from its `failed:<user id>`. */
  failures: ReadonlyMap<string, string>;
}

/** How long a process trusts that a user it added to its tenant's users is still there, ms. */
const REMEMBERED_MS = 10 * 60_000;
/** Most users a process keeps as recently remembered (the oldest go first). */
const REMEMBERED_MAX = 100_000;

/** Characters of a topic name (the `topic` label's): no braces, so it is its own hash tag. */
const TOPIC = new RegExp(TOPIC_PATTERN);

/**
 * Topics and the tenant's user directory, in Redis, beside the inboxes (same prefix, same tenant layout).
 *
 * - A topic's subscribers: a sorted set, every score 0, so it is ordered by user id and read in pages
 *   with `ZRANGE … BYLEX` after the last id seen: a cursor that never skips nor repeats a member that
 *   stays, whatever is added or removed meanwhile. Key `<tenant prefix>topic:{<topic>}`: hash-tagged per
 *   topic (Redis Cluster: a topic is one slot; topics spread over the cluster).
 * - The tenant's users (the audience of a broadcast): every user id the tenant ever notified (directly)
 *   or subscribed to a topic, the same kind of sorted set, `<tenant prefix>users:{<tenant>}`. Topic and
 *   broadcast recipients are subscribers or directory members already.
 * - A fan-out's record: a hash `<tenant prefix>fanout:{<id>}` with its counts and cursor (its checkpoint),
 *   and `failed:<user id>` = why, for each recipient whose inbox Redis refused; kept as long as an inbox
 *   entry (`retentionMs`).
 *
 * Subscriptions and the directory have no TTL: they last until unsubscribed.
 *
 * @example
 * ```ts
 * const topics = new Topics(redis).tenant('acme');
 * await topics.subscribe('orders', ['alice', 'bob']);
 * const page = await topics.page({ topic: 'orders' }, undefined, 500);
 * ```
 */
export class Topics {
  readonly prefix: string;
  readonly tenantId: string;
  readonly #redis: Redis | Cluster;
  readonly #base: string;
  /**
   * Users added to their tenant's users by this process lately (`usersKey` + user id → until when, ms),
   * shared by the tenant views of one root: see {@link remember}.
   */
  readonly #remembered: Map<string, number>;

  constructor(
    redis: Redis | Cluster,
    options: { prefix?: string; tenantId?: string } = {},
    remembered = new Map<string, number>(),
  ) {
    ({
      prefix: this.prefix,
      tenantId: this.tenantId,
      base: this.#base,
    } = tenantLayout(options, DEFAULT_INBOX_PREFIX));
    this.#redis = redis;
    this.#remembered = remembered;
  }

  /** The same topics acting for `tenantId` (a cheap object, sharing this one's memory of users). */
  tenant(tenantId: string): Topics {
    return tenantId === this.tenantId
      ? this
      : new Topics(this.#redis, { prefix: this.prefix, tenantId }, this.#remembered);
  }

  /** The sorted set of `topic`'s subscribers. */
  subscribersKey(topic: string): string {
    return `${this.#base}topic:{${checkTopic(topic)}}`;
  }

  /** The sorted set of the tenant's users (a broadcast's audience). */
  usersKey(): string {
    return `${this.#base}users:{${this.tenantId}}`;
  }

  /** The hash of fan-out `id`: counts, cursor, state. */
  fanoutKey(id: string): string {
    return `${this.#base}fanout:{${escapeTag(id)}}`;
  }

  #audienceKey(audience: FanoutAudience): string {
    return 'topic' in audience ? this.subscribersKey(audience.topic) : this.usersKey();
  }

  /** Subscribes `userIds` to `topic` (and adds them to the tenant's users); answers how many were new. */
  async subscribe(
    topic: string,
    userIds: readonly string[],
  ): Promise<{ changed: number; subscribers: number }> {
    const key = this.subscribersKey(topic);
    const members = scored(userIds);
    const [added, , count] = (await Promise.all([
      this.#redis.zadd(key, ...members),
      this.#redis.zadd(this.usersKey(), 'NX', ...members),
      this.#redis.zcard(key),
    ])) as [number, unknown, number];
    return { changed: added, subscribers: count };
  }

  /** Unsubscribes `userIds` from `topic` (they stay users of the tenant); answers how many were removed. */
  async unsubscribe(
    topic: string,
    userIds: readonly string[],
  ): Promise<{ changed: number; subscribers: number }> {
    const key = this.subscribersKey(topic);
    for (const userId of userIds) checkUserId(userId);
    const [removed, count] = (await Promise.all([
      this.#redis.zrem(key, ...userIds),
      this.#redis.zcard(key),
    ])) as [number, number];
    return { changed: removed, subscribers: count };
  }

  /** Whether `userId` is subscribed to each of `topics`, in their order. */
  async subscribed(userId: string, topics: readonly string[]): Promise<boolean[]> {
    checkUserId(userId);
    const scores = await Promise.all(
      topics.map((topic) => this.#redis.zscore(this.subscribersKey(topic), userId)),
    );
    return scores.map((score) => score !== null);
  }

  /**
   * Adds `userIds` to the tenant's users (the worker, for each user it notifies directly). A user this
   * process added within the last {@link REMEMBERED_MS} is not sent again: the set only grows, so the
   * `ZADD NX` would change nothing, and it was one more Redis command and round trip per notification.
   * Should the set be lost (a Redis without persistence restarted), a user is back in it at their first
   * notification after that time.
   */
  async remember(userIds: readonly string[]): Promise<void> {
    const key = this.usersKey();
    const now = Date.now();
    const fresh = userIds.filter((userId) => (this.#remembered.get(`${key}\n${userId}`) ?? 0) <= now);
    if (fresh.length === 0) return;
    await this.#redis.zadd(key, 'NX', ...scored(fresh));
    for (const userId of fresh) {
      const entry = `${key}\n${userId}`;
      // Re-inserted: a Map iterates in insertion order, so the first key is the one added longest ago.
      this.#remembered.delete(entry);
      this.#remembered.set(entry, now + REMEMBERED_MS);
      if (this.#remembered.size > REMEMBERED_MAX) {
        const oldest = this.#remembered.keys().next().value;
        if (oldest !== undefined) this.#remembered.delete(oldest);
      }
    }
  }

  /** Whether `userId` is in `audience` now (subscribed to its topic; for a broadcast, one of the tenant's users). */
  async includes(audience: FanoutAudience, userId: string): Promise<boolean> {
    return (await this.#redis.zscore(this.#audienceKey(audience), userId)) !== null;
  }

  /** How many users `audience` has now. */
  async size(audience: FanoutAudience): Promise<number> {
    return this.#redis.zcard(this.#audienceKey(audience));
  }

  /**
   * Up to `limit` user ids of `audience` after `after` (exclusive; undefined: from the first), in user id
   * order (byte-wise).
   */
  async page(audience: FanoutAudience, after: string | undefined, limit: number): Promise<AudiencePage> {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new InboxError(InboxErrorCode.INVALID_ARGUMENT, `limit must be an integer >= 1, not ${limit}`);
    }
    const from = after === undefined ? '-' : `(${after}`;
    const userIds = await this.#redis.zrange(
      this.#audienceKey(audience),
      from,
      '+',
      'BYLEX',
      'LIMIT',
      0,
      limit,
    );
    return { userIds, nextAfter: userIds.length === limit ? (userIds.at(-1) ?? null) : null };
  }

  /**
   * Starts the record of fan-out `id` (once: a re-run keeps the first) with the audience's size now.
   * Answers the record as it is (a resumed fan-out's checkpoint).
   */
  async startFanout(id: string, audience: FanoutAudience, retentionMs: number): Promise<FanoutRecord> {
    const key = this.fanoutKey(id);
    const total = await this.size(audience);
    await this.#redis
      .multi()
      .hsetnx(key, 'total', total)
      .hsetnx(key, 'state', 'fanning-out')
      .hsetnx(key, 'topic', 'topic' in audience ? audience.topic : '')
      .pexpire(key, retentionMs)
      .exec();
    return (await this.fanout(id)) as FanoutRecord;
  }

  /**
   * Records a chunk done: the counts so far and the cursor, and why each of the chunk's `failures` (user
   * id → error) failed, in one command (a checkpoint is never half written); with `done`, the state
   * `sent`, its time, and the total it went through.
   */
  async checkpoint(
    id: string,
    progress: Omit<FanoutRecord, 'state' | 'sentAtMs' | 'audience' | 'failures'>,
    done: { atMs: number } | undefined,
    failures: ReadonlyMap<string, string> = new Map(),
  ): Promise<void> {
    const fields: (string | number)[] = [
      'reached',
      progress.reached,
      'expired',
      progress.expired,
      'deduplicated',
      progress.deduplicated,
      'muted',
      progress.muted,
      'failed',
      progress.failed,
      'total',
      progress.total,
    ];
    for (const [userId, reason] of failures)
      fields.push(`${FAILED_FIELD}${userId}`, reason.slice(0, FAILURE_MAX_LENGTH));
    if (progress.cursor !== undefined) fields.push('cursor', progress.cursor);
    if (done) fields.push('state', 'sent', 'sentAt', done.atMs);
    await this.#redis.hset(this.fanoutKey(id), ...fields);
  }

  /** The record of fan-out `id` in this tenant, or undefined (not started, expired, or another tenant's). */
  async fanout(id: string): Promise<FanoutRecord | undefined> {
    const raw = await this.#redis.hgetall(this.fanoutKey(id));
    if (raw.state === undefined) return undefined;
    const failures = new Map<string, string>();
    for (const [field, reason] of Object.entries(raw))
      if (field.startsWith(FAILED_FIELD)) failures.set(field.slice(FAILED_FIELD.length), reason);
    return {
      audience: raw.topic ? { topic: raw.topic } : { broadcast: true },
      state: raw.state === 'sent' ? 'sent' : 'fanning-out',
      cursor: raw.cursor,
      total: Number(raw.total ?? 0),
      reached: Number(raw.reached ?? 0),
      expired: Number(raw.expired ?? 0),
      deduplicated: Number(raw.deduplicated ?? 0),
      muted: Number(raw.muted ?? 0),
      failed: Number(raw.failed ?? 0),
      sentAtMs: raw.sentAt === undefined ? undefined : Number(raw.sentAt),
      failures,
    };
  }
}

/** `topic` when it is a topic name, else an `InboxError`. */
export function checkTopic(topic: string): string {
  return checkLabel(topic, 'topic');
}

/** `name` when it is a `topic` or `type` label (the same characters), else an `InboxError`. */
export function checkLabel(name: string, what: 'topic' | 'type'): string {
  if (typeof name !== 'string' || name.length > TOPIC_MAX_LENGTH || !TOPIC.test(name)) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `${shown(name)} is not a ${what} name: 1 to 64 of A-Z a-z 0-9 _ . : / -, not . or .. alone or between slashes`,
    );
  }
  return name;
}

/** `0 id 0 id …` for ZADD (every score 0: the set is ordered by id). */
function scored(userIds: readonly string[]): (string | number)[] {
  if (userIds.length === 0) throw new InboxError(InboxErrorCode.INVALID_ARGUMENT, 'no user id given');
  return userIds.flatMap((userId) => [0, checkUserId(userId)]);
}
