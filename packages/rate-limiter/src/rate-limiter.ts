import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { Cluster, Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import {
  CostExceedsCapacityError,
  type FailureReason,
  RateLimiterError,
  RateLimiterErrorCode,
  RateLimiterUnavailableError,
} from './errors.js';
import { bucketKey } from './keys.js';
import { type TokenBucketState, tokenBucketStep } from './models.js';
import { type Algorithm, defineBatchScript, defineScript, LuaCode, type ScriptCall } from './scripts.js';

/**
 * One limit: at most `capacity` at once, refilled at `ratePerSecond` (for the window algorithms:
 * `capacity` per window of `capacity / ratePerSecond` seconds).
 *
 * @example
 * ```ts
 * const perRecipient: PolicyOptions = { name: 'recipient', capacity: 10, ratePerSecond: 1 };
 * ```
 */
export interface PolicyOptions {
  /** Names the policy in decisions, metrics and the `RateLimit` headers. Unique within a limiter. */
  name: string;
  /** Burst: the most a bucket holds (the quota `q` of the `RateLimit-Policy` header). */
  capacity: number;
  /** Refill, in cost units per second. */
  ratePerSecond: number;
  /** Prefix of this policy's keys, without `{` or `}`. Default `<limiter keyPrefix><name>:`. */
  keyPrefix?: string;
}

/**
 * A policy as the limiter uses it: options resolved and frozen.
 *
 * @example
 * ```ts
 * for (const policy of limiter.policies) console.log(policy.name, policy.windowSeconds);
 * ```
 */
export interface Policy {
  readonly name: string;
  readonly capacity: number;
  readonly ratePerSecond: number;
  readonly keyPrefix: string;
  /** `capacity / ratePerSecond`: the time to refill fully (the window `w` of `RateLimit-Policy`). */
  readonly windowSeconds: number;
}

/**
 * What the limiter does when Redis fails or does not answer within `timeoutMs`:
 * - `closed`: deny (safe for abuse-sensitive endpoints);
 * - `open`: allow (availability first);
 * - `local`: an in-process token bucket per key at `capacity / expectedInstances` and
 *   `ratePerSecond / expectedInstances` (the fleet as a whole stays near the limit);
 * - `throw`: throw a {@link RateLimiterUnavailableError} (the caller answers 503).
 *
 * @example
 * ```ts
 * const mode: FailureMode = 'local';
 * ```
 */
export type FailureMode = 'closed' | 'open' | 'local' | 'throw';

/**
 * Failure handling of one limiter.
 *
 * @example
 * ```ts
 * const failure: FailureOptions = { mode: 'local', expectedInstances: 4, timeoutMs: 150 };
 * ```
 */
export interface FailureOptions {
  /** Default `closed`. */
  mode?: FailureMode;
  /** Longest wait for Redis (connecting included) before the failure mode decides. Default 150 ms. */
  timeoutMs?: number;
  /** `local` only: how many instances share the limit. Default 1. */
  expectedInstances?: number;
  /** `closed` only: the `retryAfterMs` of a fallback deny. Default 1000 ms. */
  retryAfterMs?: number;
}

/**
 * A pino-compatible logger (Fastify's `app.log` fits). The limiter logs only when Redis becomes
 * unavailable and when it comes back.
 *
 * @example
 * ```ts
 * const logger: RateLimiterLogger = { warn: (details, message) => app.log.warn(details, message) };
 * ```
 */
export interface RateLimiterLogger {
  warn(details: Record<string, unknown>, message: string): void;
  info?(details: Record<string, unknown>, message: string): void;
}

/**
 * Settings of a {@link RateLimiter}.
 *
 * @example
 * ```ts
 * const options: RateLimiterOptions = {
 *   redis: new Redis(url, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }),
 *   policies: [{ name: 'user', capacity: 10, ratePerSecond: 10 }],
 * };
 * ```
 */
export interface RateLimiterOptions {
  /**
   * ioredis client (single node or Cluster). Recommended options: `enableOfflineQueue: false` and
   * `autoResendUnfulfilledCommands: false` (see the README: a consume must never be replayed late).
   */
  redis: Redis | Cluster;
  /** One or more policies, all checked in one atomic script call. */
  policies: readonly PolicyOptions[];
  /** Default `token-bucket`. */
  algorithm?: Algorithm;
  /** Prefix of every policy's default key prefix. Default `ratelimit:`. No `{` or `}`. */
  keyPrefix?: string;
  /**
   * Redis Cluster and several ids in one call: the hash tag every key of the call shares. A string puts
   * all of this limiter's keys in one slot; a function of the call's ids (e.g. `(ids) => ids.apiKey`)
   * spreads them, but then every other policy's bucket is per (tag, id). See the README.
   * The function sees the policies given one id (a string); policies given an array of ids are left
   * out, so tag by a single-id policy (e.g. the sender of a batch).
   * Default: each key is tagged by its own id (single node, or one id per call).
   */
  hashTag?: string | ((ids: Readonly<Record<string, string>>) => string);
  /** Default `{ mode: 'closed', timeoutMs: 150 }`. */
  failure?: FailureOptions;
  /** In-process cache of denied keys (no Redis call until `retryAfterMs` passes). Default `{ max: 10_000 }`. */
  denyCache?: false | { max?: number };
  /** Added to every key's TTL beyond the time to refill fully. Default 1000 ms. */
  ttlMarginMs?: number;
  /**
   * Single-node clients: send the script calls made in one tick of the event loop in one socket write
   * (the socket is corked until `process.nextTick`, so nothing waits beyond the current tick). Under
   * concurrency this about halves the Node CPU per decision (bench/limiter: ~20 → ~13 µs, the write
   * syscall per command was a third of it). Other commands written on the same client in that tick are
   * coalesced too. Default `true`; ignored for Redis Cluster.
   */
  coalesceWrites?: boolean;
  /**
   * Single-node clients, token bucket and GCRA: the calls of this limiter made in the same turn of the event
   * loop (one bucket or several each, e.g. sender + recipients) go to Redis in one script call
   * (token-bucket-m.lua / gcra-m.lua, up to 100 calls or 256 buckets each; a larger call goes alone): one EVALSHA, one
   * Redis `TIME` and one reply for all of them. Each call is still all or nothing on its own buckets and
   * exactly the N-key script's, taken in call order at one instant of Redis's clock (a later call sees
   * an earlier one's consumption). The batch leaves in `setImmediate`, with no timer: after the I/O
   * callbacks already due in this turn (concurrent HTTP requests are each their own callback; with
   * `process.nextTick` every batch had one call), or as soon as it holds `batchFlushAt` calls. Under
   * concurrency this cuts both Node's and Redis's work per decision (see bench/README.md). One timeout,
   * from when the batch leaves, covers it; if it fails, each of its calls gets the failure mode.
   * Default `true`; ignored for Redis Cluster (the keys would span slots) and for the window algorithms.
   */
  batchCalls?: boolean;
  /**
   * With `batchCalls`: a batch leaves as soon as it holds this many calls, without waiting for the end
   * of the turn, so Redis decides it while Node is still preparing the next one (two or three batches in
   * flight instead of Node and Redis taking turns on one: 110k → 180k decisions/s in bench/limiter).
   * Default 16.
   */
  batchFlushAt?: number;
  /** Tests only: a clock in milliseconds, sent to the script instead of Redis `TIME`. */
  clock?: () => number;
  logger?: RateLimiterLogger;
  /** Called after every `consume` decision (e.g. to feed Prometheus counters). Must not throw. */
  onDecision?: (result: RateLimitResult) => void;
}

/**
 * The state of one policy in a decision.
 *
 * @example
 * ```ts
 * const { policies } = await limiter.consume({ apiKey: 'k', recipient: 'u' });
 * for (const state of policies) console.log(state.policy, state.remaining);
 * ```
 */
export interface PolicyState {
  policy: string;
  /**
   * The id whose bucket this state describes. A policy given several ids reports one of them: the
   * bucket that denied (the longest wait) or, when all allow, the one with the fewest units left.
   */
  id?: string;
  /** Whether this policy alone would allow the call (every one of its ids). */
  allowed: boolean;
  /** The policy's capacity. */
  limit: number;
  /** Whole units left (after this call when it was allowed). */
  remaining: number;
  /** Milliseconds until this policy has the call's cost; 0 when it has it now. */
  retryAfterMs: number;
  /** Milliseconds until this policy's bucket is full again. */
  resetAfterMs: number;
}

/**
 * The outcome of one `consume` call (the shape the single-policy `TokenBucket` always had).
 *
 * @example
 * ```ts
 * const { allowed, retryAfterMs }: RateLimitDecision = await bucket.consume('user-42');
 * ```
 */
export interface RateLimitDecision {
  allowed: boolean;
  /** Capacity of the policy named by `policy` in a {@link RateLimitResult}. */
  limit: number;
  /** Whole units left in that policy. */
  remaining: number;
  /** When denied: milliseconds until every policy has the cost. 0 when allowed. */
  retryAfterMs: number;
  /** Milliseconds until that policy is full again. */
  resetAfterMs: number;
}

/**
 * Where a decision came from: Redis, the local deny cache, or the failure mode.
 *
 * @example
 * ```ts
 * if (result.source === 'fallback') metrics.fallbacks.inc();
 * ```
 */
export type DecisionSource = 'redis' | 'deny-cache' | 'fallback';

/**
 * A full decision: the top-level fields describe the denying policy (the one that needs the longest
 * wait) or, when allowed, the policy with the fewest units left.
 *
 * @example
 * ```ts
 * const result = await limiter.consume({ apiKey: 'k', recipient: 'u' });
 * if (!result.allowed) console.log(`denied by ${result.policy}`, result.policies);
 * ```
 */
export interface RateLimitResult extends RateLimitDecision {
  /** The denying policy, or when allowed the policy with the fewest units left. */
  policy: string;
  /** When denied (not by a `closed` fallback): the id whose bucket refused, in `policy`. */
  deniedId?: string;
  /**
   * One state per policy, in the limiter's order (a policy given several ids: its denying or most
   * constrained id, see {@link PolicyState.id}). For a `deny-cache` decision only the denying policy
   * (the others were not asked); for a `fallback` decision what the failure mode knows.
   */
  policies: PolicyState[];
  source: DecisionSource;
  /** Set when `source` is `fallback`. */
  fallback?: { mode: Exclude<FailureMode, 'throw'>; reason: FailureReason };
}

/**
 * Counters of one policy since the limiter was created.
 *
 * @example
 * ```ts
 * const { allowed, denied, deniedLocally, fallback } = limiter.metrics().recipient!;
 * ```
 */
export interface PolicyCounters {
  /** Calls Redis allowed (counted on every policy of the call). */
  allowed: number;
  /** Calls Redis denied because of this policy. */
  denied: number;
  /** Calls the local deny cache denied because of this policy (no Redis call). */
  deniedLocally: number;
  /** Calls the failure mode decided (counted on every policy of the call). */
  fallback: number;
}

/**
 * Ids of one call: one string for every policy, or per policy name one id or several (an array: each
 * id is a bucket of that policy, all decided in the same all-or-nothing call; an id given twice is one
 * bucket charged the sum of its costs).
 *
 * @example
 * ```ts
 * const ids: RateLimitKey = { apiKey: 'key-7', recipient: 'user-42' };
 * const batch: RateLimitKey = { sender: 'key-7', recipient: ['user-1', 'user-2', 'user-1'] };
 * ```
 */
export type RateLimitKey = string | Readonly<Record<string, string | readonly string[]>>;

/**
 * Cost of one call: one number for every id of every policy, or per policy name a number (for each of
 * its ids) or an array paired index by index with that policy's array of ids. A missing name costs 1.
 *
 * @example
 * ```ts
 * const cost: RateLimitCost = { apiKey: 1, recipient: 3 };
 * const batchCost: RateLimitCost = { sender: 3, recipient: [1, 1, 1] }; // or recipient: 1
 * ```
 */
export type RateLimitCost = number | Readonly<Record<string, number | readonly number[]>>;

/** A token-bucket or GCRA call waiting for this turn's batch script call. */
interface PendingCall {
  call: PreparedCall;
  resolve: (reply: number[]) => void;
  reject: (error: unknown) => void;
}

/** Most calls in one batch script call. */
const MAX_BATCH_CALLS = 100;
/** Default `batchFlushAt`: measured in bench/limiter, 16 and 10 alike, 25 a little less, 100 far less. */
const DEFAULT_FLUSH_AT = 16;
/**
 * Most buckets in one batch script call (each is ~3–4 µs of Redis time, so ≤ ~1 ms of Redis per
 * script call; two gateway batch requests of 1 sender + 100 recipients fit). A call with more buckets
 * goes alone, with the N-key script, never split.
 */
const MAX_BATCH_KEYS = 256;

interface DenyEntry {
  /** Local clock (ms) until which calls with at least `cost` are denied. */
  until: number;
  cost: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

/** A call expanded to slots: one bucket each (slot j is `ids[j]` of policy `slotPolicy[j]`). */
interface PreparedCall {
  readonly keys: string[];
  readonly costs: number[];
  readonly ids: string[];
  /** Policy index of each slot; `IDENTITY` when slot i is policy i (no arrays of ids). */
  slotPolicy: readonly number[];
}

/**
 * The local deny cache: a Map bounded to `max` entries that forgets the oldest insertion first. Not an
 * LRU on purpose: a hit (the hot path of a flood) is one Map lookup, where lru-cache's bookkeeping made
 * a quarter of the denied call's cost; an entry ends at its `until` anyway, and a key denied again by
 * Redis is re-inserted as the newest.
 */
class DenyCache {
  readonly #entries = new Map<string, DenyEntry>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = Math.max(1, max);
  }

  get(key: string): DenyEntry | undefined {
    return this.#entries.get(key);
  }

  set(key: string, entry: DenyEntry): void {
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    if (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}

class Unavailable {
  constructor(
    readonly reason: FailureReason,
    readonly cause?: unknown,
  ) {}
}

const DEFAULT_TIMEOUT_MS = 150;
const ACCEPTABLE_STATUSES_TO_WAIT = new Set(['wait', 'connecting', 'connect']);

/**
 * A distributed rate limiter on Redis: one or more policies decided all or nothing in one Lua script
 * call, on Redis's clock, with a local deny cache and a failure mode for when Redis is away.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { RateLimiter } from '@herald/rate-limiter';
 *
 * const redis = new Redis(process.env.REDIS_URL, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
 * const limiter = new RateLimiter({
 *   redis,
 *   policies: [
 *     { name: 'apiKey', capacity: 100, ratePerSecond: 50 },
 *     { name: 'recipient', capacity: 10, ratePerSecond: 1 },
 *   ],
 *   failure: { mode: 'local', expectedInstances: 3 },
 * });
 * const result = await limiter.consume({ apiKey: 'key-7', recipient: 'user-42' });
 * if (!result.allowed) console.log(`denied by ${result.policy}, retry in ${result.retryAfterMs} ms`);
 * ```
 */
export class RateLimiter {
  /** The resolved policies, in order. */
  readonly policies: readonly Policy[];
  readonly algorithm: Algorithm;
  readonly #redis: Redis | Cluster;
  readonly #run: ScriptCall;
  /** The single-key script (same reply), for calls with one bucket; `#run` when the algorithm has none. */
  readonly #run1: ScriptCall;
  /** The batch script (M calls of any number of buckets), when `batchCalls` applies. */
  readonly #runBatch: ScriptCall | undefined;
  #pending: PendingCall[] = [];
  /** Whether a `setImmediate` flush is already scheduled. */
  #flushScheduled = false;
  readonly #flushAt: number;
  /** The last `deniedLocally` lookup: its ids, cost and bucket keys. */
  #lastPrecheck: { of: Readonly<Record<string, string>>; cost: number; call: PreparedCall } | undefined;
  /** The last one-id call prepared (see `#prepare`). */
  #lastPrepared: PreparedCall | undefined;
  readonly #byName: ReadonlyMap<string, number>;
  readonly #hashTag: RateLimiterOptions['hashTag'];
  readonly #isCluster: boolean;
  readonly #coalesceWrites: boolean;
  readonly #mode: FailureMode;
  readonly #timeoutMs: number;
  readonly #instances: number;
  readonly #fallbackRetryAfterMs: number;
  readonly #ttlMarginMs: number;
  readonly #clock: (() => number) | undefined;
  readonly #now: () => number;
  readonly #denyCache: DenyCache | undefined;
  readonly #localBuckets = new LRUCache<string, TokenBucketState>({ max: 10_000 });
  readonly #counters: PolicyCounters[];
  /** `[0, 1, …, policies - 1]`: the slot-to-policy map of a call that gives every policy one id. */
  readonly #identity: readonly number[];
  readonly #logger: RateLimiterLogger | undefined;
  readonly #onDecision: ((result: RateLimitResult) => void) | undefined;
  #redisHealthy = true;

  constructor(options: RateLimiterOptions) {
    const invalid = (message: string) =>
      new RateLimiterError(RateLimiterErrorCode.INVALID_OPTIONS, `RateLimiter: ${message}`);
    const prefix = options.keyPrefix ?? 'ratelimit:';
    if (/[{}]/.test(prefix))
      throw invalid('keyPrefix must not contain "{" or "}" (it would break the hash tag)');
    if (options.policies.length === 0) throw invalid('give at least one policy');
    const names = new Map<string, number>();
    this.policies = Object.freeze(
      options.policies.map((policy, index) => {
        if (typeof policy.name !== 'string' || policy.name === '') throw invalid('every policy needs a name');
        if (names.has(policy.name)) throw invalid(`two policies are named "${policy.name}"`);
        names.set(policy.name, index);
        if (!(policy.capacity > 0 && Number.isFinite(policy.capacity))) {
          throw invalid(`policy "${policy.name}": capacity must be a positive number`);
        }
        if (!(policy.ratePerSecond > 0 && Number.isFinite(policy.ratePerSecond))) {
          throw invalid(`policy "${policy.name}": ratePerSecond must be a positive number`);
        }
        const keyPrefix = policy.keyPrefix ?? `${prefix}${policy.name}:`;
        if (/[{}]/.test(keyPrefix))
          throw invalid(`policy "${policy.name}": keyPrefix must not contain "{" or "}"`);
        return Object.freeze({
          name: policy.name,
          capacity: policy.capacity,
          ratePerSecond: policy.ratePerSecond,
          keyPrefix,
          windowSeconds: policy.capacity / policy.ratePerSecond,
        });
      }),
    );
    this.#byName = names;
    this.algorithm = options.algorithm ?? 'token-bucket';
    this.#redis = options.redis;
    this.#isCluster = (options.redis as { isCluster?: boolean }).isCluster === true;
    this.#coalesceWrites = options.coalesceWrites !== false && !this.#isCluster;
    this.#flushAt = Math.min(
      MAX_BATCH_CALLS,
      Math.max(1, Math.floor(options.batchFlushAt ?? DEFAULT_FLUSH_AT)),
    );
    this.#run = defineScript(options.redis, this.algorithm);
    this.#run1 = defineScript(options.redis, this.algorithm, 1);
    this.#runBatch =
      options.batchCalls === false || this.#isCluster
        ? undefined
        : defineBatchScript(options.redis, this.algorithm);
    this.#hashTag = options.hashTag;
    this.#mode = options.failure?.mode ?? 'closed';
    this.#timeoutMs = options.failure?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#instances = options.failure?.expectedInstances ?? 1;
    this.#fallbackRetryAfterMs = options.failure?.retryAfterMs ?? 1000;
    if (!(this.#timeoutMs > 0)) throw invalid('failure.timeoutMs must be positive');
    if (!(this.#instances >= 1)) throw invalid('failure.expectedInstances must be at least 1');
    this.#ttlMarginMs = options.ttlMarginMs ?? 1000;
    this.#clock = options.clock;
    this.#now = options.clock ?? (() => performance.now());
    this.#denyCache =
      options.denyCache === false ? undefined : new DenyCache(options.denyCache?.max ?? 10_000);
    this.#counters = this.policies.map(() => ({ allowed: 0, denied: 0, deniedLocally: 0, fallback: 0 }));
    this.#identity = Object.freeze(this.policies.map((_, i) => i));
    this.#logger = options.logger;
    this.#onDecision = options.onDecision;
  }

  /**
   * The Redis key of `id`'s bucket for one policy (for operators; `peek` reads it for you).
   *
   * @example
   * ```ts
   * limiter.keyOf('recipient', 'user-42'); // 'ratelimit:recipient:{user-42}'
   * ```
   */
  keyOf(policy: string, id: string, tag?: string): string {
    const index = this.#byName.get(policy);
    const resolved = index === undefined ? undefined : this.policies[index];
    if (resolved === undefined) {
      throw new RateLimiterError(RateLimiterErrorCode.INVALID_KEY, `No policy is named "${policy}".`);
    }
    return bucketKey(resolved.keyPrefix, id, tag);
  }

  /**
   * Takes `cost` from every bucket of the call if every one has it, else from none.
   *
   * @param key one id for every policy, or per policy name one id or an array of ids (a batch: one
   *   bucket per id, all or nothing; an id given twice is one bucket charged the summed cost)
   * @param cost default 1; a number for every id, or per policy name a number (for each of its ids) or
   *   an array paired with its array of ids (missing names cost 1)
   * @throws {CostExceedsCapacityError} when a bucket's cost (summed over duplicates) exceeds its capacity
   * @throws {RateLimiterUnavailableError} when Redis is away and the failure mode is `throw`
   * @example
   * ```ts
   * const result = await limiter.consume({ apiKey: 'key-7', recipient: 'user-42' }, 1);
   * if (!result.allowed) reply.code(429).header('Retry-After', Math.ceil(result.retryAfterMs / 1000));
   * // A batch: one token per notification from the sender and from each recipient, all or nothing.
   * await limiter.consume({ sender: 'key-7', recipient: ['user-1', 'user-2', 'user-1'] }, { sender: 3, recipient: 1 });
   * ```
   */
  async consume(key: RateLimitKey, cost: RateLimitCost = 1): Promise<RateLimitResult> {
    const call = this.#prepare(key, cost);
    const started = this.#now();

    if (this.#denyCache !== undefined) {
      const cached = this.#checkDenyCache(call, started);
      if (cached !== undefined) return this.#emit(cached);
    }

    const reply = await this.#send(call);
    if (reply instanceof Unavailable) return this.#emit(this.#fallback(call, reply));
    const result = this.#toResult(call, reply, 'redis');
    if (!result.allowed) {
      this.#counters[call.slotPolicy[reply[1]! - 1]!]!.denied++;
      if (this.#denyCache !== undefined) this.#remember(call, reply, started);
    } else {
      for (const counters of this.#counters) counters.allowed++;
    }
    return this.#emit(result);
  }

  /**
   * The local deny cache's answer for some of a call's ids, without Redis and without consuming: a
   * denied result (`source: 'deny-cache'`, counted as denied locally) when one of `ids` is still denied
   * for `cost`, else `undefined` (which promises nothing: `consume` decides). For ids known before the
   * rest of the request, e.g. the API key before the body is read: a flood from a denied caller is
   * refused before any other work. Policies left out of `ids` are not looked at.
   *
   * @example
   * ```ts
   * const denied = limiter.deniedLocally({ sender: apiKeyId });
   * if (denied) return reply.code(429).header('Retry-After', Math.ceil(denied.retryAfterMs / 1000)).send();
   * ```
   */
  deniedLocally(ids: Readonly<Record<string, string>>, cost = 1): RateLimitResult | undefined {
    // With a hashTag function the bucket keys depend on every id of the call: nothing to look up.
    if (this.#denyCache === undefined || typeof this.#hashTag === 'function') return undefined;
    const last = this.#lastPrecheck;
    if (last !== undefined && last.cost === cost && sameIds(last.of, ids)) {
      const cached = this.#checkDenyCache(last.call, this.#now());
      return cached === undefined ? undefined : this.#emit(cached);
    }
    const tag = this.#hashTag;
    const keys: string[] = [];
    const costs: number[] = [];
    const slotIds: string[] = [];
    const slotPolicy: number[] = [];
    for (const name in ids) {
      const index = this.#byName.get(name);
      const id = ids[name];
      if (index === undefined) {
        throw new RateLimiterError(RateLimiterErrorCode.INVALID_KEY, `No policy is named "${name}".`);
      }
      if (typeof id !== 'string') continue;
      keys.push(bucketKey(this.policies[index]!.keyPrefix, id, tag));
      costs.push(cost);
      slotIds.push(id);
      slotPolicy.push(index);
    }
    const call: PreparedCall = { keys, costs, ids: slotIds, slotPolicy };
    this.#lastPrecheck = { of: { ...ids }, cost, call };
    const cached = this.#checkDenyCache(call, this.#now());
    return cached === undefined ? undefined : this.#emit(cached);
  }

  /**
   * Every policy's state for `key` without consuming (bypasses the deny cache; an operator's view).
   *
   * @throws {RateLimiterUnavailableError} when Redis is away, whatever the failure mode
   * @example
   * ```ts
   * const { policies } = await limiter.peek({ apiKey: 'key-7', recipient: 'user-42' });
   * ```
   */
  async peek(key: RateLimitKey): Promise<RateLimitResult> {
    const call = this.#prepare(key, 0);
    const reply = await this.#send(call);
    if (reply instanceof Unavailable)
      throw new RateLimiterUnavailableError(reply.reason, { cause: reply.cause });
    return this.#toResult(call, reply, 'redis');
  }

  /**
   * Deletes `key`'s buckets (every policy, every id) so they are full again, and forgets them in this
   * process's deny cache (other processes keep theirs until their `retryAfterMs` passes).
   *
   * @throws {RateLimiterUnavailableError} when Redis is away
   * @example
   * ```ts
   * await limiter.reset('user-42');
   * ```
   */
  async reset(key: RateLimitKey): Promise<void> {
    const { keys } = this.#prepare(key, 0);
    for (const k of keys) {
      this.#denyCache?.delete(k);
      this.#localBuckets.delete(k);
    }
    try {
      await this.#withTimeout(Promise.all(keys.map((k) => this.#redis.del(k))));
    } catch (error) {
      throw new RateLimiterUnavailableError(error === TIMEOUT ? 'timeout' : 'error', { cause: error });
    }
  }

  /**
   * A snapshot of the counters per policy name (allowed / denied / denied locally / fallback).
   *
   * @example
   * ```ts
   * for (const [policy, c] of Object.entries(limiter.metrics())) gauge.set({ policy }, c.denied);
   * ```
   */
  metrics(): Record<string, PolicyCounters> {
    const snapshot: Record<string, PolicyCounters> = {};
    this.policies.forEach((policy, index) => {
      snapshot[policy.name] = { ...this.#counters[index]! };
    });
    return snapshot;
  }

  /** Expands a call to slots (one per bucket), merges an id given twice for one policy, checks costs. */
  #prepare(key: RateLimitKey, cost: RateLimitCost): PreparedCall {
    const policies = this.policies;
    const n = policies.length;
    if (typeof key === 'string' && typeof cost === 'number' && this.#hashTag === undefined) {
      // The common call (one id, one cost). The same id and cost as the previous call (a flood on a hot
      // key, denied from the deny cache) reuse its prepared call: nothing mutates one once built.
      const last = this.#lastPrepared;
      if (last !== undefined && last.ids[0] === key && last.costs[0] === cost) return last;
      checkCost(policies[0]!.name, cost);
      const keys: string[] = new Array(n);
      const costs: number[] = new Array(n);
      const ids: string[] = new Array(n);
      for (let p = 0; p < n; p++) {
        const policy = policies[p]!;
        if (cost > policy.capacity) throw new CostExceedsCapacityError(policy.name, cost, policy.capacity);
        keys[p] = bucketKey(policy.keyPrefix, key);
        costs[p] = cost;
        ids[p] = key;
      }
      const call: PreparedCall = { keys, costs, ids, slotPolicy: this.#identity };
      this.#lastPrepared = call;
      return call;
    }
    if (typeof key !== 'string') {
      for (const name of Object.keys(key)) {
        if (!this.#byName.has(name)) {
          throw new RateLimiterError(RateLimiterErrorCode.INVALID_KEY, `No policy is named "${name}".`);
        }
      }
    }
    const ids: string[] = [];
    const costs: number[] = [];
    let slotPolicy: number[] | undefined;
    for (let p = 0; p < n; p++) {
      const name = policies[p]!.name;
      const given = typeof key === 'string' ? key : key[name];
      const c = typeof cost === 'number' ? cost : (cost[name] ?? 1);
      if (typeof given === 'string') {
        if (typeof c !== 'number') {
          throw new RateLimiterError(
            RateLimiterErrorCode.INVALID_COST,
            `Policy "${name}" has one id but an array of costs: give a number.`,
          );
        }
        ids.push(given);
        costs.push(checkCost(name, c));
        slotPolicy?.push(p);
        continue;
      }
      if (!Array.isArray(given) || given.length === 0) {
        throw new RateLimiterError(
          RateLimiterErrorCode.INVALID_KEY,
          `No id for policy "${name}": give a string, or a non-empty array of strings, for every policy.`,
        );
      }
      if (typeof c !== 'number' && (!Array.isArray(c) || c.length !== given.length)) {
        throw new RateLimiterError(
          RateLimiterErrorCode.INVALID_COST,
          `Policy "${name}" has ${given.length} ids: give a number, or an array of ${given.length} numbers.`,
        );
      }
      if (slotPolicy === undefined) slotPolicy = Array.from({ length: ids.length }, (_, i) => i);
      // One bucket per distinct id: the script would otherwise refill and write the same key twice and
      // check each cost alone (2 calls of cost 1 on a bucket with 1 token would both pass).
      const seen = given.length > 1 ? new Map<string, number>() : undefined;
      for (let j = 0; j < given.length; j++) {
        const id: unknown = given[j];
        if (typeof id !== 'string') {
          throw new RateLimiterError(
            RateLimiterErrorCode.INVALID_KEY,
            `Id ${j} of policy "${name}" is not a string.`,
          );
        }
        const cj = checkCost(name, typeof c === 'number' ? c : (c as readonly number[])[j]);
        const slot = seen?.get(id);
        if (slot !== undefined) {
          costs[slot]! += cj;
          continue;
        }
        seen?.set(id, ids.length);
        ids.push(id);
        costs.push(cj);
        slotPolicy.push(p);
      }
    }
    const slots = slotPolicy ?? this.#identity;
    for (let s = 0; s < costs.length; s++) {
      const policy = policies[slots[s]!]!;
      if (costs[s]! > policy.capacity)
        throw new CostExceedsCapacityError(policy.name, costs[s]!, policy.capacity);
    }

    let tag: string | undefined;
    if (this.#hashTag !== undefined) {
      tag = typeof this.#hashTag === 'string' ? this.#hashTag : this.#hashTag(this.#tagIds(key));
    } else if (this.#isCluster && ids.length > 1 && ids.some((id) => id !== ids[0])) {
      throw new RateLimiterError(
        RateLimiterErrorCode.CROSS_SLOT,
        'On Redis Cluster, the keys of one call must share a slot: set the `hashTag` option (see the README).',
      );
    }
    const keys: string[] = new Array(ids.length);
    for (let s = 0; s < ids.length; s++) keys[s] = bucketKey(policies[slots[s]!]!.keyPrefix, ids[s]!, tag);
    return { keys, costs, ids, slotPolicy: slots };
  }

  /** The ids a `hashTag` function sees: every policy given one id (arrays are left out). */
  #tagIds(key: RateLimitKey): Readonly<Record<string, string>> {
    const ids: Record<string, string> = {};
    for (const policy of this.policies) {
      const id = typeof key === 'string' ? key : key[policy.name];
      if (typeof id === 'string') ids[policy.name] = id;
    }
    return ids;
  }

  #checkDenyCache(call: PreparedCall, now: number): RateLimitResult | undefined {
    const cache = this.#denyCache!;
    for (let s = 0; s < call.keys.length; s++) {
      const entry = cache.get(call.keys[s]!);
      if (entry === undefined) continue;
      if (now >= entry.until) {
        cache.delete(call.keys[s]!);
        continue;
      }
      if (call.costs[s]! < entry.cost) continue;
      const p = call.slotPolicy[s]!;
      const policy = this.policies[p]!;
      this.#counters[p]!.deniedLocally++;
      const retryAfterMs = Math.max(1, Math.ceil(entry.until - now));
      const resetAfterMs = Math.max(
        retryAfterMs,
        Math.ceil(entry.resetAfterMs - (entry.retryAfterMs - retryAfterMs)),
      );
      const id = call.ids[s]!;
      return {
        allowed: false,
        limit: policy.capacity,
        remaining: 0,
        retryAfterMs,
        resetAfterMs,
        policy: policy.name,
        deniedId: id,
        policies: [
          {
            policy: policy.name,
            id,
            allowed: false,
            limit: policy.capacity,
            remaining: 0,
            retryAfterMs,
            resetAfterMs,
          },
        ],
        source: 'deny-cache',
      };
    }
    return undefined;
  }

  #remember(call: PreparedCall, reply: number[], started: number): void {
    // Counted from when the call started: Redis decided later, so `started + retryAfterMs` is never
    // after the moment the bucket really has the cost again. Every bucket that refused is remembered.
    for (let s = 0; s < call.keys.length; s++) {
      const at = 2 + 4 * s;
      if (reply[at] === 1) continue;
      this.#denyCache!.set(call.keys[s]!, {
        until: started + reply[at + 2]!,
        cost: call.costs[s]!,
        retryAfterMs: reply[at + 2]!,
        resetAfterMs: reply[at + 3]!,
      });
    }
  }

  async #send(call: PreparedCall): Promise<number[] | Unavailable> {
    const slots = call.keys.length;
    let reply: number[];
    try {
      // Never hand a command to a client that is not ready: ioredis would queue it offline and replay
      // it after a reconnect, when its decision no longer matters but its tokens would still be taken.
      const status = this.#redis.status;
      if (status !== 'ready') {
        if (!ACCEPTABLE_STATUSES_TO_WAIT.has(status))
          return this.#unhealthy(new Unavailable('not-connected'));
        if (status === 'wait') this.#redis.connect().catch(() => {});
        await this.#withTimeout(once(this.#redis, 'ready'));
      }
      if (this.#runBatch !== undefined) {
        reply = await this.#enqueue(call);
      } else {
        const args: (string | number)[] = [
          ...call.keys,
          this.#clock ? String(Math.round(this.#clock() * 1000)) : '',
        ];
        args.push(this.#ttlMarginMs);
        for (let s = 0; s < slots; s++) {
          const policy = this.policies[call.slotPolicy[s]!]!;
          args.push(policy.capacity, policy.ratePerSecond, call.costs[s]!);
        }
        if (this.#coalesceWrites) corkUntilNextTick((this.#redis as Redis).stream);
        reply = await this.#withTimeout((slots === 1 ? this.#run1 : this.#run)(slots, ...args));
      }
    } catch (error) {
      return this.#unhealthy(new Unavailable(error === TIMEOUT ? 'timeout' : 'error', error));
    }
    const code = reply[0];
    if (code === LuaCode.CostExceedsCapacity) {
      const s = reply[1]! - 1;
      const policy = this.policies[call.slotPolicy[s]!]!;
      throw new CostExceedsCapacityError(policy.name, call.costs[s]!, policy.capacity);
    }
    if (code !== LuaCode.Allowed && code !== LuaCode.Denied) {
      throw new RateLimiterError(
        RateLimiterErrorCode.UNEXPECTED_REPLY,
        `The rate-limit script answered code ${String(code)}: is another script registered under the same name?`,
      );
    }
    if (!this.#redisHealthy) {
      this.#redisHealthy = true;
      this.#logger?.warn({}, 'rate limiter: Redis answers again; decisions are shared again');
    }
    return reply;
  }

  /**
   * Queues a call for this turn's batch; resolves with the N-key script's reply for that call. The
   * batch leaves in `setImmediate`, not `process.nextTick`: Node drains the nextTick queue after every
   * I/O callback, and each HTTP request is its own callback, so under 50 concurrent requests every
   * nextTick batch held one call (82,683 of 82,683 in bench/gateway's limiter server); setImmediate runs
   * once the callbacks already due in this turn have run (there, batches of up to 50, ~20–30 typical).
   */
  #enqueue(call: PreparedCall): Promise<number[]> {
    return new Promise<number[]>((resolve, reject) => {
      this.#pending.push({ call, resolve, reject });
      if (this.#pending.length >= this.#flushAt) {
        // Full: it leaves now, and Redis works on it while this turn prepares the next one.
        this.#flush();
      } else if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(this.#flushImmediate);
      }
    });
  }

  readonly #flushImmediate = (): void => {
    this.#flushScheduled = false;
    this.#flush();
  };

  /**
   * Sends the calls queued in this turn, in call order: one script call per MAX_BATCH_CALLS calls or
   * MAX_BATCH_KEYS buckets, whichever comes first (a lone call runs the one-key or N-key script).
   */
  readonly #flush = (): void => {
    const pending = this.#pending;
    this.#pending = [];
    const now = this.#clock ? String(Math.round(this.#clock() * 1000)) : '';
    let corked = false;
    for (let from = 0; from < pending.length; ) {
      let to = from + 1;
      let keys = pending[from]!.call.keys.length;
      while (to < pending.length && to - from < MAX_BATCH_CALLS) {
        const more = pending[to]!.call.keys.length;
        if (keys + more > MAX_BATCH_KEYS) break;
        keys += more;
        to++;
      }
      if (!corked && to < pending.length && this.#coalesceWrites) {
        // Several script calls at once: one socket write for all of them.
        corkUntilNextTick((this.#redis as Redis).stream);
        corked = true;
      }
      if (to - from === 1) this.#sendAlone(pending[from]!, now);
      else this.#sendBatch(pending.slice(from, to), keys, now);
      from = to;
    }
  };

  #sendAlone(pending: PendingCall, now: string): void {
    const { call } = pending;
    const slots = call.keys.length;
    const args: (string | number)[] = [...call.keys, now, this.#ttlMarginMs];
    for (let s = 0; s < slots; s++) {
      const policy = this.policies[call.slotPolicy[s]!]!;
      args.push(policy.capacity, policy.ratePerSecond, call.costs[s]!);
    }
    this.#withTimeout((slots === 1 ? this.#run1 : this.#run)(slots, ...args)).then(
      pending.resolve,
      pending.reject,
    );
  }

  /** One batch script call (token-bucket-m.lua / gcra-m.lua) for `batch` (`keys` buckets in all); one timeout for the whole batch. */
  #sendBatch(batch: PendingCall[], keys: number, now: string): void {
    const args: (string | number)[] = new Array(keys);
    let k = 0;
    for (const { call } of batch) for (const key of call.keys) args[k++] = key;
    args.push(now, this.#ttlMarginMs);
    for (const { call } of batch) {
      const slots = call.keys.length;
      args.push(slots);
      for (let s = 0; s < slots; s++) {
        const policy = this.policies[call.slotPolicy[s]!]!;
        args.push(policy.capacity, policy.ratePerSecond, call.costs[s]!);
      }
    }
    this.#withTimeout(this.#runBatch!(keys, ...args)).then(
      (reply) => {
        // Per call, in order: token-bucket-n.lua's reply, 2 + 4 × its buckets.
        let at = 0;
        for (const pending of batch) {
          const end = at + 2 + 4 * pending.call.keys.length;
          pending.resolve(reply.slice(at, end));
          at = end;
        }
      },
      (error: unknown) => {
        for (const pending of batch) pending.reject(error);
      },
    );
  }

  #unhealthy(unavailable: Unavailable): Unavailable {
    if (this.#redisHealthy) {
      this.#redisHealthy = false;
      this.#logger?.warn(
        { reason: unavailable.reason, mode: this.#mode, err: unavailable.cause },
        'rate limiter: Redis unavailable; the failure mode decides until it answers again',
      );
    }
    return unavailable;
  }

  #withTimeout<T>(promise: Promise<T>): Promise<T> {
    // One promise and one timer per call (Promise.race plus finally cost two more promises).
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(reject, this.#timeoutMs, TIMEOUT);
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  #toResult(call: PreparedCall, reply: number[], source: DecisionSource): RateLimitResult {
    const slots = call.keys.length;
    const states: PolicyState[] = new Array(slots);
    for (let s = 0; s < slots; s++) {
      const at = 2 + 4 * s;
      const policy = this.policies[call.slotPolicy[s]!]!;
      states[s] = {
        policy: policy.name,
        id: call.ids[s]!,
        allowed: reply[at] === 1,
        limit: policy.capacity,
        remaining: reply[at + 1]!,
        retryAfterMs: reply[at + 2]!,
        resetAfterMs: reply[at + 3]!,
      };
    }
    const allowed = reply[0] === LuaCode.Allowed;
    return this.#decide(call, states, allowed, allowed ? -1 : reply[1]! - 1, source);
  }

  /**
   * One result from per-slot states: per policy its denying slot (longest wait) or, when it allows, its
   * slot with the fewest units left; on top the denying slot `denySlot`, or when allowed the policy with
   * the fewest units left.
   */
  #decide(
    call: PreparedCall,
    states: PolicyState[],
    allowed: boolean,
    denySlot: number,
    source: DecisionSource,
  ): RateLimitResult {
    let policies = states;
    if (call.slotPolicy !== this.#identity) {
      policies = new Array(this.policies.length);
      for (let s = 0; s < states.length; s++) {
        const state = states[s]!;
        const p = call.slotPolicy[s]!;
        const held = policies[p];
        if (
          held === undefined ||
          (held.allowed
            ? !state.allowed || state.remaining < held.remaining
            : !state.allowed && state.retryAfterMs > held.retryAfterMs)
        ) {
          policies[p] = state;
        }
      }
    }
    let top: PolicyState;
    if (denySlot >= 0) {
      top = states[denySlot]!;
      // The denying slot is also its policy's state: make sure of it when waits tie.
      if (policies !== states) policies[call.slotPolicy[denySlot]!] = top;
    } else {
      top = policies[0]!;
      for (let i = 1; i < policies.length; i++)
        if (policies[i]!.remaining < top.remaining) top = policies[i]!;
    }
    const result: RateLimitResult = {
      allowed,
      limit: top.limit,
      remaining: top.remaining,
      retryAfterMs: allowed ? 0 : top.retryAfterMs,
      resetAfterMs: top.resetAfterMs,
      policy: top.policy,
      policies,
      source,
    };
    if (!allowed && top.id !== undefined) result.deniedId = top.id;
    return result;
  }

  #fallback(call: PreparedCall, unavailable: Unavailable): RateLimitResult {
    const mode = this.#mode;
    if (mode === 'throw')
      throw new RateLimiterUnavailableError(unavailable.reason, { cause: unavailable.cause });
    for (const counters of this.#counters) counters.fallback++;
    const fallback = { mode, reason: unavailable.reason };
    const result =
      mode === 'local'
        ? this.#localDecision(call)
        : this.#decide(
            call,
            call.keys.map((_, s): PolicyState => {
              const policy = this.policies[call.slotPolicy[s]!]!;
              const allowed = mode === 'open';
              return {
                policy: policy.name,
                id: call.ids[s]!,
                allowed,
                limit: policy.capacity,
                remaining: allowed ? Math.floor(policy.capacity - call.costs[s]!) : 0,
                retryAfterMs: allowed ? 0 : this.#fallbackRetryAfterMs,
                resetAfterMs: allowed ? 0 : this.#fallbackRetryAfterMs,
              };
            }),
            mode === 'open',
            mode === 'open' ? -1 : 0,
            'fallback',
          );
    // A `closed` deny is the failure mode's, not a bucket's.
    if (mode === 'closed') delete result.deniedId;
    result.fallback = fallback;
    return result;
  }

  /** The `local` failure mode: an in-process token bucket per key at 1/expectedInstances of the policy. */
  #localDecision(call: PreparedCall): RateLimitResult {
    const nowUs = Math.round(this.#now() * 1000);
    const slots = call.keys.length;
    const share = (policy: Policy) =>
      [policy.capacity / this.#instances, policy.ratePerSecond / this.#instances] as const;
    const steps = call.keys.map((key, s) =>
      tokenBucketStep(
        this.#localBuckets.get(key),
        nowUs,
        ...share(this.policies[call.slotPolicy[s]!]!),
        call.costs[s]!,
      ),
    );
    const allowed = steps.every((step) => step.answer.allowed);
    let denySlot = -1;
    const states: PolicyState[] = new Array(slots);
    for (let s = 0; s < slots; s++) {
      const policy = this.policies[call.slotPolicy[s]!]!;
      const key = call.keys[s]!;
      const step = steps[s]!;
      if (allowed && step.state !== undefined) this.#localBuckets.set(key, step.state);
      // Denied as a whole: nothing was taken, so report the refilled bucket (a cost-0 step).
      const answer = allowed
        ? step.answer
        : tokenBucketStep(this.#localBuckets.get(key), nowUs, ...share(policy), 0).answer;
      if (!allowed && (denySlot < 0 || step.answer.retryAfterMs > steps[denySlot]!.answer.retryAfterMs)) {
        denySlot = s;
      }
      states[s] = {
        policy: policy.name,
        id: call.ids[s]!,
        allowed: step.answer.allowed,
        limit: policy.capacity,
        remaining: answer.remaining,
        retryAfterMs: step.answer.retryAfterMs,
        resetAfterMs: answer.resetAfterMs,
      };
    }
    return this.#decide(call, states, allowed, denySlot, 'fallback');
  }

  #emit(result: RateLimitResult): RateLimitResult {
    this.#onDecision?.(result);
    return result;
  }
}

/**
 * Corks `stream` (once per tick, whoever else writes to it) and uncorks it in `process.nextTick`, after
 * the current tick's promise continuations: their writes leave in one `writev` instead of one syscall each.
 */
/** Whether `a` and `b` name the same ids for the same policies. */
function sameIds(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  let n = 0;
  for (const name in b) {
    if (a[name] !== b[name]) return false;
    n++;
  }
  for (const _ in a) n--;
  return n === 0;
}

function corkUntilNextTick(stream: Writable | undefined): void {
  if (stream === undefined || stream.writableCorked !== 0 || typeof stream.cork !== 'function') return;
  stream.cork();
  process.nextTick(uncork, stream);
}

function uncork(stream: Writable): void {
  stream.uncork();
}

/** Validates one cost given for policy `name`. */
function checkCost(name: string, cost: unknown): number {
  if (typeof cost !== 'number' || !Number.isFinite(cost) || cost < 0) {
    throw new RateLimiterError(
      RateLimiterErrorCode.INVALID_COST,
      `Cost ${String(cost)} for policy "${name}" is not a finite number >= 0.`,
    );
  }
  return cost;
}

const TIMEOUT = Symbol('timeout');
