import { once } from 'node:events';
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
import { type Algorithm, defineScript, LuaCode, type ScriptCall } from './scripts.js';

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
   * Default: each key is tagged by its own id (single node, or one id per call).
   */
  hashTag?: string | ((ids: Readonly<Record<string, string>>) => string);
  /** Default `{ mode: 'closed', timeoutMs: 150 }`. */
  failure?: FailureOptions;
  /** In-process cache of denied keys (no Redis call until `retryAfterMs` passes). Default `{ max: 10_000 }`. */
  denyCache?: false | { max?: number };
  /** Added to every key's TTL beyond the time to refill fully. Default 1000 ms. */
  ttlMarginMs?: number;
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
  /** Whether this policy alone would allow the call. */
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
  policy: string;
  /**
   * Every policy's state, in the limiter's order. For a `deny-cache` decision only the denying policy
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
 * Ids of one call: one string for every policy, or one per policy name.
 *
 * @example
 * ```ts
 * const ids: RateLimitKey = { apiKey: 'key-7', recipient: 'user-42' };
 * ```
 */
export type RateLimitKey = string | Readonly<Record<string, string>>;

/**
 * Cost of one call: one number for every policy, or one per policy name (a missing name costs 1).
 *
 * @example
 * ```ts
 * const cost: RateLimitCost = { apiKey: 1, recipient: 3 };
 * ```
 */
export type RateLimitCost = number | Readonly<Record<string, number>>;

interface DenyEntry {
  /** Local clock (ms) until which calls with at least `cost` are denied. */
  until: number;
  cost: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

interface PreparedCall {
  keys: string[];
  costs: number[];
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
  readonly #byName: ReadonlyMap<string, number>;
  readonly #hashTag: RateLimiterOptions['hashTag'];
  readonly #isCluster: boolean;
  readonly #mode: FailureMode;
  readonly #timeoutMs: number;
  readonly #instances: number;
  readonly #fallbackRetryAfterMs: number;
  readonly #ttlMarginMs: number;
  readonly #clock: (() => number) | undefined;
  readonly #now: () => number;
  readonly #denyCache: LRUCache<string, DenyEntry> | undefined;
  readonly #localBuckets = new LRUCache<string, TokenBucketState>({ max: 10_000 });
  readonly #counters: PolicyCounters[];
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
    this.#run = defineScript(options.redis, this.algorithm);
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
      options.denyCache === false
        ? undefined
        : new LRUCache<string, DenyEntry>({ max: options.denyCache?.max ?? 10_000 });
    this.#counters = this.policies.map(() => ({ allowed: 0, denied: 0, deniedLocally: 0, fallback: 0 }));
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
   * Takes `cost` from every policy's bucket if every one has it, else from none.
   *
   * @param key one id for every policy, or an id per policy name
   * @param cost default 1; a number for every policy or one per policy name (missing names cost 1)
   * @throws {CostExceedsCapacityError} when a cost exceeds its policy's capacity
   * @throws {RateLimiterUnavailableError} when Redis is away and the failure mode is `throw`
   * @example
   * ```ts
   * const result = await limiter.consume({ apiKey: 'key-7', recipient: 'user-42' }, 1);
   * if (!result.allowed) reply.code(429).header('Retry-After', Math.ceil(result.retryAfterMs / 1000));
   * ```
   */
  async consume(key: RateLimitKey, cost: RateLimitCost = 1): Promise<RateLimitResult> {
    const call = this.#prepare(key, cost);
    const started = this.#now();

    const cached = this.#denyCache === undefined ? undefined : this.#checkDenyCache(call, started);
    if (cached !== undefined) return this.#emit(cached);

    const reply = await this.#send(call);
    if (reply instanceof Unavailable) return this.#emit(this.#fallback(call, reply));
    const result = this.#toResult(reply, 'redis');
    if (!result.allowed) {
      this.#counters[reply[1]! - 1]!.denied++;
      if (this.#denyCache !== undefined) this.#remember(call, result, started);
    } else {
      for (const counters of this.#counters) counters.allowed++;
    }
    return this.#emit(result);
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
    const reply = await this.#send(this.#prepare(key, 0));
    if (reply instanceof Unavailable)
      throw new RateLimiterUnavailableError(reply.reason, { cause: reply.cause });
    return this.#toResult(reply, 'redis');
  }

  /**
   * Deletes `key`'s buckets (every policy) so they are full again, and forgets them in this process's
   * deny cache (other processes keep theirs until their `retryAfterMs` passes).
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

  #prepare(key: RateLimitKey, cost: RateLimitCost): PreparedCall {
    const n = this.policies.length;
    const ids: string[] = new Array(n);
    if (typeof key === 'string') {
      ids.fill(key);
    } else {
      for (const name of Object.keys(key)) {
        if (!this.#byName.has(name)) {
          throw new RateLimiterError(RateLimiterErrorCode.INVALID_KEY, `No policy is named "${name}".`);
        }
      }
      for (let i = 0; i < n; i++) {
        const id = key[this.policies[i]!.name];
        if (typeof id !== 'string') {
          throw new RateLimiterError(
            RateLimiterErrorCode.INVALID_KEY,
            `No id for policy "${this.policies[i]!.name}": give a string for every policy.`,
          );
        }
        ids[i] = id;
      }
    }
    let tag: string | undefined;
    if (this.#hashTag !== undefined) {
      tag =
        typeof this.#hashTag === 'string'
          ? this.#hashTag
          : this.#hashTag(
              typeof key === 'string' ? Object.fromEntries(this.policies.map((p) => [p.name, key])) : key,
            );
    } else if (this.#isCluster && n > 1 && ids.some((id) => id !== ids[0])) {
      throw new RateLimiterError(
        RateLimiterErrorCode.CROSS_SLOT,
        'On Redis Cluster, the keys of one call must share a slot: set the `hashTag` option (see the README).',
      );
    }
    const keys: string[] = new Array(n);
    const costs: number[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const policy = this.policies[i]!;
      keys[i] = bucketKey(policy.keyPrefix, ids[i]!, tag);
      const c = typeof cost === 'number' ? cost : (cost[policy.name] ?? 1);
      if (typeof c !== 'number' || !Number.isFinite(c) || c < 0) {
        throw new RateLimiterError(
          RateLimiterErrorCode.INVALID_COST,
          `Cost ${String(c)} for policy "${policy.name}" is not a finite number >= 0.`,
        );
      }
      if (c > policy.capacity) throw new CostExceedsCapacityError(policy.name, c, policy.capacity);
      costs[i] = c;
    }
    return { keys, costs };
  }

  #checkDenyCache(call: PreparedCall, now: number): RateLimitResult | undefined {
    const cache = this.#denyCache!;
    for (let i = 0; i < call.keys.length; i++) {
      const entry = cache.get(call.keys[i]!);
      if (entry === undefined) continue;
      if (now >= entry.until) {
        cache.delete(call.keys[i]!);
        continue;
      }
      if (call.costs[i]! < entry.cost) continue;
      const policy = this.policies[i]!;
      this.#counters[i]!.deniedLocally++;
      const retryAfterMs = Math.max(1, Math.ceil(entry.until - now));
      const state: PolicyState = {
        policy: policy.name,
        allowed: false,
        limit: policy.capacity,
        remaining: 0,
        retryAfterMs,
        resetAfterMs: Math.max(
          retryAfterMs,
          Math.ceil(entry.resetAfterMs - (entry.retryAfterMs - retryAfterMs)),
        ),
      };
      return { ...state, allowed: false, policies: [state], source: 'deny-cache' };
    }
    return undefined;
  }

  #remember(call: PreparedCall, result: RateLimitResult, started: number): void {
    // Counted from when the call started: Redis decided later, so `started + retryAfterMs` is never
    // after the moment the bucket really has the cost again.
    for (let i = 0; i < result.policies.length; i++) {
      const state = result.policies[i]!;
      if (state.allowed) continue;
      this.#denyCache!.set(call.keys[i]!, {
        until: started + state.retryAfterMs,
        cost: call.costs[i]!,
        retryAfterMs: state.retryAfterMs,
        resetAfterMs: state.resetAfterMs,
      });
    }
  }

  async #send(call: PreparedCall): Promise<number[] | Unavailable> {
    const args: (string | number)[] = [
      ...call.keys,
      this.#clock ? String(Math.round(this.#clock() * 1000)) : '',
    ];
    args.push(this.#ttlMarginMs);
    for (let i = 0; i < call.keys.length; i++) {
      const policy = this.policies[i]!;
      args.push(policy.capacity, policy.ratePerSecond, call.costs[i]!);
    }
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
      reply = await this.#withTimeout(this.#run(call.keys.length, ...args));
    } catch (error) {
      return this.#unhealthy(new Unavailable(error === TIMEOUT ? 'timeout' : 'error', error));
    }
    const code = reply[0];
    if (code === LuaCode.CostExceedsCapacity) {
      const policy = this.policies[reply[1]! - 1]!;
      throw new CostExceedsCapacityError(policy.name, call.costs[reply[1]! - 1]!, policy.capacity);
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

  #toResult(reply: number[], source: DecisionSource): RateLimitResult {
    const policies: PolicyState[] = new Array(this.policies.length);
    let pick = 0;
    for (let i = 0; i < this.policies.length; i++) {
      const at = 2 + 4 * i;
      policies[i] = {
        policy: this.policies[i]!.name,
        allowed: reply[at] === 1,
        limit: this.policies[i]!.capacity,
        remaining: reply[at + 1]!,
        retryAfterMs: reply[at + 2]!,
        resetAfterMs: reply[at + 3]!,
      };
      if (policies[i]!.remaining < policies[pick]!.remaining) pick = i;
    }
    const allowed = reply[0] === LuaCode.Allowed;
    if (!allowed) pick = reply[1]! - 1;
    const top = policies[pick]!;
    return {
      allowed,
      limit: top.limit,
      remaining: top.remaining,
      retryAfterMs: allowed ? 0 : top.retryAfterMs,
      resetAfterMs: top.resetAfterMs,
      policy: top.policy,
      policies,
      source,
    };
  }

  #fallback(call: PreparedCall, unavailable: Unavailable): RateLimitResult {
    const mode = this.#mode;
    if (mode === 'throw')
      throw new RateLimiterUnavailableError(unavailable.reason, { cause: unavailable.cause });
    for (const counters of this.#counters) counters.fallback++;
    const fallback = { mode, reason: unavailable.reason };
    if (mode === 'local') return { ...this.#localDecision(call), source: 'fallback', fallback };
    const allowed = mode === 'open';
    const policies = this.policies.map(
      (policy, i): PolicyState => ({
        policy: policy.name,
        allowed,
        limit: policy.capacity,
        remaining: allowed ? Math.floor(policy.capacity - call.costs[i]!) : 0,
        retryAfterMs: allowed ? 0 : this.#fallbackRetryAfterMs,
        resetAfterMs: allowed ? 0 : this.#fallbackRetryAfterMs,
      }),
    );
    const top = policies[0]!;
    return { ...top, policy: top.policy, policies, source: 'fallback', fallback };
  }

  /** The `local` failure mode: an in-process token bucket per key at 1/expectedInstances of the policy. */
  #localDecision(call: PreparedCall): Omit<RateLimitResult, 'source'> {
    const nowUs = Math.round(this.#now() * 1000);
    const share = (policy: Policy) =>
      [policy.capacity / this.#instances, policy.ratePerSecond / this.#instances] as const;
    const steps = this.policies.map((policy, i) =>
      tokenBucketStep(this.#localBuckets.get(call.keys[i]!), nowUs, ...share(policy), call.costs[i]!),
    );
    const allowed = steps.every((step) => step.answer.allowed);
    let pick = 0;
    const policies = this.policies.map((policy, i): PolicyState => {
      const step = steps[i]!;
      if (allowed && step.state !== undefined) this.#localBuckets.set(call.keys[i]!, step.state);
      // Denied as a whole: nothing was taken, so report the refilled bucket (a cost-0 step).
      const answer = allowed
        ? step.answer
        : tokenBucketStep(this.#localBuckets.get(call.keys[i]!), nowUs, ...share(policy), 0).answer;
      const better = allowed
        ? answer.remaining < steps[pick]!.answer.remaining
        : step.answer.retryAfterMs > steps[pick]!.answer.retryAfterMs;
      if (better) pick = i;
      return {
        policy: policy.name,
        allowed: step.answer.allowed,
        limit: policy.capacity,
        remaining: answer.remaining,
        retryAfterMs: step.answer.retryAfterMs,
        resetAfterMs: answer.resetAfterMs,
      };
    });
    const top = policies[pick]!;
    return { ...top, allowed, retryAfterMs: allowed ? 0 : top.retryAfterMs, policies };
  }

  #emit(result: RateLimitResult): RateLimitResult {
    this.#onDecision?.(result);
    return result;
  }
}

const TIMEOUT = Symbol('timeout');
