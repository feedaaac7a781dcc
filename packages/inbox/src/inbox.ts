import { DEFAULT_TENANT, type InboxOffset, type UnreadEvent } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { AppendBatcher } from './append-batch.js';
import { boundOf, checkIds, checkLimit, checkUserId, toEvent } from './checks.js';
import { InboxError, InboxErrorCode } from './errors.js';
import {
  assertPrefix,
  type InboxKeys,
  inboxKeys,
  notificationIndexKey,
  routedMarkerKey,
  tenantPrefix,
} from './keys.js';
import { entriesBefore, listingOf, rangeWithin } from './listing.js';
import { compareOffsets, offsetSeq, parseOffset, ZERO_OFFSET } from './offsets.js';
import { readReplies } from './reads.js';
import { appendResultOf, defineScripts, type ScriptName } from './scripts.js';
import { notificationStatus } from './status.js';
import {
  type AckResult,
  type AppendBounds,
  type AppendResult,
  DEFAULT_INBOX_MAX_AGE_MS,
  DEFAULT_INBOX_MAX_LENGTH,
  DEFAULT_INBOX_PREFIX,
  DEFAULT_INBOX_RECORD_GRACE_MS,
  type InboxListing,
  type InboxNotification,
  type InboxOptions,
  type InboxPage,
  MAX_PAGE,
  type NotificationStatus,
  type ReadResult,
  type ReadSelection,
} from './types.js';

/**
 * One Redis data model for every user's inbox, shared by the worker (append), the realtime servers
 * (replay, acks, read) and the gateway (REST listing, read, status).
 *
 * Per user, under the hash tag `{<userId>}`: a stream whose entry ids are the offsets (`<ms>-<seq>`,
 * gapless `seq`), bounded by `maxLength` and `maxAgeMs`; a set of unread ids (its size is the exact
 * unread count); a version counter; and one hash per notification (idempotency marker and status).
 * Keys expire `maxAgeMs` + `recordGraceMs` (1 day) after the user's last append, a notification's own
 * records that long after it was stored (trimmed from the stream or not).
 *
 * @example
 * ```ts
 * const inbox = new Inbox(new Redis(url), { maxLength: 1000 });
 * const result = await inbox.append({ id, userId, payload, createdAt });
 * if (result.outcome === 'appended') live.notification(tenantId, { ...n, offset: result.offset }); // @herald/live
 * ```
 */
export class Inbox {
  readonly prefix: string;
  /** The tenant this instance acts for; every key it touches is that tenant's. */
  readonly tenantId: string;
  readonly maxLength: number;
  readonly maxAgeMs: number;
  /** TTL of every key, refreshed on append: `maxAgeMs` + `recordGraceMs`. */
  readonly retentionMs: number;
  readonly #redis: Redis | Cluster;
  readonly #scripts: Record<ScriptName, (...args: (string | number)[]) => Promise<unknown>>;
  /** `prefix` with the tenant's part: where this tenant's keys live. */
  readonly #base: string;
  readonly #tenants: Map<string, Inbox>;
  /** The appends of one event-loop turn, of every tenant, in as few script calls as their slots allow. */
  #appends: AppendBatcher;

  constructor(redis: Redis | Cluster, options: InboxOptions = {}) {
    this.prefix = options.prefix ?? DEFAULT_INBOX_PREFIX;
    assertPrefix(this.prefix);
    this.tenantId = options.tenantId ?? DEFAULT_TENANT;
    this.#base = tenantPrefix(this.prefix, this.tenantId);
    this.maxLength = options.maxLength ?? DEFAULT_INBOX_MAX_LENGTH;
    this.maxAgeMs = options.maxAgeMs ?? DEFAULT_INBOX_MAX_AGE_MS;
    if (!Number.isInteger(this.maxLength) || this.maxLength < 1) {
      throw new InboxError(
        InboxErrorCode.INVALID_ARGUMENT,
        `maxLength must be an integer >= 1, not ${this.maxLength}`,
      );
    }
    if (!Number.isInteger(this.maxAgeMs) || this.maxAgeMs < 1) {
      throw new InboxError(
        InboxErrorCode.INVALID_ARGUMENT,
        `maxAgeMs must be an integer >= 1, not ${this.maxAgeMs}`,
      );
    }
    const grace = options.recordGraceMs ?? DEFAULT_INBOX_RECORD_GRACE_MS;
    if (!Number.isInteger(grace) || grace < 1) {
      throw new InboxError(
        InboxErrorCode.INVALID_ARGUMENT,
        `recordGraceMs must be an integer >= 1, not ${grace}`,
      );
    }
    this.retentionMs = this.maxAgeMs + grace;
    this.#redis = redis;
    this.#scripts = defineScripts(redis);
    this.#appends = new AppendBatcher(redis, this.#scripts.append);
    this.#tenants = new Map([[this.tenantId, this]]);
  }

  /**
   * The same inbox settings acting for `tenantId`: its users, its keys, nothing of any other tenant's.
   * Instances are cached (one per tenant).
   *
   * @throws {InboxError} `HERALD_ERR_INBOX_INVALID_ARGUMENT` for an invalid tenant id.
   * @example
   * ```ts
   * const acme = inbox.tenant('acme');
   * await acme.list('alice'); // acme's alice, never another tenant's alice
   * ```
   */
  tenant(tenantId: string): Inbox {
    let inbox = this.#tenants.get(tenantId);
    if (inbox === undefined) {
      inbox = new Inbox(this.#redis, {
        prefix: this.prefix,
        maxLength: this.maxLength,
        maxAgeMs: this.maxAgeMs,
        tenantId,
      });
      inbox.#appends = this.#appends;
      if (this.#tenants.size > 10_000) this.#tenants.clear();
      this.#tenants.set(tenantId, inbox);
    }
    return inbox;
  }

  /** The keys of `userId`'s inbox in this tenant (for operators and tests). */
  keys(userId: string): InboxKeys {
    return inboxKeys(this.#base, checkUserId(userId));
  }

  /**
   * Appends a notification to its user's inbox, once: appending the same id again (a retried job)
   * answers `already-appended` with the first offset and changes nothing. With `expiresAtMs` in the past
   * it records `expired` instead; with a `dedupeKey` already used for this user (within the retention)
   * it records `deduplicated`; when the user muted its `topic` or `type` (see `Preferences`) it records
   * `muted` and stores nothing (a retry stays `muted`, even after an unmute). `bounds` may keep fewer or
   * younger notifications than the inbox's own settings (a tenant's API key with smaller limits), never
   * more. `indexed: false` (a topic send's recipients, who share its id) skips the id → user index of
   * {@link Inbox.locate}. `rerun` (its job runs again: stalled or retried): a routed id may have been
   * stored by a worker from before routed ids, under the user's keys; that is looked at too (a first run
   * spares the lookup).
   *
   * @example
   * ```ts
   * const r = await inbox.append(n, { expiresAtMs: Date.parse(n.createdAt) + ttlMs, dedupeKey });
   * ```
   */
  async append(
    notification: InboxNotification,
    options: {
      expiresAtMs?: number;
      dedupeKey?: string;
      nowMs?: number;
      bounds?: AppendBounds;
      indexed?: boolean;
      rerun?: boolean;
    } = {},
  ): Promise<AppendResult> {
    const keys = this.keys(notification.userId);
    const maxLength = boundOf(options.bounds?.maxLength, this.maxLength);
    const maxAgeMs = boundOf(options.bounds?.maxAgeMs, this.maxAgeMs);
    const hasDedupe = options.dedupeKey !== undefined && options.dedupeKey !== '';
    const marker = keys.marker(notification.id);
    // A routed id's marker is found from the id alone: it names its user, and no index is written.
    const routed = keys.routes(notification.id);
    const indexKey = notificationIndexKey(this.#base, notification.id);
    // The id → user index has its own hash slot: on a single Redis it rides in the script call, on
    // Cluster it is written beside it, in the same round trip.
    const indexInScript = options.indexed !== false && !routed && this.#appends.crossSlot;
    const index =
      options.indexed === false || indexInScript || routed
        ? undefined
        : this.#redis.set(indexKey, notification.userId, 'PX', this.retentionMs);
    const call = {
      keys: [
        keys.stream,
        keys.meta,
        keys.unread,
        marker,
        hasDedupe ? keys.dedupe(options.dedupeKey ?? '') : keys.dedupe(''),
        keys.mutes,
        routed ? keys.legacyMarker(notification.id) : indexInScript ? indexKey : marker,
      ],
      args: [
        notification.id,
        JSON.stringify(notification),
        options.expiresAtMs ?? 0,
        hasDedupe ? 1 : 0,
        maxLength,
        maxAgeMs,
        this.retentionMs,
        this.tenantId,
        notification.topic === undefined ? '' : `topic:${notification.topic}`,
        notification.type === undefined ? '' : `type:${notification.type}`,
        indexInScript || routed ? notification.userId : '',
        routed ? (options.rerun === true ? 2 : 1) : 0,
      ],
    };
    const script =
      options.nowMs === undefined ? this.#appends.enqueue(call) : this.#appends.one(call, options.nowMs);
    const [reply] = await Promise.all([script, index]);
    return appendResultOf(reply);
  }

  /**
   * Reads up to `limit` notifications after `after` (exclusive), in order: the replay of a reconnecting
   * client. `after` absent or {@link ZERO_OFFSET}: from the oldest kept. Says whether notifications right
   * after `after` were trimmed, or `after` is unknown.
   *
   * @example
   * ```ts
   * const page = await inbox.read('alice', { after: lastOffset, limit: 500 });
   * if (page.trimmed || page.unknownOffset) socket.emit('resync', …);
   * ```
   */
  async read(
    userId: string,
    options: { after?: InboxOffset | undefined; limit?: number | undefined } = {},
  ): Promise<InboxPage> {
    const keys = this.keys(userId);
    const limit = checkLimit(options.limit ?? MAX_PAGE);
    const after = options.after ?? ZERO_OFFSET;
    const { ms: afterMs, seq: afterSeq } = parseOffset(after);
    const { raw, more } = await rangeWithin(this.#redis, keys.stream, `(${after}`, '+', limit);
    const entries = raw.map(([offset, fields]) => toEvent(offset, fields));
    const first = entries[0];
    // Only 0-0 means "everything kept". Another `<ms>-0` is no offset the inbox ever gave: checked like
    // any other, so one past the newest is unknown (resync) rather than a start after which every live
    // notification looks already sent.
    if (afterMs === 0 && afterSeq === 0) {
      return {
        entries,
        trimmed: false,
        unknownOffset: false,
        lastOffset: entries.at(-1)?.offset ?? after,
        more,
      };
    }
    if (first !== undefined) {
      return {
        entries,
        trimmed: offsetSeq(first.offset) !== afterSeq + 1,
        unknownOffset: false,
        lastOffset: entries.at(-1)?.offset ?? after,
        more,
      };
    }
    const top = await this.latestOffset(userId);
    return {
      entries,
      trimmed: false,
      unknownOffset: compareOffsets(after, top) > 0,
      lastOffset: after,
      more: false,
    };
  }

  /**
   * The offset of the newest notification in `userId`'s inbox, or {@link ZERO_OFFSET} when it is empty.
   *
   * @example
   * ```ts
   * const from = await inbox.latestOffset('alice'); // live delivery starts after this
   * ```
   */
  async latestOffset(userId: string): Promise<InboxOffset> {
    const top = (await this.#redis.xrevrange(this.keys(userId).stream, '+', '-', 'COUNT', 1)) as [
      string,
      string[],
    ][];
    return top[0]?.[0] ?? ZERO_OFFSET;
  }

  /**
   * Records that `ids` reached a screen of `userId`: `deliveredAt` (Redis time) and `deliveredBy`
   * (`instance`) are written by the first ack only. Ids that are not in this user's inbox are ignored,
   * so a client can only ever ack its own user's notifications. Answers how many were recorded now.
   *
   * @example
   * ```ts
   * await inbox.ack('alice', ['n-1', 'n-2'], 'realtime-a');
   * ```
   */
  async ack(userId: string, ids: readonly string[], instance: string): Promise<number> {
    return (await this.acknowledge(userId, ids, instance)).ids.length;
  }

  /**
   * {@link Inbox.ack}, answering which ids were recorded now and their `deliveredAt`: what the
   * `notification.delivered` webhook reports (once per notification, as only the first ack records).
   *
   * @example
   * ```ts
   * const { ids, deliveredAtMs } = await inbox.acknowledge('alice', ['n-1'], 'realtime-a');
   * ```
   */
  async acknowledge(userId: string, ids: readonly string[], instance: string): Promise<AckResult> {
    const keys = this.keys(userId);
    checkIds(ids);
    if (ids.length === 0) return { ids: [], deliveredAtMs: Date.now() };
    const [, now, indices] = (await this.#scripts.ack(
      2 * ids.length,
      ...ids.flatMap((id) => [keys.marker(id), keys.legacyMarker(id)]),
      '',
      instance,
      userId,
    )) as [number, number, number[]];
    return { ids: indices.map((index) => ids[index - 1] ?? ''), deliveredAtMs: now };
  }

  /**
   * Marks notifications of `userId` read: by id, all, or all up to and including an offset. Answers how
   * many changed and the exact unread count with its version (push it to the user's tabs when
   * `changed > 0`). Ids of other users' notifications are never in this user's unread set: no effect.
   *
   * @example
   * ```ts
   * const { changed, unread } = await inbox.markRead('alice', { ids: ['n-1'] });
   * if (changed > 0) live.unread(tenantId, 'alice', unread); // @herald/live
   * ```
   */
  async markRead(userId: string, selection: ReadSelection): Promise<ReadResult> {
    const keys = this.keys(userId);
    let args: string[];
    if ('ids' in selection) {
      checkIds(selection.ids);
      // Nothing read, nothing reported: no script, so no Redis time to tell.
      if (selection.ids.length === 0) {
        return { changed: 0, unread: await this.unread(userId), ids: [], readAtMs: Date.now() };
      }
      args = ['ids', ...selection.ids];
    } else if (selection.upTo !== undefined) {
      parseOffset(selection.upTo);
      args = ['upto', selection.upTo];
    } else {
      args = ['all'];
    }
    const [changed, count, version, changedIds, readAtMs] = (await this.#scripts.read(
      keys.stream,
      keys.meta,
      keys.unread,
      ...args,
    )) as [number, number, number, string[], number];
    return { changed, unread: { count, version }, ids: changedIds, readAtMs };
  }

  /**
   * The exact unread count of `userId` (the size of the unread set: no recount, no cap) and its version.
   *
   * @example
   * ```ts
   * const { count } = await inbox.unread('alice');
   * ```
   */
  async unread(userId: string): Promise<UnreadEvent> {
    const keys = this.keys(userId);
    // A pipeline, not a transaction: a full Redis (maxmemory) refuses every command of a MULTI, reads
    // included, and a user could not even read their count. The version is read first: a change between
    // the two makes the count the newer of the pair, which a client that orders counts by version then
    // takes, or replaces with the change's own event (never an old count stamped with a new version).
    // No meta (a new user, or an idle inbox expired whole): the version a new meta would start from, by
    // Redis's clock (TIME rides with the keyed commands to the user's node), so that it is never below one
    // a client kept before the inbox expired.
    // After a slot moved, each command alone (readReplies): TIME then from any node, whose clock is as
    // good for a version that only has to be above one kept before the inbox expired.
    const [uv, count, [seconds, micros]] = await readReplies(this.#redis, (redis) => [
      redis.hget(keys.meta, 'uv'),
      redis.scard(keys.unread),
      redis.time(),
    ]);
    const version = uv ? Number(uv) : (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)) * 1000;
    return { count: Number(count), version };
  }

  /**
   * A page of the inbox for a backend (`GET /users/:userId/notifications?after=&limit=`): notifications
   * after `after` (default: the oldest kept), each with `read` and `deliveredAt`, and the unread count.
   * Backwards with `newest: true` or `before`: the `limit` newest, or the `limit` just before `before`
   * (exclusive), still oldest first, with `nextBefore` for the page before (null at the oldest kept)
   * and `nextAfter` null: what a client that shows the newest few reads first.
   *
   * @throws {InboxError} `HERALD_ERR_INBOX_INVALID_OFFSET` for a malformed `after` or `before` (answer
   *   400), `HERALD_ERR_INBOX_INVALID_ARGUMENT` for a limit outside 1..1000, or `after` with `before`
   *   or `newest` (answer 400).
   * @example
   * ```ts
   * const page = await inbox.list('alice', { after: request.query.after, limit: 50 });
   * const newest = await inbox.list('alice', { newest: true, limit: 20 }); // then { before: newest.nextBefore }
   * ```
   */
  async list(
    userId: string,
    options: {
      after?: InboxOffset | undefined;
      before?: InboxOffset | undefined;
      newest?: boolean | undefined;
      limit?: number | undefined;
    } = {},
  ): Promise<InboxListing> {
    const limit = checkLimit(options.limit ?? 50);
    const { after, before } = options;
    if (!options.newest && before === undefined) {
      const [page, unread] = await Promise.all([this.read(userId, { after, limit }), this.unread(userId)]);
      return listingOf(this.#redis, this.keys(userId), page, unread);
    }
    if (after !== undefined) {
      throw new InboxError(InboxErrorCode.INVALID_ARGUMENT, 'after cannot be combined with before or newest');
    }
    // Nothing is before 0-0 (and Redis refuses the range `(0-0`): an empty page.
    const start = before === undefined ? undefined : parseOffset(before);
    if (start !== undefined && start.ms === 0 && start.seq === 0) {
      return {
        items: [],
        nextAfter: null,
        nextBefore: null,
        trimmed: false,
        unread: await this.unread(userId),
      };
    }
    const keys = this.keys(userId);
    const [{ entries, more }, unread] = await Promise.all([
      entriesBefore(this.#redis, keys, before, limit),
      this.unread(userId),
    ]);
    const page = {
      entries,
      trimmed: false,
      unknownOffset: false,
      lastOffset: entries.at(-1)?.offset ?? ZERO_OFFSET,
      more,
    };
    const listing = await listingOf(this.#redis, keys, page, unread);
    return {
      ...listing,
      nextAfter: null,
      nextBefore: more ? (entries[0]?.offset ?? null) : null,
    };
  }

  /**
   * The key of the marker of notification `id` of `userId` that exists: {@link InboxKeys.marker}, or for
   * a routed id stored by a worker from before routed ids, the one under the user's keys; the former when
   * neither does. For what reads or writes a marker's fields outside this class (Web Push escalation).
   *
   * @example
   * ```ts
   * await redis.hget(await inbox.markerKey('alice', id), 'escalation');
   * ```
   */
  async markerKey(userId: string, id: string): Promise<string> {
    const keys = this.keys(userId);
    const marker = keys.marker(id);
    if (!keys.routes(id)) return marker;
    const legacy = keys.legacyMarker(id);
    // Both in one round trip (a pipeline: the same slot, and a full Redis refuses no read).
    const [current, earlier] = await readReplies(this.#redis, (redis) => [
      redis.exists(marker),
      redis.exists(legacy),
    ]);
    return current !== 1 && earlier === 1 ? legacy : marker;
  }

  /**
   * Whose notification `id` is (from the index the worker writes on append), or undefined when no worker
   * has processed it (or its record expired with the inbox retention).
   *
   * @example
   * ```ts
   * const userId = await inbox.locate('0b6c…');
   * ```
   */
  async locate(id: string): Promise<string | undefined> {
    const routed = routedMarkerKey(this.#base, id);
    // A routed id's marker names its user; the index too, for an id stored before routed ids (one in
    // about 4 million of those reads as routed).
    const [owner, indexed] = await Promise.all([
      routed === undefined ? null : this.#redis.hget(routed, 'user'),
      this.#redis.get(notificationIndexKey(this.#base, id)),
    ]);
    return owner ?? indexed ?? undefined;
  }

  /**
   * {@link Inbox.status} by id alone (`GET /notifications/:id` when the job is gone from BullMQ): looks
   * the user up with {@link Inbox.locate} first, in this tenant only (another tenant's id is not found).
   *
   * @example
   * ```ts
   * const status = await inbox.tenant(caller.tenantId).statusById(request.params.id);
   * ```
   */
  async statusById(id: string): Promise<NotificationStatus | undefined> {
    const userId = await this.locate(id);
    return userId === undefined ? undefined : this.status(userId, id);
  }

  /**
   * What Herald knows about notification `id` of `userId` (`GET /notifications/:id`); undefined when the
   * worker has not processed it yet (or its record expired with the inbox retention).
   *
   * @example
   * ```ts
   * const status = await inbox.status(job.data.userId, job.id); // status?.delivered
   * ```
   */
  async status(userId: string, id: string): Promise<NotificationStatus | undefined> {
    const keys = this.keys(userId);
    // A pipeline: a full Redis refuses a MULTI's reads too (see `unread`).
    let [marker, unread] = await readReplies(this.#redis, (redis) => [
      redis.hgetall(keys.marker(id)),
      redis.sismember(keys.unread, id),
    ]);
    // A routed id stored by a worker from before routed ids: its marker is under the user's keys.
    if (marker.state === undefined && keys.routes(id))
      marker = await this.#redis.hgetall(keys.legacyMarker(id));
    const status = notificationStatus(userId, id, marker, unread === 1);
    if (status?.state !== 'inbox' || status.offset === null) return status;
    // When it was sent: in its inbox entry (its job, which also had it, is gone once it is stored).
    const createdAt = createdAtOf(await this.#redis.xrange(keys.stream, status.offset, status.offset));
    return createdAt === undefined ? status : { ...status, createdAt };
  }

  /**
   * Cancels notification `id` of `userId` unless the worker has stored it already: answers `cancelled`
   * (now or earlier) or the state it had. A worker that appends it afterwards stores nothing.
   * `createdAt` (when the gateway accepted it) stays in its record, for its status once its job is gone.
   *
   * @example
   * ```ts
   * const { state } = await inbox.cancel(job.data.userId, job.id, job.data.createdAt); // 'cancelled' | 'inbox' | …
   * ```
   */
  async cancel(
    userId: string,
    id: string,
    createdAt = '',
  ): Promise<{ state: NotificationStatus['state']; at: string }> {
    const keys = this.keys(userId);
    const marker = keys.marker(id);
    const routed = keys.routes(id);
    const index = routed
      ? undefined
      : this.#redis.set(notificationIndexKey(this.#base, id), userId, 'PX', this.retentionMs);
    const script = this.#scripts.cancel(
      marker,
      keys.legacyMarker(id),
      this.retentionMs,
      this.tenantId,
      routed ? userId : '',
      createdAt,
    );
    const [[state, at]] = (await Promise.all([script, index])) as [
      [NotificationStatus['state'], string],
      unknown,
    ];
    return { state, at };
  }
}

/** The `createdAt` of the notification in an inbox entry (XRANGE of its offset), if it is there. */
function createdAtOf(entries: [id: string, fields: string[]][]): string | undefined {
  const fields = entries[0]?.[1] ?? [];
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] !== 'n') continue;
    try {
      const createdAt = (JSON.parse(fields[i + 1] ?? '') as { createdAt?: unknown }).createdAt;
      return typeof createdAt === 'string' ? createdAt : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}
